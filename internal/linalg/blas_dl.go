//go:build cgo && !openblas

package linalg

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

// on_dlopen opens path; where that fails it copies dlerror's reason into err
// in the same call (dlerror's state is per thread, and a goroutine may move
// to another thread between two cgo calls).
static void *on_dlopen(const char *path, char *err, size_t cap) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, cap, "%s", e != NULL ? e : "dlopen failed and gave no reason");
	}
	return h;
}
static void *on_dlsym(void *h, const char *name) { return dlsym(h, name); }
static void on_dlclose(void *h) { dlclose(h); }

// The loaded library's functions. CBLAS's enums are ints (row-major 101, no
// transpose 111, transpose 112, upper 121, non-unit 131, left 141, ...:
// cblasEnum maps gonum's constants to them). The Fortran LAPACK functions that
// take a character are also passed its hidden length, which gfortran's ABI
// appends and C implementations (OpenBLAS's) ignore.
typedef struct {
	void (*sgemm)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
	void (*dgemm)(int, int, int, int, int, int, double, const double *, int, const double *, int, double, double *, int);
	void (*ssyrk)(int, int, int, int, int, float, const float *, int, float, float *, int);
	void (*dsyrk)(int, int, int, int, int, double, const double *, int, double, double *, int);
	void (*strsm)(int, int, int, int, int, int, int, float, const float *, int, float *, int);
	void (*dtrsm)(int, int, int, int, int, int, int, double, const double *, int, double *, int);
	void (*sgemv)(int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
	void (*dgemv)(int, int, int, int, double, const double *, int, const double *, int, double, double *, int);
	void (*sgelqf)(const int *, const int *, float *, const int *, float *, float *, const int *, int *);
	void (*sorglq)(const int *, const int *, const int *, float *, const int *, float *, float *, const int *, int *);
	void (*dgelqf)(const int *, const int *, double *, const int *, double *, double *, const int *, int *);
	void (*dorglq)(const int *, const int *, const int *, double *, const int *, double *, double *, const int *, int *);
	void (*dpotrf)(const char *, const int *, double *, const int *, int *, size_t);
	void (*set_threads)(int);
	int (*get_threads)(void);
	void (*read_env)(void);
	int (*thread_shutdown)(void);
	int (*thread_init)(void);
} on_blas;

static on_blas B;

// on_set stores the function of slot i (the order of on_blas's fields).
static void on_set(int i, void *f) { ((void **)&B)[i] = f; }

static void on_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
	B.sgemm(101, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void on_dgemm(int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc) {
	B.dgemm(101, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void on_ssyrk(int ul, int t, int n, int k, float alpha, const float *a, int lda, float beta, float *c, int ldc) {
	B.ssyrk(101, ul, t, n, k, alpha, a, lda, beta, c, ldc);
}
static void on_dsyrk(int ul, int t, int n, int k, double alpha, const double *a, int lda, double beta, double *c, int ldc) {
	B.dsyrk(101, ul, t, n, k, alpha, a, lda, beta, c, ldc);
}
static void on_strsm(int s, int ul, int t, int d, int m, int n, float alpha, const float *a, int lda, float *b, int ldb) {
	B.strsm(101, s, ul, t, d, m, n, alpha, a, lda, b, ldb);
}
static void on_dtrsm(int s, int ul, int t, int d, int m, int n, double alpha, const double *a, int lda, double *b, int ldb) {
	B.dtrsm(101, s, ul, t, d, m, n, alpha, a, lda, b, ldb);
}
static void on_sgemv(int t, int m, int n, float alpha, const float *a, int lda, const float *x, int incx, float beta, float *y, int incy) {
	B.sgemv(101, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
static void on_dgemv(int t, int m, int n, double alpha, const double *a, int lda, const double *x, int incx, double beta, double *y, int incy) {
	B.dgemv(101, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

// The upper triangle of a row-major symmetric matrix is the lower triangle of
// its column-major view: LAPACK's lower Cholesky factor L (G = L L^T) read
// row-major is the upper R with G = R^T R.
int chol_upper_d(int n, double *a) {
	int info = 0; char uplo = 'L';
	B.dpotrf(&uplo, &n, a, &n, &info, 1);
	return info;
}

// A row-major m x n matrix is the column-major n x m matrix A^T, and the LQ
// factorisation A^T = L Q' is A = Q'^T L^T: the QR factorisation we want,
// read in place with no transposition (as in the openblas build).
#define LQ(T, p) \
int lq_work_##p(int m, int n) { \
	int info = 0, lw = -1, k = n; T w1 = 0, w2 = 0; \
	B.p##gelqf(&n, &m, NULL, &n, NULL, &w1, &lw, &info); \
	B.p##orglq(&n, &m, &k, NULL, &n, NULL, &w2, &lw, &info); \
	return (int)(w1 > w2 ? w1 : w2); \
} \
int lq_factor_##p(int m, int n, T *a, T *tau, T *work, int lw) { \
	int info = 0; \
	B.p##gelqf(&n, &m, a, &n, tau, work, &lw, &info); \
	return info; \
} \
int lq_q_##p(int m, int n, T *a, T *tau, T *work, int lw) { \
	int info = 0, k = n; \
	B.p##orglq(&n, &m, &k, a, &n, tau, work, &lw, &info); \
	return info; \
}
LQ(float, s)
LQ(double, d)

void on_set_threads(int n) { B.set_threads(n); }
int on_get_threads(void) { return B.get_threads(); }

// short_spin restarts OpenBLAS's thread pool with idle threads that spin for
// 2^timeout cycles before they sleep, unless OPENBLAS_THREAD_TIMEOUT says
// otherwise (see open). It reports whether the library had the functions.
static int short_spin(const char *timeout) {
	if (B.read_env == NULL || B.thread_shutdown == NULL || B.thread_init == NULL) return 0;
	setenv("OPENBLAS_THREAD_TIMEOUT", timeout, 0);
	B.read_env();
	B.thread_shutdown();
	B.thread_init();
	return 1;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"gonum.org/v1/gonum/blas"
)

// The symbols of on_blas's fields, in their order; the CBLAS ones are
// required, the rest optional.
var (
	cblasSyms  = []string{"cblas_sgemm", "cblas_dgemm", "cblas_ssyrk", "cblas_dsyrk", "cblas_strsm", "cblas_dtrsm", "cblas_sgemv", "cblas_dgemv"}
	lapackSyms = []string{"sgelqf_", "sorglq_", "dgelqf_", "dorglq_", "dpotrf_"}
	openSyms   = []string{"openblas_set_num_threads", "openblas_get_num_threads", "openblas_read_env", "blas_thread_shutdown_", "blas_thread_init"}
)

// open loads the first of name's candidate libraries that has the CBLAS
// functions and passes a small product check, and falls back to pure Go,
// saying why, where none does. Where the library is OpenBLAS it shortens
// how long its idle threads spin: by default each spins about 0.1 s after
// every multithreaded call, which takes a core from the Go goroutines that
// run orthonet's other kernels in between (a training step is ~25 ms of
// alternating products and loops). With 2^16 cycles they sleep within
// microseconds and wake in a few. OPENBLAS_THREAD_TIMEOUT, when set, keeps
// its meaning.
func open(name, source string) loaded {
	if name == "gonum" {
		return loaded{desc: "gonum (pure Go): " + source + "=gonum"}
	}
	var reasons []string
	for _, libs := range candidates(name) {
		l, err := openSet(libs)
		if err == nil {
			if l.openblas {
				timeout := C.CString("16")
				C.short_spin(timeout)
				C.free(unsafe.Pointer(timeout))
			}
			return l
		}
		reasons = append(reasons, err.Error())
	}
	why := "no CBLAS found"
	if name != "" && name != "auto" {
		why = source + "=" + name + " did not load"
	}
	return loaded{desc: "gonum (pure Go): " + why + ": " + strings.Join(reasons, "; ")}
}

// openSet opens libs and resolves on_blas's functions across them, in order;
// on an error it closes them again.
func openSet(libs []string) (l loaded, err error) {
	what := strings.Join(libs, " + ")
	var handles []unsafe.Pointer
	defer func() {
		if err != nil {
			for _, h := range handles {
				C.on_dlclose(h)
			}
		}
	}()
	for _, p := range libs {
		cp := C.CString(p)
		var reason [1024]C.char
		h := C.on_dlopen(cp, &reason[0], C.size_t(len(reason)))
		C.free(unsafe.Pointer(cp))
		if h == nil {
			return loaded{}, errors.New(C.GoString(&reason[0]))
		}
		handles = append(handles, h)
	}
	slot := 0
	// set resolves names into the next slots and returns those it lacks.
	set := func(names []string) (missing []string) {
		for _, n := range names {
			cn := C.CString(n)
			var f unsafe.Pointer
			for _, h := range handles {
				if f = C.on_dlsym(h, cn); f != nil {
					break
				}
			}
			C.free(unsafe.Pointer(cn))
			if f == nil {
				missing = append(missing, n)
			}
			C.on_set(C.int(slot), f)
			slot++
		}
		return missing
	}
	if miss := set(cblasSyms); len(miss) > 0 {
		return loaded{}, fmt.Errorf("%s lacks %s", what, strings.Join(miss, ", "))
	}
	noLapack := set(lapackSyms)
	noOpen := set(openSyms)
	openblas := !slices.Contains(noOpen, openSyms[0]) && !slices.Contains(noOpen, openSyms[1])
	if err := selfCheck(); err != nil {
		return loaded{}, fmt.Errorf("%s: %v", what, err)
	}
	kind := "CBLAS"
	if openblas {
		kind = "OpenBLAS"
	}
	l = loaded{desc: fmt.Sprintf("%s (%s, loaded at run time)", kind, what), native: true, lapack: len(noLapack) == 0, openblas: openblas}
	if !l.lapack {
		l.desc = fmt.Sprintf("%s (%s, loaded at run time; LAPACK from gonum: it lacks %s)", kind, what, strings.Join(noLapack, ", "))
	}
	return l, nil
}

// selfCheck runs a 2 x 2 x 3 product with both operands transposed in both
// precisions, which a library with other conventions (64-bit integers,
// column-major only) gets wrong.
func selfCheck() error {
	at := []float64{1, 2, 3, 4, 5, 6} // A^T, 3 x 2: A = [1 3 5; 2 4 6]
	bt := []float64{1, 0, 2, 0, 1, 1} // B^T, 2 x 3: B = [1 0; 0 1; 2 1]
	want := []float64{11, 8, 14, 10}
	c := make([]float64, 4)
	dgemmNative(blas.Trans, blas.Trans, 2, 2, 3, 1, at, 2, bt, 3, 0, c, 2)
	at32, bt32, c32 := make([]float32, 6), make([]float32, 6), make([]float32, 4)
	Convert(at32, at)
	Convert(bt32, bt)
	sgemmNative(blas.Trans, blas.Trans, 2, 2, 3, 1, at32, 2, bt32, 3, 0, c32, 2)
	for i, w := range want {
		if math.Abs(c[i]-w) > 1e-12 || math.Abs(float64(c32[i])-w) > 1e-5 {
			return fmt.Errorf("its products are wrong (dgemm %v, sgemm %v, want %v): not a CBLAS with 32-bit integers?", c, c32, want)
		}
	}
	return nil
}

// candidates returns the library sets that name asks for, each opened
// together, tried in order.
func candidates(name string) [][]string {
	switch name {
	case "", "auto":
		return [][]string{{"libopenblas.so.0"}, {"libopenblas.so"}, {"libblas.so.3", "liblapack.so.3"}}
	case "openblas":
		return [][]string{{"libopenblas.so.0"}, {"libopenblas.so"}}
	}
	return [][]string{strings.Split(name, ",")}
}

// cblasEnum maps gonum's blas constants (LAPACK's letters) to CBLAS's.
func cblasEnum[E ~byte](v E) C.int {
	switch byte(v) {
	case 'N':
		return 111
	case 'T':
		return 112
	case 'C':
		return 113
	case 'U':
		return 121
	case 'L':
		return 122
	}
	panic(fmt.Sprintf("linalg: no CBLAS value for %q", byte(v)))
}

func cblasDiag(d blas.Diag) C.int {
	if d == blas.Unit {
		return 132
	}
	return 131
}

func cblasSide(s blas.Side) C.int {
	if s == blas.Right {
		return 142
	}
	return 141
}

// The products, their arguments checked by impl's methods.

func sgemmNative(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	C.on_sgemm(cblasEnum(tA), cblasEnum(tB), C.int(m), C.int(n), C.int(k), C.float(alpha), (*C.float)(&a[0]), C.int(lda), (*C.float)(&b[0]), C.int(ldb), C.float(beta), (*C.float)(&c[0]), C.int(ldc))
}

func dgemmNative(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	C.on_dgemm(cblasEnum(tA), cblasEnum(tB), C.int(m), C.int(n), C.int(k), C.double(alpha), (*C.double)(&a[0]), C.int(lda), (*C.double)(&b[0]), C.int(ldb), C.double(beta), (*C.double)(&c[0]), C.int(ldc))
}

func sgemvNative(t blas.Transpose, m, n int, alpha float32, a []float32, lda int, x []float32, incX int, beta float32, y []float32, incY int) {
	C.on_sgemv(cblasEnum(t), C.int(m), C.int(n), C.float(alpha), (*C.float)(&a[0]), C.int(lda), (*C.float)(&x[0]), C.int(incX), C.float(beta), (*C.float)(&y[0]), C.int(incY))
}

func dgemvNative(t blas.Transpose, m, n int, alpha float64, a []float64, lda int, x []float64, incX int, beta float64, y []float64, incY int) {
	C.on_dgemv(cblasEnum(t), C.int(m), C.int(n), C.double(alpha), (*C.double)(&a[0]), C.int(lda), (*C.double)(&x[0]), C.int(incX), C.double(beta), (*C.double)(&y[0]), C.int(incY))
}

func ssyrkNative(ul blas.Uplo, t blas.Transpose, n, k int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) {
	C.on_ssyrk(cblasEnum(ul), cblasEnum(t), C.int(n), C.int(k), C.float(alpha), (*C.float)(&a[0]), C.int(lda), C.float(beta), (*C.float)(&c[0]), C.int(ldc))
}

func dsyrkNative(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	C.on_dsyrk(cblasEnum(ul), cblasEnum(t), C.int(n), C.int(k), C.double(alpha), (*C.double)(&a[0]), C.int(lda), C.double(beta), (*C.double)(&c[0]), C.int(ldc))
}

func strsmNative(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float32, a []float32, lda int, b []float32, ldb int) {
	C.on_strsm(cblasSide(s), cblasEnum(ul), cblasEnum(t), cblasDiag(d), C.int(m), C.int(n), C.float(alpha), (*C.float)(&a[0]), C.int(lda), (*C.float)(&b[0]), C.int(ldb))
}

func dtrsmNative(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, b []float64, ldb int) {
	C.on_dtrsm(cblasSide(s), cblasEnum(ul), cblasEnum(t), cblasDiag(d), C.int(m), C.int(n), C.double(alpha), (*C.double)(&a[0]), C.int(lda), (*C.double)(&b[0]), C.int(ldb))
}
