package linalg

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// needNative skips where the products are pure Go: there is nothing to
// compare with gonum.
func needNative(t testing.TB) {
	t.Helper()
	if !chosen().native {
		t.Skipf("no C BLAS in use: %s", Backend())
	}
}

// maxRelDiff returns max |got - want| / max |want|.
func maxRelDiff[T Float](got, want []T) float64 {
	e, s := 0.0, 0.0
	for i, w := range want {
		e = math.Max(e, math.Abs(float64(got[i]-w)))
		s = math.Max(s, math.Abs(float64(w)))
	}
	return e / s
}

// gemmCase compares the chosen library's gemm with gonum's on op(A) m x k,
// op(B) k x n, padded leading dimensions, alpha and beta not 0 or 1.
func gemmCase[T Float](t *testing.T, rng *rand.Rand, tA, tB blas.Transpose, m, n, k int, tol float64) {
	t.Helper()
	ra, ca := m, k
	if tA == blas.Trans {
		ra, ca = k, m
	}
	rb, cb := k, n
	if tB == blas.Trans {
		rb, cb = n, k
	}
	lda, ldb, ldc := ca+3, cb+1, n+2
	a, b, c := randn[T](rng, ra*lda), randn[T](rng, rb*ldb), randn[T](rng, m*ldc)
	want := append([]T(nil), c...)
	if Is32[T]() {
		impl{}.Sgemm(tA, tB, m, n, k, 0.7, As32(a), lda, As32(b), ldb, -0.3, As32(c), ldc)
		gonum.Implementation{}.Sgemm(tA, tB, m, n, k, 0.7, As32(a), lda, As32(b), ldb, -0.3, As32(want), ldc)
	} else {
		impl{}.Dgemm(tA, tB, m, n, k, 0.7, As64(a), lda, As64(b), ldb, -0.3, As64(c), ldc)
		gonum.Implementation{}.Dgemm(tA, tB, m, n, k, 0.7, As64(a), lda, As64(b), ldb, -0.3, As64(want), ldc)
	}
	if d := maxRelDiff(c, want); d > tol {
		t.Errorf("%T gemm %c%c %dx%dx%d: differs from gonum's by %.3g (relative)", a[0], tA, tB, m, n, k, d)
	}
}

// TestLoadedGemm checks the loaded library's sgemm and dgemm against gonum's
// with every transposition, on random matrices with padded rows: among them
// products whose C is a column or a row, which run as gemv (their strided
// vectors, and the padding left alone).
func TestLoadedGemm(t *testing.T) {
	needNative(t)
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
		for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, s := range [][3]int{{1, 1, 1}, {7, 5, 3}, {64, 33, 129}, {200, 150, 90}, {37, 1, 23}, {1, 41, 19}, {100, 1, 100}, {1, 100, 100}, {1, 1, 9}} {
				gemmCase[float64](t, rng, tA, tB, s[0], s[1], s[2], 1e-13)
				gemmCase[float32](t, rng, tA, tB, s[0], s[1], s[2], 2e-5)
			}
		}
	}
}

// TestLoadedSyrkTrsm checks syrk and trsm, the products of Cholesky QR,
// against gonum's in both precisions.
func TestLoadedSyrkTrsm(t *testing.T) {
	needNative(t)
	testSyrkTrsm[float64](t, 1e-12)
	testSyrkTrsm[float32](t, 1e-4)
}

