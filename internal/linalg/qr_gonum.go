//go:build !openblas || !cgo

package linalg

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/lapack/gonum"
)

// Backend names the BLAS and LAPACK that this build uses.
const Backend = "gonum (pure Go)"

// wideFloat32 says AddMul forms float32 products in float64 (see AddMul).
const wideFloat32 = true

// SetBLASThreads does nothing in the pure-Go build (gonum's products manage
// their own goroutines) and returns 0.
func SetBLASThreads(int) int { return 0 }

// qrWork is the workspace of the pure-Go QR.
type qrWork[T Float] struct {
	a64    []float64 // float32 input, converted
	tau64  []float64
	work64 []float64
	query  [1]float64
}

// qfBackend computes the Q factor with gonum's pure-Go LAPACK, in float64,
// and writes sign(diag(R)) into sign.
func qfBackend[T Float](qq *QR[T], m, n int, a []T, sign []float64) {
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
		if a64[j*n+j] < 0 {
			sign[j] = -1
		} else {
			sign[j] = 1
		}
	}
	impl.Dorgqr(m, n, n, a64, n, q.tau64, q.work64, lw)
	if Is32[T]() {
		Convert(a, a64)
	}
}

// potrfUpper overwrites the upper triangle of the row-major symmetric
// positive definite n x n matrix g with R, g = R^T R; it reports false if g
// is not positive definite.
func potrfUpper(n int, g []float64) bool {
	return gonum.Implementation{}.Dpotrf(blas.Upper, n, g, n)
}
