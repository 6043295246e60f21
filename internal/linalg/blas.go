package linalg

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
)

// BLASEnv names the environment variable that chooses the BLAS when
// UseBLAS was not called: "auto" (or unset) for the first CBLAS found on the
// machine (libopenblas.so.0, libopenblas.so, then libblas.so.3 with
// liblapack.so.3) and pure-Go gonum where none loads; "openblas" for
// OpenBLAS only; "gonum" for pure Go; or a library's path (or several,
// comma-separated, their symbols looked up in that order) that has the CBLAS
// functions with 32-bit integers and, optionally, LAPACK's.
const BLASEnv = "ORTHONET_BLAS"

// BLAS is every BLAS interface of gonum, the set Gorgonia's Use takes.
type BLAS interface {
	blas.Float32
	blas.Float64
	blas.Complex64
	blas.Complex128
}

// blasChoice is the process-wide choice, made once at the first product (or
// the first call of Backend, SetBLASThreads or Implementation's methods).
type blasChoice struct {
	once      sync.Once
	mu        sync.Mutex // guards request, requested and done
	request   string     // UseBLAS's name
	requested bool
	done      bool
	loaded
}

// loaded is what a build's open reports.
type loaded struct {
	desc     string // Backend's answer
	native   bool   // the C library computes products
	lapack   bool   // ... and QR and Cholesky factorisations
	openblas bool   // ... and it is OpenBLAS
}

var choice blasChoice

func chosen() *blasChoice {
	choice.once.Do(func() {
		choice.mu.Lock()
		name, source := choice.request, "linalg.UseBLAS"
		if !choice.requested {
			name, source = os.Getenv(BLASEnv), BLASEnv
		}
		choice.done = true
		choice.mu.Unlock()
		var l loaded
		if err := checkBLASName(name); err != nil {
			l = loaded{desc: fmt.Sprintf("gonum (pure Go): %s=%q: %v", source, name, err)}
		} else {
			l = open(name, source)
		}
		choice.loaded = l
	})
	return &choice
}

// Backend says which BLAS and LAPACK compute orthonet's products and
// factorisations, and why: "OpenBLAS (libopenblas.so.0, loaded at run
// time)", or "gonum (pure Go): ..." with the reason no library was used.
// Its first call makes the choice if no product has made it yet.
func Backend() string { return chosen().desc }

// UseBLAS chooses the BLAS as BLASEnv does (which it overrides): "auto",
// "openblas", "gonum" or a library's path. It must come before the first
// product; afterwards it returns an error unless the name is the one already
// in force. A library that does not load is not an error here: the products
// fall back to pure Go, and Backend says why.
func UseBLAS(name string) error {
	if err := checkBLASName(name); err != nil {
		return fmt.Errorf("linalg: UseBLAS(%q): %v", name, err)
	}
	choice.mu.Lock()
	defer choice.mu.Unlock()
	if choice.done {
		if choice.requested && choice.request == name {
			return nil
		}
		return fmt.Errorf("linalg: UseBLAS(%q) after the BLAS was chosen (%s): call it before the first product", name, choice.desc)
	}
	choice.request, choice.requested = name, true
	return nil
}

// checkBLASName refuses a name that is neither a keyword nor a path.
func checkBLASName(name string) error {
	switch name {
	case "", "auto", "openblas", "gonum":
		return nil
	}
	for _, p := range strings.Split(name, ",") {
		if !strings.Contains(p, "/") && !strings.Contains(p, ".so") && !strings.HasSuffix(p, ".dylib") {
			return fmt.Errorf("want auto, openblas, gonum, or a shared library's path (%q is none)", p)
		}
	}
	return nil
}

// wideFloat32 says AddMul forms float32 products in float64 (see AddMul):
// gonum's and the reference BLAS's sgemm round after every term, OpenBLAS's
// keeps RSDM's rows on the manifold.
func wideFloat32() bool { return !chosen().openblas }

// SetBLASThreads sets how many threads one OpenBLAS call may use and
// returns the previous count, or does nothing and returns 0 where the BLAS
// is not OpenBLAS (gonum's products manage their own goroutines). The count
// is process-wide: callers that split a product across goroutines themselves
// set it to 1 for the time the pieces run, and back afterwards.
func SetBLASThreads(n int) int {
	if !chosen().openblas {
		return 0
	}
	return setThreadsNative(n)
}

