package manifold_test

import (
	"math/rand/v2"
	"testing"

	"github.com/orthonet/orthonet/internal/problem"
	"github.com/orthonet/orthonet/manifold"
)

// TestRetractionDrift takes 600 Riemannian gradient steps (step size 0.5)
// on a square 20 x 20 Procrustes problem with each retraction: rounding in
// one step must not grow in the next. Before polar formed the Gram matrix of
// X + V and exp re-orthonormalized, both reached ||X^T X - I||_F > 1 within
// 40 steps here.
func TestRetractionDrift(t *testing.T) {
	const n = 20
	for _, kind := range manifold.Retractions {
		m, _ := manifold.NewStiefel[float64](n, n)
		m.Retraction = kind
		rng := rand.New(rand.NewPCG(42, 7))
		pr := problem.NewProcrustes[float64](n, n, rng)
		x := make([]float64, n*n)
		_ = m.Random(x, rng)
		pr.AlignComponent(x)
		g, v, next := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
		for i := 0; i < 600; i++ {
			pr.Grad(g, x)
			if err := m.Proj(v, x, g); err != nil {
				t.Fatal(err)
			}
			for k := range v {
				v[k] *= -0.5
			}
			if err := m.Retract(next, x, v); err != nil {
				t.Fatal(err)
			}
			copy(x, next)
		}
		if f := m.Feasibility(x); !(f < 1e-11) {
			t.Errorf("%v: ||X^T X - I||_F = %.1e after 600 steps", kind, f)
		}
		if gap := problem.Gap(pr.Value(x), pr.Optimum()); !(gap < 1e-6) {
			t.Errorf("%v: gap %.1e after 600 steps", kind, gap)
		}
	}
}
