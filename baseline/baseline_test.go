package baseline

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/problem"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

type maker func(n, p int) (optim.Optimizer[float64], error)

// TestConverges runs every baseline to an optimality gap below 1e-6 on
// Procrustes (closed-form optimum from the SVD of B A^T) and PCA (the sum of
// the top p eigenvalues), from a Haar-random start, and checks that the
// feasible methods stay on St(n,p) and the infeasible ones end near it.
func TestConverges(t *testing.T) {
	const n, p = 24, 8
	cases := []struct {
		name     string
		feasible bool
		// step sizes for Procrustes and PCA
		procrustes, pca maker
		maxIter         int
	}{
		{"landing", false,
			func(n, p int) (optim.Optimizer[float64], error) { return NewLanding[float64](n, p, 0.5, 1) },
			func(n, p int) (optim.Optimizer[float64], error) { return NewLanding[float64](n, p, 0.1, 1) }, 5000},
		{"pcal", false,
			func(n, p int) (optim.Optimizer[float64], error) { return NewPCAL[float64](n, p, 0.1, 1) },
			func(n, p int) (optim.Optimizer[float64], error) { return NewPCAL[float64](n, p, 0.1, 1) }, 5000},
		{"rcd", true,
			func(n, p int) (optim.Optimizer[float64], error) { return NewRCD[float64](n, p, 0.1) },
			func(n, p int) (optim.Optimizer[float64], error) { return NewRCD[float64](n, p, 0.1) }, 2000},
		{"tsd", true,
			func(n, p int) (optim.Optimizer[float64], error) { return NewTSD[float64](n, p, 0.1) },
			func(n, p int) (optim.Optimizer[float64], error) { return NewTSD[float64](n, p, 0.1) }, 2000},
		{"rssm", true,
			func(n, p int) (optim.Optimizer[float64], error) { return NewRSSM[float64](n, p, 4, 0.5, 1) },
			func(n, p int) (optim.Optimizer[float64], error) { return NewRSSM[float64](n, p, 4, 0.1, 1) }, 20000},
		{"obcd", true,
			func(n, p int) (optim.Optimizer[float64], error) { return NewOBCD[float64](n, p, 12, 0.5, 1) },
			func(n, p int) (optim.Optimizer[float64], error) { return NewOBCD[float64](n, p, 12, 0.5, 1) }, 20000},
	}
	for _, tc := range cases {
		for _, prob := range []string{"procrustes", "pca"} {
			rng := rand.New(rand.NewPCG(1, 2))
			var pr problem.Problem[float64]
			mk := tc.procrustes
			if prob == "pca" {
				pr, mk = problem.NewPCA[float64](n, p, rng), tc.pca
			} else {
				pr = problem.NewProcrustes[float64](n, p, rng)
			}
			st, _ := manifold.NewStiefel[float64](n, p)
			x := make([]float64, n*p)
			_ = st.Random(x, rng)
			opt, err := mk(n, p)
			if err != nil {
				t.Fatal(err)
			}
			g := make([]float64, n*p)
			gap, it := math.Inf(1), 0
			for ; it < tc.maxIter; it++ {
				if gap = problem.Gap(pr.Value(x), pr.Optimum()); gap < 1e-6 {
					break
				}
				pr.Grad(g, x)
				if err := opt.Step(x, g); err != nil {
					t.Fatalf("%s/%s step %d: %v", tc.name, prob, it, err)
				}
			}
			feas := st.Feasibility(x)
			t.Logf("%s/%s: gap %.1e after %d steps, ||X^T X - I||_F %.1e", tc.name, prob, gap, it, feas)
			if !(gap < 1e-6) {
				t.Errorf("%s/%s: gap %.2e after %d steps, want < 1e-6", tc.name, prob, gap, it)
			}
			if tol := map[bool]float64{true: 1e-10, false: 1e-4}[tc.feasible]; !(feas < tol) {
				t.Errorf("%s/%s: ||X^T X - I||_F = %.1e, want < %.0e", tc.name, prob, feas, tol)
			}
		}
	}
}

func TestBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"p > n", func() error { _, err := NewRCD[float64](3, 4, 0.1); return err }, "want 1 <= p <= n"},
		{"lr", func() error { _, err := NewLanding[float64](4, 2, 0, 1); return err }, "learning rate 0"},
		{"penalty", func() error { _, err := NewPCAL[float64](4, 2, 0.1, -1); return err }, "penalty -1"},
		{"rssm r", func() error { _, err := NewRSSM[float64](5, 3, 4, 0.1, 1); return err }, "r = 4 of 3 columns"},
		{"obcd r", func() error { _, err := NewOBCD[float64](5, 3, 6, 0.1, 1); return err }, "r = 6 of 5 rows"},
		{"shape", func() error {
			o, _ := NewTSD[float64](4, 2, 0.1)
			return o.Step(make([]float64, 8), make([]float64, 7))
		}, "gradient 7 entries"},
		{"nan", func() error {
			o, _ := NewOBCD[float64](4, 2, 2, 0.1, 1)
			g := make([]float64, 8)
			g[3] = math.NaN()
			return o.Step(make([]float64, 8), g)
		}, "NaN"},
	} {
		if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