// Implementation returns the BLAS that orthonet's products use, as gonum's
// interfaces: level-3 products (gemm, syrk, trsm) go to the chosen library,
// the rest to gonum. Gorgonia's tape machine multiplies through it after
// gorgonia.Use(linalg.Implementation()).
func Implementation() BLAS { return impl{} }

// qfBackend computes the Q factor with the chosen LAPACK (gonum's where the
// library has none) and writes sign(diag(R)) into sign.
func qfBackend[T Float](q *QR[T], m, n int, a []T, sign []float64) {
	if c := chosen(); c.lapack {
		qfNative(q, m, n, a, sign)
		return
	}
	qfGonum(q, m, n, a, sign)
}

// potrfUpper overwrites the upper triangle of the row-major symmetric
// positive definite n x n matrix g with R, g = R^T R; it reports false if g
// is not positive definite.
func potrfUpper(n int, g []float64) bool {
	if c := chosen(); c.lapack {
		return potrfNative(n, g)
	}
	return potrfGonum(n, g)
}

// Every product of gonum's blas32 and blas64 packages, gonum's own LAPACK's
// included, goes through the chosen library.
func init() {
	blas32.Use(impl{})
	blas64.Use(impl{})
}

// impl sends the level-3 products with valid arguments to the chosen
// library and everything else (argument errors, which gonum reports, and
// empty or zero-alpha products included) to gonum.
type impl struct{ gonum.Implementation }

var _ BLAS = impl{}

func native() bool { return chosen().native }

// span is the length a rows x cols matrix with leading dimension ld needs,
// or -1 when ld is too small.
func span(rows, cols, ld int) int {
	if ld < max(1, cols) {
		return -1
	}
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

func isTrans(t blas.Transpose) bool { return t == blas.Trans || t == blas.ConjTrans }

func gemmOK(tA, tB blas.Transpose, m, n, k, la, lda, lb, ldb, lc, ldc int) bool {
	okT := func(t blas.Transpose) bool { return t == blas.NoTrans || isTrans(t) }
	if !okT(tA) || !okT(tB) || m <= 0 || n <= 0 || k <= 0 {
		return false
	}
	ra, ca := m, k
	if isTrans(tA) {
		ra, ca = k, m
	}
	rb, cb := k, n
	if isTrans(tB) {
		rb, cb = n, k
	}
	sa, sb, sc := span(ra, ca, lda), span(rb, cb, ldb), span(m, n, ldc)
	return sa >= 0 && sb >= 0 && sc >= 0 && la >= sa && lb >= sb && lc >= sc
}

func syrkOK(ul blas.Uplo, t blas.Transpose, n, k, la, lda, lc, ldc int) bool {
	if (ul != blas.Upper && ul != blas.Lower) || (t != blas.NoTrans && !isTrans(t)) || n <= 0 || k <= 0 {
		return false
	}
	ra, ca := n, k
	if isTrans(t) {
		ra, ca = k, n
	}
	sa, sc := span(ra, ca, lda), span(n, n, ldc)
	return sa >= 0 && sc >= 0 && la >= sa && lc >= sc
}

func trsmOK(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n, la, lda, lb, ldb int) bool {
	if (s != blas.Left && s != blas.Right) || (ul != blas.Upper && ul != blas.Lower) ||
		(t != blas.NoTrans && !isTrans(t)) || (d != blas.Unit && d != blas.NonUnit) || m <= 0 || n <= 0 {
		return false
	}
	k := n
	if s == blas.Left {
		k = m
	}
	sa, sb := span(k, k, lda), span(m, n, ldb)
	return sa >= 0 && sb >= 0 && la >= sa && lb >= sb
}

// gemv is a product C = alpha op(A) op(B) + beta C whose C is one column
// (n == 1) or one row (m == 1) as a matrix-vector product y = alpha op(M) x
// + beta y over the row-major rows x cols matrix M: the BLAS's gemm packs
// its operands for blocks, which costs more than the product itself at the
// sizes of a recurrent cell's (100 x 100 x 1: 3.6 us as sgemm).
type gemv struct {
	t              blas.Transpose
	rows, cols, ld int
	aIsMatrix      bool // M is A (x is B), else M is B (x is A)
	incX, incY     int
}

// asGemv returns the gemv of a checked product, if C is a vector.
func asGemv(tA, tB blas.Transpose, m, n, k, lda, ldb, ldc int) (gemv, bool) {
	switch {
	case n == 1:
		g := gemv{t: blas.NoTrans, rows: m, cols: k, ld: lda, aIsMatrix: true, incX: ldb, incY: ldc}
		if isTrans(tA) {
			g.t, g.rows, g.cols = blas.Trans, k, m
		}
		if isTrans(tB) {
			g.incX = 1
		}
		return g, true
	case m == 1:
		g := gemv{t: blas.Trans, rows: k, cols: n, ld: ldb, incX: 1, incY: 1}
		if isTrans(tB) {
			g.t, g.rows, g.cols = blas.NoTrans, n, k
		}
		if isTrans(tA) {
			g.incX = lda
		}
		return g, true
	}
	return gemv{}, false
}

// gemvOperands returns the matrix and the vector of g among a product's
// operands a and b.
func gemvOperands[T any](g gemv, a, b []T) (mat, x []T) {
	if g.aIsMatrix {
		return a, b
	}
	return b, a
}

func (b impl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, bb []float32, ldb int, beta float32, c []float32, ldc int) {
	if alpha == 0 || !native() || !gemmOK(tA, tB, m, n, k, len(a), lda, len(bb), ldb, len(c), ldc) {
		b.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc)
		return
	}
	gemmNative(tA, tB, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc, sgemmNative, sgemvNative)
}

