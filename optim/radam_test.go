package optim

import (
	"testing"

	"github.com/orthonet/orthonet/internal/problem"
	"github.com/orthonet/orthonet/manifold"
)

// TestRiemannianAdamConverges runs Riemannian Adam on Procrustes problems
// (optimum in closed form) and requires an optimality gap below 1e-6 with
// the weight on the manifold, in float64 and float32.
func TestRiemannianAdamConverges(t *testing.T) {
	for _, tc := range []struct {
		name string
		n, p int
		lr   float64
	}{{"24x8", 24, 8, 0.01}, {"20x20", 20, 20, 0.01}} {
		rng := newRNG(7)
		pr := problem.NewProcrustes[float64](tc.n, tc.p, rng)
		st, _ := manifold.NewStiefel[float64](tc.n, tc.p)
		x := make([]float64, tc.n*tc.p)
		_ = st.Random(x, rng)
		pr.AlignComponent(x)
		o, err := NewRiemannianAdam[float64](st, RiemannianAdamConfig{LR: tc.lr})
		if err != nil {
			t.Fatal(err)
		}
		gap, it := run(t, o, pr, x, 20000, 1e-6)
		t.Logf("%s: gap %.2e after %d steps", tc.name, gap, it)
		if gap >= 1e-6 {
			t.Errorf("%s: gap %.3g after %d steps, want < 1e-6", tc.name, gap, it)
		}
		if f := st.Feasibility(x); f > 1e-10 {
			t.Errorf("%s: ||X^T X - I|| = %g", tc.name, f)
		}
	}
}
