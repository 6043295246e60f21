package linalg

import (
	"errors"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// MaxGramCond is the largest condition number of M^T M for which QFGram uses
// the Cholesky route: its loss of orthogonality is about cond(M^T M) * eps,
// at most 1e-12 in float64 below this bound.
const MaxGramCond = 1e4

// QFGram overwrites the square n x n matrix m with its Q factor (diag(R) > 0),
// the same matrix QF computes, given gramCond >= cond(m^T m). When gramCond
// is at most MaxGramCond it takes the Cholesky route, Q = m R^(-1) with
// R^T R = m^T m, which is all level-3 BLAS and several times faster than
// Householder QR on small matrices; otherwise, or if the Cholesky
// factorisation fails, it falls back to QF.
func (q *QR[T]) QFGram(n int, m []float64, gramCond float64) error {
	if !(gramCond <= MaxGramCond) || !Finite(m[:n*n]) {
		return q.qf64(n, m)
	}
	q.gram = Grow(q.gram, n*n)
	g := q.gram
	blas64.Implementation().Dsyrk(blas.Upper, blas.Trans, n, n, 1, m, n, 0, g, n)
	if !potrfUpper(n, g) {
		return q.qf64(n, m)
	}
	blas64.Implementation().Dtrsm(blas.Right, blas.Upper, blas.NoTrans, blas.NonUnit, n, n, 1, g, n, m, n)
	return nil
}

// qf64 runs Householder QR on a float64 square matrix with T's workspace.
func (q *QR[T]) qf64(n int, m []float64) error {
	if q.f64 == nil {
		q.f64 = new(QR[float64])
	}
	return q.f64.QF(n, n, m)
}

// QFChol overwrites the m x n row-major matrix a (m >= n) with its Q factor,
// the matrix QF computes, given gramCond >= cond(a^T a). When gramCond is at
// most MaxGramCond it runs Cholesky QR twice (a <- a R^(-1) with
// R^T R = a^T a; the second pass restores orthogonality to rounding), which
// is all level-3 BLAS; otherwise, or if a Cholesky factorisation fails, it
// falls back to QF. Since a stays a Q factor times an upper triangular
// matrix with positive diagonal, the fallback gives the same Q at any point.
func (q *QR[T]) QFChol(m, n int, a []T, gramCond float64) error {
	if m < n {
		return errors.New("linalg: QFChol needs rows >= cols")
	}
	if !(gramCond <= MaxGramCond) || !Finite(a[:m*n]) {
		return q.QF(m, n, a)
	}
	q.gram = Grow(q.gram, n*n)
	q.gramT = Grow(q.gramT, n*n)
	g, gt := q.gram, q.gramT
	for pass := 0; pass < 2; pass++ {
		syrkUpper(n, m, a, gt)
		Convert(g, gt)
		if !potrfUpper(n, g) {
			return q.QF(m, n, a)
		}
		Convert(gt, g)
		trsmRightUpper(m, n, gt, a)
	}
	return nil
}

// syrkUpper sets the upper triangle of c (n x n) to a^T a, a being k x n.
func syrkUpper[T Float](n, k int, a, c []T) {
	if Is32[T]() {
		blas32.Implementation().Ssyrk(blas.Upper, blas.Trans, n, k, 1, As32(a), n, 0, As32(c), n)
		return
	}
	blas64.Implementation().Dsyrk(blas.Upper, blas.Trans, n, k, 1, As64(a), n, 0, As64(c), n)
}

// trsmRightUpper sets b (m x n) to b r^(-1), r upper triangular n x n.
func trsmRightUpper[T Float](m, n int, r, b []T) {
	if Is32[T]() {
		blas32.Implementation().Strsm(blas.Right, blas.Upper, blas.NoTrans, blas.NonUnit, m, n, 1, As32(r), n, As32(b), n)
		return
	}
	blas64.Implementation().Dtrsm(blas.Right, blas.Upper, blas.NoTrans, blas.NonUnit, m, n, 1, As64(r), n, As64(b), n)
}
