package manifold

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/gonum"

	"github.com/orthonet/orthonet/internal/linalg"
)

// retractWork is the reusable workspace behind the retractions of St(n,p).
// Small p x p and 2p x 2p systems are solved in float64 whatever T is.
type retractWork[T Float] struct {
	qr       linalg.QR[T]
	pp, pp2  []T // p x p in T
	np, np2  []T // n x p in T
	m64, r64 []float64
	t64      []float64
	eig      []float64
	lwork    []float64
	ipiv     []int
	query    [1]float64
	gram     []float64
	ex       expm
}

func (w *retractWork[T]) feasibility(n, p int, x []T) float64 {
	if len(x) != n*p {
		return math.Inf(1)
	}
	w.gram = linalg.Grow(w.gram, n*p+p*p)
	return linalg.GramError(n, p, x, w.gram)
}

func (w *retractWork[T]) retract(kind Retraction, n, p int, dst, x, v []T) error {
	if !linalg.Finite(v) {
		return fmt.Errorf("manifold: retract: tangent vector: %w", linalg.ErrNotFinite)
	}
	switch kind {
	case QR:
		for i := range dst {
			dst[i] = x[i] + v[i]
		}
		// For X on the manifold and V tangent (or horizontal),
		// (X + V)^T (X + V) = I + V^T V has condition number at most
		// 1 + ||V||_F^2: Cholesky QR is safe below linalg.MaxGramCond and
		// several times faster than Householder on large weights.
		return w.qr.QFChol(n, p, dst, 1.01*(1+linalg.Dot(v, v)))
	case Polar:
		return w.polar(n, p, dst, x, v)
	case Cayley:
		return w.cayley(n, p, dst, x, v)
	case Exp:
		return w.exp(n, p, dst, x, v)
	}
	return fmt.Errorf("manifold: unknown retraction %v", kind)
}

// polar computes (X + V)((X + V)^T (X + V))^(-1/2) through the
// eigendecomposition of the p x p Gram matrix. For X on the manifold and V
// tangent the Gram matrix is I + V^T V, but forming it from X + V keeps the
// result orthonormal when X has drifted by rounding; with I + V^T V the
// drift grows from step to step (on 60 x 60 Procrustes, RGD reached
// ||X^T X - I||_F = 7.7 in 4000 steps).
func (w *retractWork[T]) polar(n, p int, dst, x, v []T) error {
	w.np = linalg.Grow(w.np, n*p)
	for i := range w.np {
		w.np[i] = x[i] + v[i]
	}
	w.pp = linalg.Grow(w.pp, p*p)
	linalg.Mul(true, false, p, p, n, w.np, w.np, w.pp)
	w.m64 = linalg.Grow(w.m64, p*p)
	linalg.Convert(w.m64, w.pp)
	if err := w.invSqrt(p, w.m64); err != nil {
		return err
	}
	linalg.Convert(w.pp, w.m64)
	linalg.Mul(false, false, n, p, p, w.np, w.pp, dst)
	return nil
}

// invSqrt replaces the symmetric positive definite p x p matrix a by a^(-1/2).
func (w *retractWork[T]) invSqrt(p int, a []float64) error {
	impl := gonum.Implementation{}
	w.eig = linalg.Grow(w.eig, p)
	q := w.query[:] // a local array would escape to the heap
	impl.Dsyev(lapack.EVCompute, blas.Upper, p, a, p, w.eig, q, -1)
	w.lwork = linalg.Grow(w.lwork, max(int(q[0]), 1))
	if !impl.Dsyev(lapack.EVCompute, blas.Upper, p, a, p, w.eig, w.lwork, len(w.lwork)) {
		return errors.New("manifold: polar retraction: eigendecomposition did not converge")
	}
	// a holds the eigenvectors as columns: a^(-1/2) = Q diag(e^(-1/2)) Q^T.
	w.r64 = linalg.Grow(w.r64, p*p)
	for i := 0; i < p; i++ {
		for j := 0; j < p; j++ {
			w.r64[i*p+j] = a[i*p+j] / math.Sqrt(w.eig[j])
		}
	}
	w.t64 = linalg.Grow(w.t64, p*p)
	linalg.Mul(false, true, p, p, p, w.r64, a, w.t64)
	copy(a, w.t64)
	return nil
}