func (b impl) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, bb []float64, ldb int, beta float64, c []float64, ldc int) {
	if alpha == 0 || !native() || !gemmOK(tA, tB, m, n, k, len(a), lda, len(bb), ldb, len(c), ldc) {
		b.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc)
		return
	}
	gemmNative(tA, tB, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc, dgemmNative, dgemvNative)
}

// gemmNative runs a checked product in the library of one precision: as
// its gemv where C is a vector (see gemv), else as its gemm.
func gemmNative[T Float](tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int,
	gemm func(tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int),
	gemv func(t blas.Transpose, m, n int, alpha T, a []T, lda int, x []T, incX int, beta T, y []T, incY int)) {
	if g, ok := asGemv(tA, tB, m, n, k, lda, ldb, ldc); ok {
		mat, x := gemvOperands(g, a, b)
		gemv(g.t, g.rows, g.cols, alpha, mat, g.ld, x, g.incX, beta, c, g.incY)
		return
	}
	gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func (b impl) Ssyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) {
	if alpha == 0 || !native() || !syrkOK(ul, t, n, k, len(a), lda, len(c), ldc) {
		b.Implementation.Ssyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
		return
	}
	ssyrkNative(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

func (b impl) Dsyrk(ul blas.Uplo, t blas.Transpose, n, k int, alpha float64, a []float64, lda int, beta float64, c []float64, ldc int) {
	if alpha == 0 || !native() || !syrkOK(ul, t, n, k, len(a), lda, len(c), ldc) {
		b.Implementation.Dsyrk(ul, t, n, k, alpha, a, lda, beta, c, ldc)
		return
	}
	dsyrkNative(ul, t, n, k, alpha, a, lda, beta, c, ldc)
}

func (b impl) Strsm(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float32, a []float32, lda int, bb []float32, ldb int) {
	if alpha == 0 || !native() || !trsmOK(s, ul, t, d, m, n, len(a), lda, len(bb), ldb) {
		b.Implementation.Strsm(s, ul, t, d, m, n, alpha, a, lda, bb, ldb)
		return
	}
	strsmNative(s, ul, t, d, m, n, alpha, a, lda, bb, ldb)
}

func (b impl) Dtrsm(s blas.Side, ul blas.Uplo, t blas.Transpose, d blas.Diag, m, n int, alpha float64, a []float64, lda int, bb []float64, ldb int) {
	if alpha == 0 || !native() || !trsmOK(s, ul, t, d, m, n, len(a), lda, len(bb), ldb) {
		b.Implementation.Dtrsm(s, ul, t, d, m, n, alpha, a, lda, bb, ldb)
		return
	}
	dtrsmNative(s, ul, t, d, m, n, alpha, a, lda, bb, ldb)
}
