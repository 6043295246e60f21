//go:build openblas && cgo

package linalg

/*
#cgo LDFLAGS: -lopenblas
extern void sgelqf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
extern void sorglq_(const int*, const int*, const int*, float*, const int*, float*, float*, const int*, int*);
extern void dgelqf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
extern void dorglq_(const int*, const int*, const int*, double*, const int*, double*, double*, const int*, int*);
extern void dpotrf_(const char*, const int*, double*, const int*, int*);
extern void openblas_set_num_threads(int);
extern int openblas_get_num_threads(void);
extern void openblas_read_env(void);
extern int blas_thread_shutdown_(void);
extern int blas_thread_init(void);

#include <stdlib.h>

// short_spin restarts OpenBLAS's thread pool with idle threads that spin for
// 2^timeout cycles before they sleep, instead of the default 2^28 (about
// 0.1 s), unless OPENBLAS_THREAD_TIMEOUT says otherwise.
static void short_spin(const char* timeout) {
	setenv("OPENBLAS_THREAD_TIMEOUT", timeout, 0);
	openblas_read_env();
	blas_thread_shutdown_();
	blas_thread_init();
}

// The upper triangle of a row-major symmetric matrix is the lower triangle of
// its column-major view: LAPACK's lower Cholesky factor L (G = L L^T) read
// row-major is the upper R with G = R^T R.
static int chol_upper_d(int n, double* a) {
	int info = 0; char uplo = 'L';
	dpotrf_(&uplo, &n, a, &n, &info);
	return info;
}

// A row-major m x n matrix is the column-major n x m matrix A^T, and the LQ
// factorisation A^T = L Q' is A = Q'^T L^T: the QR factorisation we want,
// read in place with no transposition. LQ(T, p) defines the wrappers of
// one precision, p LAPACK's letter for the C type T: lq_work_p (the
// workspace both calls need), lq_factor_p and lq_q_p.
#define LQ(T, p) \
static int lq_work_##p(int m, int n) { \
	int info = 0, lw = -1, k = n; T w1 = 0, w2 = 0; \
	p##gelqf_(&n, &m, NULL, &n, NULL, &w1, &lw, &info); \
	p##orglq_(&n, &m, &k, NULL, &n, NULL, &w2, &lw, &info); \
	return (int)(w1 > w2 ? w1 : w2); \
} \
static int lq_factor_##p(int m, int n, T* a, T* tau, T* work, int lw) { \
	int info = 0; \
	p##gelqf_(&n, &m, a, &n, tau, work, &lw, &info); \
	return info; \
} \
static int lq_q_##p(int m, int n, T* a, T* tau, T* work, int lw) { \
	int info = 0, k = n; \
	p##orglq_(&n, &m, &k, a, &n, tau, work, &lw, &info); \
	return info; \
}
LQ(float, s)
LQ(double, d)
*/
import "C"

import (
	"unsafe"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"
)

// potrfUpper overwrites the upper triangle of the row-major symmetric
// positive definite n x n matrix g with R, g = R^T R, through LAPACK; it
// reports false if g is not positive definite.
func potrfUpper(n int, g []float64) bool {
	return C.chol_upper_d(C.int(n), (*C.double)(&g[0])) == 0
}

// Backend names the BLAS and LAPACK that this build uses.
const Backend = "OpenBLAS"

// wideFloat32 says AddMul forms float32 products in float64 (see AddMul):
// not needed here, OpenBLAS's sgemm keeps RSDM's rows on the manifold.
const wideFloat32 = false

// The openblas build routes gonum's BLAS interfaces, and with them every
// product in orthonet, to OpenBLAS. This is the one process-wide choice the
// package makes.
//
// It also shortens how long OpenBLAS's idle threads spin: by default each
// spins about 0.1 s after every multithreaded call, which takes a core
// from the Go goroutines that run orthonet's other kernels in between (a
// training step is ~25 ms of alternating products and loops). With 2^16
// cycles they sleep within microseconds and wake in a few.
// OPENBLAS_THREAD_TIMEOUT, when set, keeps its meaning.
func init() {
	blas32.Use(netlib.Implementation{})
	blas64.Use(netlib.Implementation{})
	timeout := C.CString("16")
	C.short_spin(timeout)
	C.free(unsafe.Pointer(timeout))
}

// SetBLASThreads sets how many threads one OpenBLAS call may use and
// returns the previous count. The count is process-wide: callers that
// split a product across goroutines themselves set it to 1 for the time
// the pieces run, and back afterwards.
func SetBLASThreads(n int) int {
	prev := int(C.openblas_get_num_threads())
	if n != prev {
		C.openblas_set_num_threads(C.int(n))
	}
	return prev
}

// qrWork is the workspace of the LAPACK QR.
type qrWork[T Float] struct {
	tau, work []T
}

// qfBackend computes the Q factor with OpenBLAS's LAPACK in T's precision and
// writes sign(diag(R)) into sign.
func qfBackend[T Float](qq *QR[T], m, n int, a []T, sign []float64) {
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

func signOf(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}