// cayley computes (I - W/2)^(-1)(I + W/2) X with W = U Z^T, U = [PV, X],
// Z = [X, -PV], PV = (I - XX^T/2) V, so that W X = V for tangent V. By the
// Woodbury identity the result is X + U (I - Z^T U / 2)^(-1) Z^T X, which
// needs one 2p x 2p solve (Wen and Yin 2013, Lemma 4).
func (w *retractWork[T]) cayley(n, p int, dst, x, v []T) error {
	w.pp = linalg.Grow(w.pp, p*p)
	linalg.Mul(true, false, p, p, n, x, v, w.pp) // A = X^T V
	w.np = linalg.Grow(w.np, n*p)
	copy(w.np, v)
	linalg.Gemm(false, false, n, p, p, -0.5, x, p, w.pp, p, 1, w.np, p) // PV
	w.pp2 = linalg.Grow(w.pp2, p*p)
	linalg.Mul(true, false, p, p, n, w.np, w.np, w.pp2) // PV^T PV

	q := 2 * p
	w.m64 = linalg.Grow(w.m64, q*q)
	w.r64 = linalg.Grow(w.r64, q*p)
	m, rhs := w.m64, w.r64
	clear(m)
	clear(rhs)
	for i := 0; i < p; i++ {
		for j := 0; j < p; j++ {
			a := float64(w.pp[i*p+j])
			m[i*q+j] = -a / 4                          // I - A/4
			m[(p+i)*q+p+j] = float64(w.pp[j*p+i]) / 4  // I + A^T/4
			m[(p+i)*q+j] = float64(w.pp2[i*p+j]) / 2   // PV^T PV / 2
			rhs[(p+i)*p+j] = -float64(w.pp[j*p+i]) / 2 // -A^T/2
		}
		m[i*q+i]++
		m[(p+i)*q+p+i]++
		m[i*q+p+i] = -0.5
		rhs[i*p+i] = 1
	}
	if err := w.solve(q, p, m, rhs); err != nil {
		return fmt.Errorf("manifold: cayley retraction: %w", err)
	}
	// K1 = rhs[:p], I + K2 = I + rhs[p:].
	linalg.Convert(w.pp, rhs[:p*p])
	for i := 0; i < p; i++ {
		rhs[(p+i)*p+i]++
	}
	linalg.Convert(w.pp2, rhs[p*p:])
	w.np2 = linalg.Grow(w.np2, n*p)
	linalg.Mul(false, false, n, p, p, w.np, w.pp, w.np2)
	linalg.Gemm(false, false, n, p, p, 1, x, p, w.pp2, p, 1, w.np2, p)
	copy(dst, w.np2)
	return nil
}

// exp computes the exponential map of the embedded metric,
// [X V] expm([A -S; I A]) [expm(-A); 0] with A = X^T V and S = V^T V
// (Edelman, Arias and Smith 1998; paper, section 2).
func (w *retractWork[T]) exp(n, p int, dst, x, v []T) error {
	w.pp = linalg.Grow(w.pp, p*p)
	w.pp2 = linalg.Grow(w.pp2, p*p)
	linalg.Mul(true, false, p, p, n, x, v, w.pp)  // A
	linalg.Mul(true, false, p, p, n, v, v, w.pp2) // S
	q := 2 * p
	w.m64 = linalg.Grow(w.m64, q*q)
	m := w.m64
	clear(m)
	for i := 0; i < p; i++ {
		for j := 0; j < p; j++ {
			a := float64(w.pp[i*p+j])
			m[i*q+j] = a
			m[(p+i)*q+p+j] = a
			m[i*q+p+j] = -float64(w.pp2[i*p+j])
		}
		m[(p+i)*q+i] = 1
	}
	e, err := w.ex.compute(q, m)
	if err != nil {
		return fmt.Errorf("manifold: exp retraction: %w", err)
	}
	copy(m, e) // the next compute reuses e's storage
	big := m
	// expm(-A), then C = big[:, :p] expm(-A), a 2p x p matrix.
	w.r64 = linalg.Grow(w.r64, q*p+p*p)
	na := w.r64[q*p:]
	linalg.Convert(na, w.pp)
	for i := range na {
		na[i] = -na[i]
	}
	small, err := w.ex.compute(p, na)
	if err != nil {
		return fmt.Errorf("manifold: exp retraction: %w", err)
	}
	c := w.r64[:q*p]
	linalg.Gemm(false, false, q, p, p, 1, big, q, small, p, 0, c, p)
	linalg.Convert(w.pp, c[:p*p])
	linalg.Convert(w.pp2, c[p*p:])
	w.np2 = linalg.Grow(w.np2, n*p)
	linalg.Mul(false, false, n, p, p, x, w.pp, w.np2)
	linalg.Gemm(false, false, n, p, p, 1, v, p, w.pp2, p, 1, w.np2, p)
	copy(dst, w.np2)
	// The formula assumes X^T X = I, so rounding drift in X is carried
	// forward and grows from step to step (on 60 x 60 Procrustes, RGD reached
	// ||X^T X - I||_F = 9.7 in 4000 steps). Re-orthonormalize once it shows.
	if w.feasibility(n, p, dst) > expDrift[T]()*math.Sqrt(float64(p)) {
		return w.qr.QF(n, p, dst)
	}
	return nil
}

// expDrift is the feasibility per column above which the exponential
// retraction re-orthonormalizes its result.
func expDrift[T Float]() float64 {
	if linalg.Is32[T]() {
		return 1e-5
	}
	return 1e-13
}

// solve overwrites the q x k matrix b by a^(-1) b, destroying a.
func (w *retractWork[T]) solve(q, k int, a, b []float64) error {
	w.ipiv = linalg.Grow(w.ipiv, q)
	impl := gonum.Implementation{}
	if !impl.Dgetrf(q, q, a, q, w.ipiv) {
		return errors.New("singular system")
	}
	impl.Dgetrs(blas.NoTrans, q, k, a, q, w.ipiv, b, k)
	return nil
}
