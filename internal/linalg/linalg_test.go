package linalg

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/orthonet/orthonet/internal/testval"
)

func randn[T Float](rng *rand.Rand, n int) []T {
	a := make([]T, n)
	for i := range a {
		a[i] = T(rng.NormFloat64())
	}
	return a
}

// checkQF verifies that q is orthonormal, that R = Q^T a is upper
// triangular with a positive diagonal, and that Q R reproduces a.
func checkQF[T Float](t *testing.T, m, n int, a, q []T, tol float64) {
	t.Helper()
	ws := make([]float64, m*n+n*n)
	if e := GramError(m, n, q, ws); e > tol {
		t.Errorf("%dx%d: ||Q^T Q - I|| = %g", m, n, e)
	}
	r := make([]T, n*n)
	Mul(true, false, n, n, m, q, a, r)
	scale := Norm(a)
	for i := 0; i < n; i++ {
		if !(r[i*n+i] > 0) {
			t.Errorf("%dx%d: R[%d,%d] = %g, want > 0", m, n, i, i, r[i*n+i])
		}
		for j := 0; j < i; j++ {
			if math.Abs(float64(r[i*n+j])) > tol*scale {
				t.Errorf("%dx%d: R[%d,%d] = %g below the diagonal", m, n, i, j, r[i*n+j])
			}
		}
	}
	qr := make([]T, m*n)
	Mul(false, false, m, n, n, q, r, qr)
	for i := range qr {
		if math.Abs(float64(qr[i]-a[i])) > tol*scale {
			t.Fatalf("%dx%d: Q R differs from A by %g", m, n, math.Abs(float64(qr[i]-a[i])))
		}
	}
}

// qfRandom runs QF on a Gaussian m x n matrix drawn from rng and checks
// the factors (checkQF).
func qfRandom[T Float](t *testing.T, rng *rand.Rand, m, n int, tol float64) {
	t.Helper()
	a := randn[T](rng, m*n)
	q := append([]T(nil), a...)
	var qr QR[T]
	if err := qr.QF(m, n, q); err != nil {
		t.Fatal(err)
	}
	checkQF(t, m, n, a, q, tol)
}

func TestQF(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range []struct{ m, n int }{{1, 1}, {5, 5}, {40, 7}, {300, 300}, {100, 1}} {
		qfRandom[float64](t, rng, sh.m, sh.n, 1e-12)
		qfRandom[float32](t, rng, sh.m, sh.n, 1e-4)
	}
	var qr QR[float64]
	if err := qr.QF(2, 3, make([]float64, 6)); err == nil {
		t.Error("QF accepted a wide matrix")
	}
	bad := []float64{1, math.NaN(), 0, 1}
	if err := qr.QF(2, 2, bad); err == nil {
		t.Error("QF accepted a NaN")
	}
}

// TestQFGram checks that the Cholesky route gives the same Q as Householder
// QR on I + S with S skew, and that it falls back when told the matrix is
// ill-conditioned.
func TestQFGram(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, n := range []int{2, 17, 120} {
		for _, scale := range []float64{0.01, 1, 30} {
			s := randn[float64](rng, n*n)
			m := make([]float64, n*n)
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					m[i*n+j] = scale * (s[i*n+j] - s[j*n+i]) / 2 / math.Sqrt(float64(n))
				}
				m[i*n+i] = 1
			}
			want := append([]float64(nil), m...)
			var qr QR[float64]
			if err := qr.QF(n, n, want); err != nil {
				t.Fatal(err)
			}
			got := append([]float64(nil), m...)
			cond := 1 + Dot(m, m) - float64(n)
			if err := qr.QFGram(n, got, cond); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-11 {
					t.Fatalf("n=%d scale=%g (cond bound %.3g): QFGram differs from QF by %g", n, scale, cond, math.Abs(got[i]-want[i]))
				}
			}
		}
	}
}

// TestQFChol checks that Cholesky QR gives QF's Q factor on tall matrices X
// + V (X orthonormal, V of several sizes) in both float types, and that an
// ill-conditioned matrix with a loose bound falls back to QF.
func TestQFChol(t *testing.T) {
	testQFChol[float64](t, 1e-11)
	testQFChol[float32](t, 2e-5)
}

