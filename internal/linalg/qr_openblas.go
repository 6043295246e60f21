//go:build openblas && cgo

package linalg

/*
#cgo LDFLAGS: -lopenblas
extern void sgelqf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
extern void sorglq_(const int*, const int*, const int*, float*, const int*, float*, float*, const int*, int*);
extern void dgelqf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
extern void dorglq_(const int*, const int*, const int*, double*, const int*, double*, double*, const int*, int*);
extern void dpotrf_(const char*, const int*, double*, const int*, int*);

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
// read in place with no transposition.
static int lq_work_s(int m, int n) {
	int info = 0, lw = -1, k = n; float w1 = 0, w2 = 0;
	sgelqf_(&n, &m, NULL, &n, NULL, &w1, &lw, &info);
	sorglq_(&n, &m, &k, NULL, &n, NULL, &w2, &lw, &info);
	return (int)(w1 > w2 ? w1 : w2);
}
static int lq_work_d(int m, int n) {
	int info = 0, lw = -1, k = n; double w1 = 0, w2 = 0;
	dgelqf_(&n, &m, NULL, &n, NULL, &w1, &lw, &info);
	dorglq_(&n, &m, &k, NULL, &n, NULL, &w2, &lw, &info);
	return (int)(w1 > w2 ? w1 : w2);
}
static int lq_factor_s(int m, int n, float* a, float* tau, float* work, int lw) {
	int info = 0;
	sgelqf_(&n, &m, a, &n, tau, work, &lw, &info);
	return info;
}
static int lq_q_s(int m, int n, float* a, float* tau, float* work, int lw) {
	int info = 0, k = n;
	sorglq_(&n, &m, &k, a, &n, tau, work, &lw, &info);
	return info;
}
static int lq_factor_d(int m, int n, double* a, double* tau, double* work, int lw) {
	int info = 0;
	dgelqf_(&n, &m, a, &n, tau, work, &lw, &info);
	return info;
}
static int lq_q_d(int m, int n, double* a, double* tau, double* work, int lw) {
	int info = 0, k = n;
	dorglq_(&n, &m, &k, a, &n, tau, work, &lw, &info);
	return info;
}
*/
import "C"

import (
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
func init() {
	blas32.Use(netlib.Implementation{})
	blas64.Use(netlib.Implementation{})
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
