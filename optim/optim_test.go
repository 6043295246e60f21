package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/internal/problem"
	"github.com/orthonet/orthonet/manifold"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 3)) }

// run takes up to maxIter steps of opt on pr from x and returns the final
// optimality gap and the number of steps it took to fall below tol.
func run[T Float](t *testing.T, opt Optimizer[T], pr problem.Problem[T], x []T, maxIter int, tol float64) (float64, int) {
	t.Helper()
	g := make([]T, len(x))
	fstar := pr.Optimum()
	for it := 0; it < maxIter; it++ {
		if gap := problem.Gap(pr.Value(x), fstar); gap < tol {
			return gap, it
		}
		pr.Grad(g, x)
		if err := opt.Step(x, g); err != nil {
			t.Fatalf("step %d: %v", it, err)
		}
	}
	return problem.Gap(pr.Value(x), fstar), maxIter
}

type method struct {
	name string
	make func(m manifold.Manifold[float64]) (Optimizer[float64], error)
}

func rsdm(cfg RSDMConfig) func(m manifold.Manifold[float64]) (Optimizer[float64], error) {
	return func(m manifold.Manifold[float64]) (Optimizer[float64], error) { return NewRSDM(m, cfg) }
}

func rgd(cfg RGDConfig) func(m manifold.Manifold[float64]) (Optimizer[float64], error) {
	return func(m manifold.Manifold[float64]) (Optimizer[float64], error) { return NewRGD(m, cfg) }
}

// TestConvergence runs every method to an optimality gap below 1e-8 in
// float64 on problems with a known optimum: Procrustes (closed form from the
// SVD of B A^T), PCA (sum of the top-p eigenvalues) on the Stiefel manifold,
// and PCA on the Grassmann manifold.
func TestConvergence(t *testing.T) {
	const tol = 1e-8
	type setup struct {
		name    string
		n, p    int
		grass   bool
		retr    manifold.Retraction
		problem func(rng *rand.Rand) problem.Problem[float64]
		methods []method
		iters   int
	}
	procrustes := func(n, p int) func(*rand.Rand) problem.Problem[float64] {
		return func(rng *rand.Rand) problem.Problem[float64] { return problem.NewProcrustes[float64](n, p, rng) }
	}
	pca := func(n, p int) func(*rand.Rand) problem.Problem[float64] {
		return func(rng *rand.Rand) problem.Problem[float64] { return problem.NewPCA[float64](n, p, rng) }
	}
	// core runs RGD, RSDM with every sampler of Samplers (rsdm-NAME, seeded
	// 1, 2, ... in the table's order), RSDM-momentum and coordinate descent.
	core := func(lrRGD, lrRSDM float64, r int) []method {
		ms := []method{
			{"rgd", rgd(RGDConfig{LR: lrRGD})},
			{"rgd-momentum", rgd(RGDConfig{LR: lrRGD, Momentum: 0.5})},
		}
		for i, s := range Samplers {
			ms = append(ms, method{"rsdm-" + s.String(), rsdm(RSDMConfig{LR: lrRSDM, SubmanifoldSize: r, Sampling: s, Seed: uint64(i + 1)})})
		}
		return append(ms,
			method{"rsdm-momentum", rsdm(RSDMConfig{LR: lrRSDM / 2, SubmanifoldSize: r, Momentum: 0.5, InnerSteps: 5, Seed: 4})},
			method{"coordinate", func(m manifold.Manifold[float64]) (Optimizer[float64], error) {
				return NewCoordinateDescent(m, lrRSDM, 5)
			}})
	}
	var setups []setup
	setups = append(setups,
		setup{name: "procrustes-20x20", n: 20, p: 20, problem: procrustes(20, 20), methods: core(0.4, 0.8, 10), iters: 100000},
		setup{name: "procrustes-24x8", n: 24, p: 8, problem: procrustes(24, 8), methods: core(0.3, 0.6, 12), iters: 100000},
		setup{name: "pca-30x10", n: 30, p: 10, problem: pca(30, 10), methods: core(0.1, 0.4, 15), iters: 300000},
		setup{name: "grassmann-pca-30x10", n: 30, p: 10, grass: true, problem: pca(30, 10), methods: core(0.1, 0.4, 15), iters: 300000},
	)
	for _, kind := range manifold.Retractions[1:] {
		setups = append(setups, setup{name: "pca-30x10-" + kind.String(), n: 30, p: 10, retr: kind, problem: pca(30, 10),
			methods: []method{
				{"rgd", rgd(RGDConfig{LR: 0.1})},
				{"rsdm-p", rsdm(RSDMConfig{LR: 0.4, SubmanifoldSize: 15, Retraction: kind, Seed: 6})},
			}, iters: 50000})
	}
	for _, s := range setups {
		for _, me := range s.methods {
			t.Run(s.name+"/"+me.name, func(t *testing.T) {
				rng := newRNG(42)
				pr := s.problem(rng)
				var m manifold.Manifold[float64]
				if s.grass {
					g, _ := manifold.NewGrassmann[float64](s.n, s.p)
					g.Retraction = s.retr
					m = g
				} else {
					st, _ := manifold.NewStiefel[float64](s.n, s.p)
					st.Retraction = s.retr
					m = st
				}
				x := make([]float64, s.n*s.p)
				if err := m.Random(x, rng); err != nil {
					t.Fatal(err)
				}
				if pc, ok := pr.(*problem.Procrustes[float64]); ok {
					pc.AlignComponent(x)
				}
				opt, err := me.make(m)
				if err != nil {
					t.Fatal(err)
				}
				gap, it := run(t, opt, pr, x, s.iters, tol)
				feas := m.Feasibility(x)
				t.Logf("gap %.2e after %d steps, ||X^T X - I|| = %.1e", gap, it, feas)
				if gap >= tol {
					t.Errorf("gap %.3e after %d steps, want < %g", gap, it, tol)
				}
				if feas > 1e-10 {
					t.Errorf("||X^T X - I|| = %g", feas)
				}
			})
		}
	}
}

