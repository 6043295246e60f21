//go:build !cgo

package linalg

import "gonum.org/v1/gonum/blas"

// open reports pure Go: without cgo no C library can be called.
func open(name, source string) loaded {
	switch name {
	case "", "auto":
		return loaded{desc: "gonum (pure Go): built without cgo"}
	case "gonum":
		return loaded{desc: "gonum (pure Go): " + source + "=gonum"}
	}
	return loaded{desc: "gonum (pure Go): " + source + "=" + name + " needs cgo, and this binary was built without it"}
}

// qrWork is the workspace of a QR: gonum's only.
type qrWork[T Float] struct{ gonumWork }

// Never called in this build (native is false): the pure-Go paths run.

func setThreadsNative(int) int { return 0 }

func qfNative[T Float](q *QR[T], m, n int, a []T, sign []float64) { qfGonum(q, m, n, a, sign) }

func potrfNative(n int, g []float64) bool { return potrfGonum(n, g) }

func sgemmNative(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	impl{}.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func dgemmNative(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	impl{}.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func sgemvNative(t blas.Transpose, m, n int, alpha float32, a []float32, lda int, x []float32, incX int, beta float32, y []float32, incY int) {
	impl{}.Implementation.Sgemv(t, m, n, alpha, a, lda, x, incX, beta, y, incY)
}

func dgemvNative(t blas.Transpose, m, n int, alpha float64, a []float64, lda int, x []float64, incX int, beta float64, y []float64, incY int) {
	impl{}.Implementation.Dgemv(t, m, n, alpha, a, lda, x, incX, beta, y, incY)
}

func ssyrkNative(ul blas.Uplo, t blas.Transpose, n, k int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) {
	impl{}.Implementation.Ssyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

func dsyrkNative(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	impl{}.Implementation.Dsyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

func strsmNative(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float32, a []float32, lda int, b []float32, ldb int) {
	impl{}.Implementation.Strsm(s, ul, t, d, m, n, alpha, a, lda, b, ldb)
}

func dtrsmNative(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	impl{}.Implementation.Dtrsm(s, ul, t, d, m, n, alpha, a, lda, b, ldb)
}