func testQFChol[T Float](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, mn := range [][2]int{{5, 2}, {40, 40}, {300, 120}} {
		m, n := mn[0], mn[1]
		for _, scale := range []float64{0.01, 1, 10, 1e4} {
			x := randn[T](rng, m*n)
			var qr QR[T]
			if err := qr.QF(m, n, x); err != nil {
				t.Fatal(err)
			}
			v := randn[T](rng, m*n)
			a := make([]T, m*n)
			for i := range a {
				a[i] = x[i] + T(scale/math.Sqrt(float64(m*n)))*v[i]
			}
			want := append([]T(nil), a...)
			if err := qr.QF(m, n, want); err != nil {
				t.Fatal(err)
			}
			got := append([]T(nil), a...)
			if err := qr.QFChol(m, n, got, (1+scale)*(1+scale)); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > tol {
					t.Fatalf("%T %dx%d scale %g: QFChol differs from QF by %g", got[0], m, n, scale, d)
				}
			}
		}
	}
	// Rank deficient: the Cholesky factorisation fails and QF takes over.
	a := make([]T, 20*3)
	for i := 0; i < 20; i++ {
		a[i*3], a[i*3+1], a[i*3+2] = T(i), T(i), 1
	}
	var qr QR[T]
	_ = qr.QFChol(20, 3, a, 10)
	if !Finite(a) {
		t.Error("QFChol of a rank-deficient matrix returned NaN or Inf")
	}
}

func TestFinite(t *testing.T) {
	for _, tc := range []struct {
		a    []float32
		want bool
	}{
		{[]float32{1, 2, 3, 4, 5, 6, 7}, true},
		{[]float32{}, true},
		{[]float32{1, 2, 3, 4, 5, 6, float32(math.NaN())}, false},
		{[]float32{float32(math.Inf(1)), 0, 0, 0}, false},
		{[]float32{0, 0, float32(math.Inf(-1)), 0, 1}, false},
		{[]float32{math.MaxFloat32, -math.MaxFloat32}, true},
	} {
		if got := Finite(tc.a); got != tc.want {
			t.Errorf("Finite(%v) = %v", tc.a, got)
		}
	}
}

func TestAddMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 7, 40, 300
	a, b, c := make([]float64, m*k), make([]float64, k*n), make([]float64, m*n)
	for _, s := range [][]float64{a, b, c} {
		for i := range s {
			s[i] = rng.NormFloat64()
		}
	}
	want := append([]float64(nil), c...)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for l := 0; l < k; l++ {
				want[i*n+j] += a[i*k+l] * b[l*n+j]
			}
		}
	}
	worst := func(got func(int) float64) float64 {
		e, s := 0.0, 0.0
		for i, w := range want {
			e, s = math.Max(e, math.Abs(got(i)-w)), math.Max(s, math.Abs(w))
		}
		return e / s
	}

	c64 := append([]float64(nil), c...)
	var ws []float64
	AddMul(m, n, k, a, b, c64, &ws)
	if e := worst(func(i int) float64 { return c64[i] }); e > 1e-13 {
		t.Errorf("float64: relative error %.3g", e)
	}

	a32, b32, c32 := testval.Float32s(a), testval.Float32s(b), testval.Float32s(c)
	// Inputs rounded to float32 are the reference's too, so that only the
	// product's own rounding is measured.
	a, b, c = testval.Floats(a32), testval.Floats(b32), testval.Floats(c32)
	want = append(want[:0], c...)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for l := 0; l < k; l++ {
				want[i*n+j] += a[i*k+l] * b[l*n+j]
			}
		}
	}
	AddMul(m, n, k, a32, b32, c32, &ws)
	tol := 1e-5 // float32 terms, k of them
	if wideFloat32() {
		tol = 1.2e-7 // one rounding of the float64 result
	}
	if e := worst(func(i int) float64 { return float64(c32[i]) }); e > tol {
		t.Errorf("float32 (%s): relative error %.3g, want below %.1g", Backend(), e, tol)
	}
	if wideFloat32() {
		before := &ws[0]
		AddMul(m, n, k, a32, b32, c32, &ws)
		if &ws[0] != before {
			t.Error("AddMul grew a workspace that was large enough")
		}
	}
}
