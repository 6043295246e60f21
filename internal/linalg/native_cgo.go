//go:build cgo

package linalg

/*
// The calls both cgo builds make, defined in the preamble of the BLAS
// build's file (blas_dl.go loads LAPACK at run time, blas_static.go links
// it): the LQ factorization's, the Cholesky factor's and the BLAS's thread
// count's.
int lq_work_s(int m, int n);
int lq_factor_s(int m, int n, float* a, float* tau, float* work, int lw);
int lq_q_s(int m, int n, float* a, float* tau, float* work, int lw);
int lq_work_d(int m, int n);
int lq_factor_d(int m, int n, double* a, double* tau, double* work, int lw);
int lq_q_d(int m, int n, double* a, double* tau, double* work, int lw);
int chol_upper_d(int n, double* a);
void on_set_threads(int n);
int on_get_threads(void);
*/
import "C"

// qrWork is the workspace of a QR: the library's LAPACK's, in T's
// precision, and gonum's.
type qrWork[T Float] struct {
	tau, work []T
	gonumWork
}

// potrfNative is potrfUpper through the library's LAPACK.
func potrfNative(n int, g []float64) bool {
	return C.chol_upper_d(C.int(n), (*C.double)(&g[0])) == 0
}

// setThreadsNative sets the library's thread count and returns the
// previous.
func setThreadsNative(n int) int {
	prev := int(C.on_get_threads())
	if n != prev {
		C.on_set_threads(C.int(n))
	}
	return prev
}

// qfNative computes the Q factor with the library's LAPACK in T's
// precision and writes sign(diag(R)) into sign.
func qfNative[T Float](qq *QR[T], m, n int, a []T, sign []float64) {
	q := &qq.be
	cm, cn := C.int(m), C.int(n)
	if Is32[T]() {
		lw := int(C.lq_work_s(cm, cn))
		q.tau = Grow(q.tau, n)
		q.work = Grow(q.work, max(lw, 1))
		a32, tau, work := As32(a), As32(q.tau), As32(q.work)
		C.lq_factor_s(cm, cn, (*C.float)(&a32[0]), (*C.float)(&tau[0]), (*C.float)(&work[0]), C.int(len(work)))
		for j := range sign {
			sign[j] = signOf(float64(a32[j*n+j]))
		}
		C.lq_q_s(cm, cn, (*C.float)(&a32[0]), (*C.float)(&tau[0]), (*C.float)(&work[0]), C.int(len(work)))
		return
	}
	lw := int(C.lq_work_d(cm, cn))
	q.tau = Grow(q.tau, n)
	q.work = Grow(q.work, max(lw, 1))
	a64, tau, work := As64(a), As64(q.tau), As64(q.work)
	C.lq_factor_d(cm, cn, (*C.double)(&a64[0]), (*C.double)(&tau[0]), (*C.double)(&work[0]), C.int(len(work)))
	for j := range sign {
		sign[j] = signOf(a64[j*n+j])
	}
	C.lq_q_d(cm, cn, (*C.double)(&a64[0]), (*C.double)(&tau[0]), (*C.double)(&work[0]), C.int(len(work)))
}