func testSyrkTrsm[T Float](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(6, 6))
	const n, k = 37, 23
	for _, ul := range []blas.Uplo{blas.Upper, blas.Lower} {
		for _, tr := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			a := randn[T](rng, n*k)
			lda := k
			if tr == blas.Trans {
				lda = n
			}
			c := randn[T](rng, n*n)
			want := append([]T(nil), c...)
			if Is32[T]() {
				impl{}.Ssyrk(ul, tr, n, k, 1.5, As32(a), lda, 0.5, As32(c), n)
				gonum.Implementation{}.Ssyrk(ul, tr, n, k, 1.5, As32(a), lda, 0.5, As32(want), n)
			} else {
				impl{}.Dsyrk(ul, tr, n, k, 1.5, As64(a), lda, 0.5, As64(c), n)
				gonum.Implementation{}.Dsyrk(ul, tr, n, k, 1.5, As64(a), lda, 0.5, As64(want), n)
			}
			if d := maxRelDiff(c, want); d > tol {
				t.Errorf("%T syrk %c%c: differs from gonum's by %.3g", a[0], ul, tr, d)
			}
		}
	}
	for _, side := range []blas.Side{blas.Left, blas.Right} {
		for _, ul := range []blas.Uplo{blas.Upper, blas.Lower} {
			for _, tr := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				for _, dg := range []blas.Diag{blas.NonUnit, blas.Unit} {
					const m, n = 19, 27
					k := n
					if side == blas.Left {
						k = m
					}
					r := randn[T](rng, k*k)
					for i := 0; i < k; i++ {
						r[i*k+i] = T(k) // well conditioned
						for j := 0; j < k; j++ {
							r[i*k+j] /= T(k)
						}
					}
					b := randn[T](rng, m*n)
					want := append([]T(nil), b...)
					if Is32[T]() {
						impl{}.Strsm(side, ul, tr, dg, m, n, 2, As32(r), k, As32(b), n)
						gonum.Implementation{}.Strsm(side, ul, tr, dg, m, n, 2, As32(r), k, As32(want), n)
					} else {
						impl{}.Dtrsm(side, ul, tr, dg, m, n, 2, As64(r), k, As64(b), n)
						gonum.Implementation{}.Dtrsm(side, ul, tr, dg, m, n, 2, As64(r), k, As64(want), n)
					}
					if d := maxRelDiff(b, want); d > tol {
						t.Errorf("%T trsm %c%c%c%c: differs from gonum's by %.3g", b[0], side, ul, tr, dg, d)
					}
				}
			}
		}
	}
}

// TestLoadedQR checks the library's sign-fixed QR and Cholesky against
// gonum's LAPACK in both precisions.
func TestLoadedQR(t *testing.T) {
	needNative(t)
	if !chosen().lapack {
		t.Skipf("the library has no LAPACK: %s", Backend())
	}
	testLoadedQR[float64](t, 1e-11)
	testLoadedQR[float32](t, 5e-5)

	rng := rand.New(rand.NewPCG(8, 8))
	const n = 50
	x := randn[float64](rng, 2*n*n)
	g := make([]float64, n*n)
	impl{}.Dsyrk(blas.Upper, blas.Trans, n, 2*n, 1, x, n, 0, g, n)
	want := append([]float64(nil), g...)
	if !potrfNative(n, g) || !potrfGonum(n, want) {
		t.Fatal("Cholesky refused a positive definite matrix")
	}
	for i := 0; i < n; i++ { // only the upper triangle is R
		for j := 0; j < i; j++ {
			g[i*n+j], want[i*n+j] = 0, 0
		}
	}
	if d := maxRelDiff(g, want); d > 1e-12 {
		t.Errorf("Cholesky differs from gonum's by %.3g", d)
	}
	notPD := []float64{1, 2, 2, 1}
	if potrfNative(2, notPD) {
		t.Error("Cholesky accepted an indefinite matrix")
	}
}

func testLoadedQR[T Float](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, s := range [][2]int{{1, 1}, {9, 9}, {120, 40}, {300, 300}} {
		m, n := s[0], s[1]
		a := randn[T](rng, m*n)
		var q QR[T]
		got := append([]T(nil), a...)
		if err := q.QF(m, n, got); err != nil { // the library's LAPACK
			t.Fatal(err)
		}
		want := append([]T(nil), a...)
		sign := make([]float64, n)
		qfGonum(&q, m, n, want, sign)
		for i := 0; i < m; i++ {
			for j, sg := range sign {
				if sg < 0 {
					want[i*n+j] = -want[i*n+j]
				}
			}
		}
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > tol {
				t.Fatalf("%T QF %dx%d: differs from gonum's by %.3g", a[0], m, n, d)
			}
		}
	}
}

// BenchmarkSgemm512 times a 512 x 512 x 512 float32 product through the
// chosen library and through gonum.
func BenchmarkSgemm512(b *testing.B) {
	const n = 512
	rng := rand.New(rand.NewPCG(9, 9))
	x, y, z := randn[float32](rng, n*n), randn[float32](rng, n*n), make([]float32, n*n)
	for _, v := range []struct {
		name string
		impl blas.Float32
	}{{"loaded", impl{}}, {"gonum", gonum.Implementation{}}} {
		b.Run(v.name, func(b *testing.B) {
			if v.name == "loaded" {
				needNative(b)
			}
			for i := 0; i < b.N; i++ {
				v.impl.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
