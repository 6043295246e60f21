package manifold

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/internal/testval"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

func randn(rng *rand.Rand, n int) []float64 {
	a := make([]float64, n)
	for i := range a {
		a[i] = rng.NormFloat64()
	}
	return a
}

type testManifold interface {
	Manifold[float64]
	setRetraction(Retraction)
}

func (s *Stiefel[T]) setRetraction(r Retraction)   { s.Retraction = r }
func (g *Grassmann[T]) setRetraction(r Retraction) { g.Retraction = r }

var shapes = []struct {
	name string
	n, p int
	make func(n, p int) (testManifold, error)
}{
	{"stiefel-tall", 9, 4, func(n, p int) (testManifold, error) { return NewStiefel[float64](n, p) }},
	{"stiefel-square", 6, 6, func(n, p int) (testManifold, error) { return NewStiefel[float64](n, p) }},
	{"stiefel-vector", 7, 1, func(n, p int) (testManifold, error) { return NewStiefel[float64](n, p) }},
	{"grassmann", 10, 3, func(n, p int) (testManifold, error) { return NewGrassmann[float64](n, p) }},
}

// forEachRetraction runs f as a subtest for every shape and every
// retraction, m the shape's n x p manifold with that retraction.
func forEachRetraction(t *testing.T, f func(t *testing.T, n, p int, m testManifold)) {
	for _, sh := range shapes {
		for _, kind := range Retractions {
			t.Run(sh.name+"/"+kind.String(), func(t *testing.T) {
				m, err := sh.make(sh.n, sh.p)
				if err != nil {
					t.Fatal(err)
				}
				m.setRetraction(kind)
				f(t, sh.n, sh.p, m)
			})
		}
	}
}

// randomTangent returns a unit-norm tangent (or horizontal) vector at x.
func randomTangent(t *testing.T, m Manifold[float64], x []float64, rng *rand.Rand) []float64 {
	v := randn(rng, len(x))
	if err := m.Proj(v, x, v); err != nil {
		t.Fatal(err)
	}
	nv := linalg.Norm(v)
	for i := range v {
		v[i] /= nv
	}
	return v
}

func TestProjection(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			m, err := sh.make(sh.n, sh.p)
			if err != nil {
				t.Fatal(err)
			}
			rng := newRNG(1)
			x := make([]float64, sh.n*sh.p)
			if err := m.Random(x, rng); err != nil {
				t.Fatal(err)
			}
			v := randn(rng, len(x))
			pv := make([]float64, len(x))
			if err := m.Proj(pv, x, v); err != nil {
				t.Fatal(err)
			}
			// Idempotent.
			ppv := make([]float64, len(x))
			if err := m.Proj(ppv, x, pv); err != nil {
				t.Fatal(err)
			}
			if d := testval.MaxAbs(pv, ppv); d > 1e-13 {
				t.Errorf("projection not idempotent: %g", d)
			}
			// X^T PV is skew (Stiefel) or zero (Grassmann).
			p := sh.p
			xtv := make([]float64, p*p)
			linalg.Mul(true, false, p, p, sh.n, x, pv, xtv)
			_, grass := m.(*Grassmann[float64])
			for i := 0; i < p; i++ {
				for j := 0; j < p; j++ {
					want := -xtv[j*p+i]
					if grass {
						want = 0
					}
					if math.Abs(xtv[i*p+j]-want) > 1e-13 {
						t.Fatalf("X^T Proj(v) [%d,%d] = %g, want %g", i, j, xtv[i*p+j], want)
					}
				}
			}
			// Orthogonal: <v - Pv, w> = 0 for tangent w.
			w := randomTangent(t, m, x, rng)
			r := make([]float64, len(x))
			for i := range r {
				r[i] = v[i] - pv[i]
			}
			if d := math.Abs(linalg.Dot(r, w)); d > 1e-13 {
				t.Errorf("<v - Pv, w> = %g, want 0", d)
			}
		})
	}
}

// TestRetractions checks, for every retraction on every shape, that
// R_x(0) = x, that R_x(v) lies on the manifold, and that dR_x(0)[v] = v by
// central differences.
func TestRetractions(t *testing.T) {
	forEachRetraction(t, func(t *testing.T, n, p int, m testManifold) {
		rng := newRNG(2)
		x := make([]float64, n*p)
		if err := m.Random(x, rng); err != nil {
			t.Fatal(err)
		}
		v := randomTangent(t, m, x, rng)
		zero := make([]float64, len(x))
		y := make([]float64, len(x))
		if err := m.Retract(y, x, zero); err != nil {
			t.Fatal(err)
		}
		if d := testval.MaxAbs(y, x); d > 1e-12 {
			t.Errorf("R_x(0) differs from x by %g", d)
		}
		for _, scale := range []float64{0.1, 1, 3} {
			sv := make([]float64, len(v))
			for i := range v {
				sv[i] = scale * v[i]
			}
			if err := m.Retract(y, x, sv); err != nil {
				t.Fatal(err)
			}
			if f := m.Feasibility(y); f > 1e-12 {
				t.Errorf("||Y^T Y - I|| = %g after a step of norm %g", f, scale)
			}
		}
		const h = 1e-5
		yp, ym := make([]float64, len(x)), make([]float64, len(x))
		hv := make([]float64, len(v))
		for i := range v {
			hv[i] = h * v[i]
		}
		if err := m.Retract(yp, x, hv); err != nil {
			t.Fatal(err)
		}
		for i := range v {
			hv[i] = -h * v[i]
		}
		if err := m.Retract(ym, x, hv); err != nil {
			t.Fatal(err)
		}
		d := make([]float64, len(x))
		for i := range d {
			d[i] = (yp[i] - ym[i]) / (2 * h)
		}
		if e := testval.MaxAbs(d, v); e > 1e-8 {
			t.Errorf("dR_x(0)[v] differs from v by %g", e)
		}
	})
}

