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
int chol_upper_d(int n, double* a) {
	int info = 0; char uplo = 'L';
	dpotrf_(&uplo, &n, a, &n, &info);
	return info;
}

void on_set_threads(int n) { openblas_set_num_threads(n); }
int on_get_threads(void) { return openblas_get_num_threads(); }

// A row-major m x n matrix is the column-major n x m matrix A^T, and the LQ
// factorisation A^T = L Q' is A = Q'^T L^T: the QR factorisation we want,
// read in place with no transposition. LQ(T, p) defines the wrappers of
// one precision, p LAPACK's letter for the C type T: lq_work_p (the
// workspace both calls need), lq_factor_p and lq_q_p.
#define LQ(T, p) \
int lq_work_##p(int m, int n) { \
	int info = 0, lw = -1, k = n; T w1 = 0, w2 = 0; \
	p##gelqf_(&n, &m, NULL, &n, NULL, &w1, &lw, &info); \
	p##orglq_(&n, &m, &k, NULL, &n, NULL, &w2, &lw, &info); \
	return (int)(w1 > w2 ? w1 : w2); \
} \
int lq_factor_##p(int m, int n, T* a, T* tau, T* work, int lw) { \
	int info = 0; \
	p##gelqf_(&n, &m, a, &n, tau, work, &lw, &info); \
	return info; \
} \
int lq_q_##p(int m, int n, T* a, T* tau, T* work, int lw) { \
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

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/netlib/blas/netlib"
)

// open reports OpenBLAS, linked into this build, unless name is "gonum"; a
// library's path is ignored. It shortens how long OpenBLAS's idle threads
// spin: by default each spins about 0.1 s after every multithreaded call,
// which takes a core from the Go goroutines that run orthonet's other
// kernels in between (a training step is ~25 ms of alternating products and
// loops). With 2^16 cycles they sleep within microseconds and wake in a few.
// OPENBLAS_THREAD_TIMEOUT, when set, keeps its meaning.
func open(name, source string) loaded {
	desc := "OpenBLAS (linked at build time, -tags openblas)"
	switch name {
	case "gonum":
		return loaded{desc: "gonum (pure Go): " + source + "=gonum"}
	case "", "auto", "openblas":
	default:
		desc += "; " + source + "=" + name + " ignored: this build links OpenBLAS"
	}
	timeout := C.CString("16")
	C.short_spin(timeout)
	C.free(unsafe.Pointer(timeout))
	return loaded{desc: desc, native: true, lapack: true, openblas: true}
}

// The products go through gonum's netlib bindings to the linked OpenBLAS.

func sgemmNative(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	netlib.Implementation{}.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func dgemmNative(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	netlib.Implementation{}.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func sgemvNative(t blas.Transpose, m, n int, alpha float32, a []float32, lda int, x []float32, incX int, beta float32, y []float32, incY int) {
	netlib.Implementation{}.Sgemv(t, m, n, alpha, a, lda, x, incX, beta, y, incY)
}

func dgemvNative(t blas.Transpose, m, n int, alpha float64, a []float64, lda int, x []float64, incX int, beta float64, y []float64, incY int) {
	netlib.Implementation{}.Dgemv(t, m, n, alpha, a, lda, x, incX, beta, y, incY)
}

func ssyrkNative(ul blas.Uplo, t blas.Transpose, n, k int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) {
	netlib.Implementation{}.Ssyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

func dsyrkNative(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	netlib.Implementation{}.Dsyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

func strsmNative(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float32, a []float32, lda int, b []float32, ldb int) {
	netlib.Implementation{}.Strsm(s, ul, t, d, m, n, alpha, a, lda, b, ldb)
}

func dtrsmNative(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	netlib.Implementation{}.Dtrsm(s, ul, t, d, m, n, alpha, a, lda, b, ldb)
}
