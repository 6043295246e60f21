package linalg

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/gonum"
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
	if !(gonum.Implementation{}).Dpotrf(blas.Upper, n, g, n) {
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
