package linalg

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/lapack/gonum"
)

// gonumWork is the workspace of gonum's QR, part of every build's qrWork.
type gonumWork struct {
	a64    []float64 // float32 input, converted
	tau64  []float64
	work64 []float64
	query  [1]float64
}

// qfGonum computes the Q factor with gonum's pure-Go LAPACK, in float64,
// and writes sign(diag(R)) into sign.
func qfGonum[T Float](qq *QR[T], m, n int, a []T, sign []float64) {
	q := &qq.be
	var a64 []float64
	if Is32[T]() {
		q.a64 = Grow(q.a64, m*n)
		a64 = q.a64
		Convert(a64, a)
	} else {
		a64 = As64(a)
	}
	q.tau64 = Grow(q.tau64, n)
	impl := gonum.Implementation{}
	query := q.query[:] // a local array would escape to the heap
	impl.Dgeqrf(m, n, a64, n, q.tau64, query, -1)
	lw := int(query[0])
	impl.Dorgqr(m, n, n, a64, n, q.tau64, query, -1)
	lw = max(lw, int(query[0]), 1)
	q.work64 = Grow(q.work64, lw)
	impl.Dgeqrf(m, n, a64, n, q.tau64, q.work64, lw)
	for j := range sign {
		sign[j] = signOf(a64[j*n+j])
	}
	impl.Dorgqr(m, n, n, a64, n, q.tau64, q.work64, lw)
	if Is32[T]() {
		Convert(a, a64)
	}
}

// potrfGonum is potrfUpper through gonum's pure-Go LAPACK.
func potrfGonum(n int, g []float64) bool {
	return gonum.Implementation{}.Dpotrf(blas.Upper, n, g, n)
}

func signOf(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}