// TestCoordinateDescentIsGivens checks that RSDM-P with r = 2 rotates two
// rows by the Givens rotation G_{k,l}(theta) with tan(theta) = eta * a, a the
// (k,l) entry of (G X^T - X G^T)/2 (the QR retraction of [[1, -eta a],
// [eta a, 1]]), built here as an explicit n x n matrix.
func TestCoordinateDescentIsGivens(t *testing.T) {
	const n, p, lr = 7, 3, 0.3
	rng := newRNG(5)
	st, _ := manifold.NewStiefel[float64](n, p)
	x := make([]float64, n*p)
	_ = st.Random(x, rng)
	opt, err := NewCoordinateDescent(st, lr, 99)
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 20; step++ {
		g := make([]float64, n*p)
		for i := range g {
			g[i] = rng.NormFloat64()
		}
		before := append([]float64(nil), x...)
		if err := opt.Step(x, g); err != nil {
			t.Fatal(err)
		}
		var rows []int
		for i := 0; i < n; i++ {
			for j := 0; j < p; j++ {
				if x[i*p+j] != before[i*p+j] {
					rows = append(rows, i)
					break
				}
			}
		}
		if len(rows) != 2 {
			t.Fatalf("step %d changed rows %v, want exactly two", step, rows)
		}
		k, l := rows[0], rows[1]
		a := (linalg.Dot(g[k*p:k*p+p], before[l*p:l*p+p]) - linalg.Dot(before[k*p:k*p+p], g[l*p:l*p+p])) / 2
		theta := math.Atan(lr * a)
		giv := make([]float64, n*n)
		linalg.Identity(n, giv)
		c, s := math.Cos(theta), math.Sin(theta)
		giv[k*n+k], giv[l*n+l] = c, c
		giv[k*n+l], giv[l*n+k] = -s, s
		want := make([]float64, n*p)
		linalg.Mul(false, false, n, p, n, giv, before, want)
		for i := range want {
			if math.Abs(want[i]-x[i]) > 1e-14 {
				t.Fatalf("step %d: RSDM-P(r=2) differs from the Givens rotation by %g at %d", step, math.Abs(want[i]-x[i]), i)
			}
		}
	}
}

// TestAllocs checks that steps after the first allocate nothing.
func TestAllocs(t *testing.T) {
	testAllocs[float64](t)
	testAllocs[float32](t)
}