// quadratic is F(X) = tr(X^T A X)/2 + <C, X> with A symmetric: a test
// function with a known Euclidean gradient A X + C.
type quadratic struct {
	n, p int
	a, c []float64
}

func newQuadratic(n, p int, rng *rand.Rand) *quadratic {
	a := randn(rng, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			a[i*n+j] = a[j*n+i]
		}
	}
	return &quadratic{n, p, a, randn(rng, n*p)}
}

func (q *quadratic) value(x []float64) float64 {
	ax := make([]float64, q.n*q.p)
	linalg.Mul(false, false, q.n, q.p, q.n, q.a, x, ax)
	return linalg.Dot(x, ax)/2 + linalg.Dot(q.c, x)
}

func (q *quadratic) grad(x []float64) []float64 {
	g := append([]float64(nil), q.c...)
	linalg.Gemm(false, false, q.n, q.p, q.n, 1, q.a, q.n, x, q.p, 1, g, q.p)
	return g
}

// TestRiemannianGradient checks <grad F(x), v> against central differences
// of F along the retraction curve t -> R_x(t v), for every retraction.
func TestRiemannianGradient(t *testing.T) {
	forEachRetraction(t, func(t *testing.T, n, p int, m testManifold) {
		rng := newRNG(3)
		q := newQuadratic(n, p, rng)
		_, grass := m.(*Grassmann[float64])
		if grass {
			clear(q.c) // tr(X^T A X) is invariant under X -> XQ
		}
		x := make([]float64, n*p)
		if err := m.Random(x, rng); err != nil {
			t.Fatal(err)
		}
		rg := make([]float64, len(x))
		if err := m.Proj(rg, x, q.grad(x)); err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 3; trial++ {
			v := randomTangent(t, m, x, rng)
			const h = 1e-5
			y := make([]float64, len(x))
			hv := make([]float64, len(v))
			for i := range v {
				hv[i] = h * v[i]
			}
			if err := m.Retract(y, x, hv); err != nil {
				t.Fatal(err)
			}
			fp := q.value(y)
			for i := range v {
				hv[i] = -h * v[i]
			}
			if err := m.Retract(y, x, hv); err != nil {
				t.Fatal(err)
			}
			fd := (fp - q.value(y)) / (2 * h)
			if got := linalg.Dot(rg, v); math.Abs(got-fd) > 1e-6*max(1, math.Abs(fd)) {
				t.Errorf("<grad F, v> = %.12g, finite difference %.12g", got, fd)
			}
		}
	})
}

func TestDimsErrors(t *testing.T) {
	for _, tc := range []struct {
		n, p int
		want string
	}{{3, 4, "n = 3 < p = 4"}, {3, 0, "p = 0"}} {
		if _, err := NewStiefel[float64](tc.n, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewStiefel(%d, %d) error %v, want %q", tc.n, tc.p, err, tc.want)
		}
		if _, err := NewGrassmann[float32](tc.n, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewGrassmann(%d, %d) error %v, want %q", tc.n, tc.p, err, tc.want)
		}
	}
	s, _ := NewStiefel[float64](4, 2)
	if err := s.Proj(make([]float64, 8), make([]float64, 7), make([]float64, 8)); err == nil || !strings.Contains(err.Error(), "x has 7 entries, want 4 x 2") {
		t.Errorf("short x: error %v", err)
	}
	x := make([]float64, 8)
	_ = s.Random(x, newRNG(1))
	v := make([]float64, 8)
	v[3] = math.NaN()
	before := append([]float64(nil), x...)
	if err := s.Retract(x, x, v); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN tangent: error %v", err)
	}
	if testval.MaxAbs(x, before) != 0 {
		t.Error("a failed retraction changed x")
	}
	if _, err := ParseRetraction("householder"); err == nil {
		t.Error("ParseRetraction accepted an unknown name")
	}
}

func TestFloat32Retractions(t *testing.T) {
	for _, kind := range Retractions {
		s, _ := NewStiefel[float32](50, 20)
		s.Retraction = kind
		rng := newRNG(4)
		x := make([]float32, 50*20)
		if err := s.Random(x, rng); err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(x))
		for i := range v {
			v[i] = float32(0.1 * rng.NormFloat64())
		}
		if err := s.Proj(v, x, v); err != nil {
			t.Fatal(err)
		}
		if err := s.Retract(x, x, v); err != nil {
			t.Fatal(err)
		}
		if f := s.Feasibility(x); f > 1e-5 {
			t.Errorf("%v: float32 feasibility %g", kind, f)
		}
	}
}
