// Package problem holds the paper's test problems on the Stiefel manifold
// (section 6): Procrustes, PCA and quadratic assignment, each with its value,
// Euclidean gradient and, where one exists, its closed-form optimum.
package problem

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Problem is min F(X) over n x p matrices with orthonormal columns.
type Problem[T linalg.Float] interface {
	Name() string
	Dims() (n, p int)
	// Value returns F(x).
	Value(x []T) float64
	// Grad writes the Euclidean gradient of F at x into dst.
	Grad(dst, x []T)
	// Optimum returns the optimal value F*, or NaN if it is not known.
	Optimum() float64
}

// Gap returns the optimality gap |f - f*| / |f*| (the paper's optgap).
func Gap(f, fstar float64) float64 { return math.Abs(f-fstar) / math.Abs(fstar) }

func gaussian[T linalg.Float](rng *rand.Rand, n int) []T {
	a := make([]T, n)
	for i := range a {
		a[i] = T(rng.NormFloat64())
	}
	return a
}

// Procrustes is min ||X A - B||_F^2 / (2p) with A p x p and B n x p
// Gaussian (the 1/(2p) scaling is the paper authors', so that their step sizes
// carry over). Its optimum is X* = U V^T from the thin SVD U S V^T of B A^T,
// with value (||A||^2 + ||B||^2 - 2 tr(S)) / (2p).
type Procrustes[T linalg.Float] struct {
	n, p  int
	a, b  []T
	fstar float64
	xstar []float64
	r     []T // n x p residual
}

// AlignComponent makes x start in the connected component of the optimum.
// When n = p the feasible set O(n) has two components, det = +1 and det = -1,
// and no retraction-based method crosses between them; if x lies in the other
// one, AlignComponent flips the sign of its first column.
func (pr *Procrustes[T]) AlignComponent(x []T) {
	if pr.n != pr.p {
		return
	}
	x64 := make([]float64, len(x))
	linalg.Convert(x64, x)
	if detSign(pr.n, x64) != detSign(pr.n, pr.xstar) {
		for i := 0; i < pr.n; i++ {
			x[i*pr.n] = -x[i*pr.n]
		}
	}
}

func detSign(n int, a []float64) float64 {
	var lu mat.LU
	lu.Factorize(mat.NewDense(n, n, append([]float64(nil), a...)))
	_, sign := lu.LogDet()
	return sign
}

// NewProcrustes draws a Procrustes instance of size n x p from rng.
func NewProcrustes[T linalg.Float](n, p int, rng *rand.Rand) *Procrustes[T] {
	pr := &Procrustes[T]{n: n, p: p, a: gaussian[T](rng, p*p), b: gaussian[T](rng, n*p), r: make([]T, n*p)}
	ba := make([]T, n*p)
	linalg.Mul(false, true, n, p, p, pr.b, pr.a, ba)
	m := mat.NewDense(n, p, nil)
	for i, v := range ba {
		m.RawMatrix().Data[i] = float64(v)
	}
	var svd mat.SVD
	svd.Factorize(m, mat.SVDThin)
	var tr float64
	for _, s := range svd.Values(nil) {
		tr += s
	}
	var u, v, xs mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	xs.Mul(&u, v.T())
	pr.xstar = xs.RawMatrix().Data
	pr.fstar = (linalg.Dot(pr.a, pr.a) + linalg.Dot(pr.b, pr.b) - 2*tr) / float64(2*p)
	return pr
}

// Name returns "procrustes".
func (pr *Procrustes[T]) Name() string { return "procrustes" }

// Dims returns n and p.
func (pr *Procrustes[T]) Dims() (int, int) { return pr.n, pr.p }

// Value returns ||x A - B||^2 / (2p).
func (pr *Procrustes[T]) Value(x []T) float64 {
	pr.residual(x)
	return linalg.Dot(pr.r, pr.r) / float64(2*pr.p)
}

// Grad writes (x A - B) A^T / p into dst.
func (pr *Procrustes[T]) Grad(dst, x []T) {
	pr.residual(x)
	linalg.Gemm(false, true, pr.n, pr.p, pr.p, 1/T(pr.p), pr.r, pr.p, pr.a, pr.p, 0, dst, pr.p)
}

// Optimum returns the closed-form optimal value.
func (pr *Procrustes[T]) Optimum() float64 { return pr.fstar }

func (pr *Procrustes[T]) residual(x []T) {
	copy(pr.r, pr.b)
	linalg.Gemm(false, false, pr.n, pr.p, pr.p, 1, x, pr.p, pr.a, pr.p, -1, pr.r, pr.p)
}