func testAllocs[T Float](t *testing.T) {
	const n, p = 40, 12
	rng := newRNG(8)
	type opt struct {
		name string
		make func() (Optimizer[T], error)
	}
	var opts []opt
	for _, kind := range manifold.Retractions {
		st, _ := manifold.NewStiefel[T](n, p)
		st.Retraction = kind
		opts = append(opts,
			opt{"rgd-" + kind.String(), func() (Optimizer[T], error) { return NewRGD[T](st, RGDConfig{LR: 0.01, Momentum: 0.9}) }},
			opt{"rsdm-p-" + kind.String(), func() (Optimizer[T], error) {
				return NewRSDM[T](st, RSDMConfig{LR: 0.01, SubmanifoldSize: 8, Retraction: kind, ReorthEvery: 3})
			}})
	}
	st, _ := manifold.NewStiefel[T](n, p)
	opts = append(opts,
		opt{"rsdm-o", func() (Optimizer[T], error) {
			return NewRSDM[T](st, RSDMConfig{LR: 0.01, SubmanifoldSize: 8, Sampling: Orthogonal})
		}},
		opt{"rsdm-blocks", func() (Optimizer[T], error) {
			return NewRSDM[T](st, RSDMConfig{LR: 0.01, SubmanifoldSize: 8, Sampling: Blocks})
		}},
		opt{"rsdm-momentum", func() (Optimizer[T], error) {
			return NewRSDM[T](st, RSDMConfig{LR: 0.01, SubmanifoldSize: 8, Momentum: 0.5, InnerSteps: 3, Sampling: Orthogonal})
		}},
	)
	for _, o := range opts {
		t.Run(fmt.Sprintf("%T/%s", *new(T), o.name), func(t *testing.T) {
			x := make([]T, n*p)
			_ = st.Random(x, rng)
			g := make([]T, n*p)
			for i := range g {
				g[i] = T(rng.NormFloat64())
			}
			opt, err := o.make()
			if err != nil {
				t.Fatal(err)
			}
			if err := opt.Step(x, g); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(20, func() {
				if err := opt.Step(x, g); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per step, want 0", allocs)
			}
		})
	}
}

// TestFloat32Feasibility takes 10,000 float32 RSDM steps on a 256 x 128
// weight with random gradients and checks that ||W^T W - I||_F stays below
// 1e-4 throughout with the default re-orthonormalization, for both
// samplers. (With none, permutation sampling drifted to 2.1e-5 on OpenBLAS
// but 1.2e-4 on pure-Go gonum, whose float32 products round differently.)
func TestFloat32Feasibility(t *testing.T) {
	const n, p, steps = 256, 128, 10000
	for _, tc := range []struct {
		sampling Sampler
		reorth   int
	}{{Permutation, 0}, {Orthogonal, 0}} {
		t.Run(fmt.Sprintf("%v/reorth=%d", tc.sampling, tc.reorth), func(t *testing.T) {
			if tc.sampling == Orthogonal && testing.Short() {
				t.Skip("O(npr) a step: slow on pure-Go BLAS")
			}
			rng := newRNG(10)
			st, _ := manifold.NewStiefel[float32](n, p)
			x := make([]float32, n*p)
			_ = st.Random(x, rng)
			grads := make([][]float32, 8)
			for k := range grads {
				grads[k] = make([]float32, n*p)
				for i := range grads[k] {
					grads[k][i] = float32(rng.NormFloat64())
				}
			}
			opt, err := NewRSDM[float32](st, RSDMConfig{LR: 0.05, SubmanifoldSize: 64, Sampling: tc.sampling, Seed: 7, ReorthEvery: tc.reorth})
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for s := 1; s <= steps; s++ {
				if err := opt.Step(x, grads[s%len(grads)]); err != nil {
					t.Fatal(err)
				}
				if s%250 == 0 || s%1000 == 999 {
					worst = max(worst, st.Feasibility(x))
				}
			}
			t.Logf("%d float32 steps: worst ||W^T W - I||_F = %.2e, final %.2e", steps, worst, st.Feasibility(x))
			if worst > 1e-4 {
				t.Errorf("||W^T W - I||_F reached %.2e within %d steps, want < 1e-4", worst, steps)
			}
		})
	}
}

// TestDeterminism checks that the same seed gives the same weights bit for
// bit and that another seed does not.
func TestDeterminism(t *testing.T) {
	const n, p = 30, 6
	final := func(seed uint64, s Sampler) []float64 {
		rng := newRNG(1)
		st, _ := manifold.NewStiefel[float64](n, p)
		pr := problem.NewPCA[float64](n, p, rng)
		x := make([]float64, n*p)
		_ = st.Random(x, rng)
		opt, err := NewRSDM(st, RSDMConfig{LR: 0.5, SubmanifoldSize: 7, Sampling: s, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		g := make([]float64, n*p)
		for i := 0; i < 50; i++ {
			pr.Grad(g, x)
			if err := opt.Step(x, g); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	for _, s := range Samplers {
		a, b, c := final(1, s), final(1, s), final(2, s)
		same, differ := true, false
		for i := range a {
			same = same && math.Float64bits(a[i]) == math.Float64bits(b[i])
			differ = differ || a[i] != c[i]
		}
		if !same {
			t.Errorf("%v: same seed, different weights", s)
		}
		if !differ {
			t.Errorf("%v: seeds 1 and 2 gave identical weights", s)
		}
	}
}

// TestBadArguments checks that bad options and inputs return errors that say
// what is wrong, and that a failed step leaves the weight unchanged.
func TestBadArguments(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](10, 4)
	for _, tc := range []struct {
		name string
		cfg  RSDMConfig
		want string
	}{
		{"r<2", RSDMConfig{LR: 0.1, SubmanifoldSize: 1}, "r = 1, want r >= 2"},
		{"r>n", RSDMConfig{LR: 0.1, SubmanifoldSize: 11}, "r = 11 exceeds the 10 rows"},
		{"lr<0", RSDMConfig{LR: -0.5, SubmanifoldSize: 3}, "learning rate -0.5"},
		{"lr=NaN", RSDMConfig{LR: math.NaN(), SubmanifoldSize: 3}, "learning rate NaN"},
		{"momentum", RSDMConfig{LR: 0.1, SubmanifoldSize: 3, Momentum: 1.5, InnerSteps: 2}, "momentum 1.5"},
		{"momentum-without-inner", RSDMConfig{LR: 0.1, SubmanifoldSize: 3, Momentum: 0.5}, "InnerSteps > 1"},
		{"sampling", RSDMConfig{LR: 0.1, SubmanifoldSize: 3, Sampling: noDraws{}}, "RSDM's none sampler: no draws of 3 of 10 rows"},
	} {
		if _, err := NewRSDM(st, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewRGD(st, RGDConfig{LR: -1}); err == nil || !strings.Contains(err.Error(), "learning rate -1") {
		t.Errorf("RGD lr=-1: error %v", err)
	}

	rsdmP, _ := NewRSDM(st, RSDMConfig{LR: 0.1, SubmanifoldSize: 3})
	rsdmO, _ := NewRSDM(st, RSDMConfig{LR: 0.1, SubmanifoldSize: 3, Sampling: Orthogonal})
	rgdQR, _ := NewRGD(st, RGDConfig{LR: 0.1})
	x := make([]float64, 40)
	_ = st.Random(x, newRNG(1))
	good := make([]float64, 40)
	for i := range good {
		good[i] = 1
	}
	nan := append([]float64(nil), good...)
	nan[17] = math.NaN()
	inf := append([]float64(nil), good...)
	inf[3] = math.Inf(-1)
	for _, opt := range []Optimizer[float64]{rsdmP, rsdmO, rgdQR} {
		for _, tc := range []struct {
			name    string
			x, grad []float64
			want    string
		}{
			{"nan", x, nan, "NaN or Inf"},
			{"inf", x, inf, "NaN or Inf"},
			{"short-grad", x, good[:39], "gradient has 39 entries, want 10 x 4"},
			{"long-x", append(x, 0), good, "weight has 41 entries, want 10 x 4"},
		} {
			before := append([]float64(nil), tc.x...)
			err := opt.Step(tc.x, tc.grad)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%T %s: error %v, want it to contain %q", opt, tc.name, err, tc.want)
			}
			for i := range before {
				if math.Float64bits(before[i]) != math.Float64bits(tc.x[i]) {
					t.Fatalf("%T %s: a failed step changed the weight", opt, tc.name)
				}
			}
		}
	}
	if _, err := NewRSDM[float64](nil, RSDMConfig{LR: 1, SubmanifoldSize: 2}); err == nil {
		t.Error("NewRSDM(nil) did not fail")
	}
}

// noDraws is a Sampler whose Start fails.
type noDraws struct{}

func (noDraws) String() string { return "none" }
func (noDraws) Rows() bool     { return true }
func (noDraws) Start(n, r int) (Draws, error) {
	return nil, fmt.Errorf("no draws of %d of %d rows", r, n)
}