// PCA is min -tr(X^T A X)/2 with A = Q D Q^T, Q Haar orthogonal and
// D = 10 logspace(-3, 0, n) (condition number 1000, the paper's section 6).
// Its optimum is minus half the sum of the p largest eigenvalues. The value is
// invariant under X -> X Q, so PCA is also a problem on Gr(n,p).
type PCA[T linalg.Float] struct {
	n, p  int
	a     []T
	fstar float64
	ax    []T
}

// NewPCA draws a PCA instance from rng.
func NewPCA[T linalg.Float](n, p int, rng *rand.Rand) *PCA[T] {
	d := make([]float64, n)
	for i := range d {
		d[i] = 10 * math.Pow(10, -3+3*float64(i)/float64(max(n-1, 1)))
	}
	q := gaussian[float64](rng, n*n)
	var qr linalg.QR[float64]
	if err := qr.QF(n, n, q); err != nil {
		panic(err) // a Gaussian matrix is finite
	}
	qd := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			qd[i*n+j] = q[i*n+j] * d[j]
		}
	}
	a64 := make([]float64, n*n)
	linalg.Mul(false, true, n, n, n, qd, q, a64)
	for i := 0; i < n; i++ { // exact symmetry
		for j := i + 1; j < n; j++ {
			m := (a64[i*n+j] + a64[j*n+i]) / 2
			a64[i*n+j], a64[j*n+i] = m, m
		}
	}
	pc := &PCA[T]{n: n, p: p, a: make([]T, n*n), ax: make([]T, n*p)}
	linalg.Convert(pc.a, a64)
	for _, v := range d[n-p:] {
		pc.fstar -= v / 2
	}
	return pc
}

// Name returns "pca".
func (pc *PCA[T]) Name() string { return "pca" }

// Dims returns n and p.
func (pc *PCA[T]) Dims() (int, int) { return pc.n, pc.p }

// Value returns -tr(x^T A x)/2.
func (pc *PCA[T]) Value(x []T) float64 {
	linalg.Mul(false, false, pc.n, pc.p, pc.n, pc.a, x, pc.ax)
	return -linalg.Dot(x, pc.ax) / 2
}

// Grad writes -A x into dst.
func (pc *PCA[T]) Grad(dst, x []T) {
	linalg.Gemm(false, false, pc.n, pc.p, pc.n, -1, pc.a, pc.n, x, pc.p, 0, dst, pc.p)
}

// Optimum returns minus half the sum of the p largest eigenvalues of A.
func (pc *PCA[T]) Optimum() float64 { return pc.fstar }

// QAP is the quadratic assignment relaxation min tr(A^T (X.X) B (X.X)^T)/2
// over O(n) (Wen and Yin 2013), with A and B Gaussian. Its optimum is not
// known in closed form: SetOptimum records one from a long run.
type QAP[T linalg.Float] struct {
	n     int
	a, b  []T
	fstar float64
	z, t  []T
	u     []T
}

// NewQAP draws a QAP instance of size n from rng.
func NewQAP[T linalg.Float](n int, rng *rand.Rand) *QAP[T] {
	return &QAP[T]{n: n, a: gaussian[T](rng, n*n), b: gaussian[T](rng, n*n), fstar: math.NaN(),
		z: make([]T, n*n), t: make([]T, n*n), u: make([]T, n*n)}
}

// Name returns "qap".
func (q *QAP[T]) Name() string { return "qap" }

// Dims returns n and n.
func (q *QAP[T]) Dims() (int, int) { return q.n, q.n }

// Value returns tr(A^T Z B Z^T)/2 with Z = x.x (entrywise square).
func (q *QAP[T]) Value(x []T) float64 {
	n := q.n
	for i, v := range x {
		q.z[i] = v * v
	}
	linalg.Mul(false, true, n, n, n, q.b, q.z, q.t)  // B Z^T
	linalg.Mul(false, false, n, n, n, q.z, q.t, q.u) // Z B Z^T
	return linalg.Dot(q.a, q.u) / 2                  // tr(A^T M) = <A, M>
}

// Grad writes x.(A Z B^T + A^T Z B) into dst.
func (q *QAP[T]) Grad(dst, x []T) {
	n := q.n
	for i, v := range x {
		q.z[i] = v * v
	}
	linalg.Mul(false, true, n, n, n, q.z, q.b, q.t)  // Z B^T
	linalg.Mul(false, false, n, n, n, q.a, q.t, q.u) // A Z B^T
	linalg.Mul(false, false, n, n, n, q.z, q.b, q.t) // Z B
	linalg.Gemm(true, false, n, n, n, 1, q.a, n, q.t, n, 1, q.u, n)
	for i, v := range x {
		dst[i] = v * q.u[i]
	}
}

// Optimum returns the value recorded by SetOptimum, or NaN.
func (q *QAP[T]) Optimum() float64 { return q.fstar }

// SetOptimum records f as the reference optimal value.
func (q *QAP[T]) SetOptimum(f float64) { q.fstar = f }
