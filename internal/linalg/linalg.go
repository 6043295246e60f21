// Package linalg holds the dense linear algebra that orthonet's geometry and
// optimizers share: row-major BLAS calls for float32 and float64, the Q factor
// of a QR decomposition with a sign convention, and small float64 solvers.
//
// Matrices are row-major slices. Products go through gonum's blas32 and
// blas64 interfaces, which this package points at the BLAS it chooses once,
// at the first product: a CBLAS loaded at run time (OpenBLAS where it is
// installed), pure-Go gonum where none loads, in a build without cgo, or
// where BLASEnv or UseBLAS say so; the openblas build tag links OpenBLAS
// instead. Backend says which.
package linalg

import (
	"math"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// Float is the element type of orthonet's matrices.
type Float interface {
	float32 | float64
}

// Is32 reports whether T is float32.
func Is32[T Float]() bool {
	var z T
	return unsafe.Sizeof(z) == 4
}

// As32 reinterprets a as a []float32; T must be float32.
func As32[T Float](a []T) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(a))), len(a))
}

// As64 reinterprets a as a []float64; T must be float64.
func As64[T Float](a []T) []float64 {
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(a))), len(a))
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// Gemm computes c = alpha * op(a) * op(b) + beta * c, with op(a) m x k and
// op(b) k x n, all row-major with the given leading dimensions.
func Gemm[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if Is32[T]() {
		blas32.Implementation().Sgemm(trans(tA), trans(tB), m, n, k, float32(alpha), As32(a), lda, As32(b), ldb, float32(beta), As32(c), ldc)
		return
	}
	blas64.Implementation().Dgemm(trans(tA), trans(tB), m, n, k, float64(alpha), As64(a), lda, As64(b), ldb, float64(beta), As64(c), ldc)
}

// Mul computes c = op(a) * op(b) for dense row-major matrices without
// padding: op(a) is m x k and op(b) is k x n.
func Mul[T Float](tA, tB bool, m, n, k int, a, b, c []T) {
	lda, ldb := k, n
	if tA {
		lda = m
	}
	if tB {
		ldb = k
	}
	Gemm(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, c, n)
}

// AddMul computes c += a * b for row-major matrices without padding: a is
// m x k, b is k x n. Where this build's float32 product rounds too much
// (wideFloat32: gonum's or the reference BLAS, which rounds after every one of the k
// terms), float32 operands are multiplied in float64 and c is rounded once:
// RSDM's rotated rows then stay on the manifold as they do with OpenBLAS
// (||X^T X - I||_F after 800 RSDM-P steps on a 1024 x 1024 float32 weight,
// r = 300: 3.0e-4 with the float32 product, 1.8e-5 in float64). ws is the
// float64 workspace, grown on first use.
func AddMul[T Float](m, n, k int, a, b, c []T, ws *[]float64) {
	if !Is32[T]() || !wideFloat32() {
		Gemm(false, false, m, n, k, 1, a, k, b, n, 1, c, n)
		return
	}
	need := m*k + k*n + m*n
	if cap(*ws) < need {
		*ws = make([]float64, need)
	}
	w := (*ws)[:need]
	a64, b64, c64 := w[:m*k], w[m*k:m*k+k*n], w[m*k+k*n:]
	for i, v := range a[:m*k] {
		a64[i] = float64(v)
	}
	for i, v := range b[:k*n] {
		b64[i] = float64(v)
	}
	for i, v := range c[:m*n] {
		c64[i] = float64(v)
	}
	Gemm(false, false, m, n, k, 1, a64, k, b64, n, 1, c64, n)
	for i, v := range c64 {
		c[i] = T(v)
	}
}

// Dot returns the sum of a[i]*b[i], accumulated in float64.
func Dot[T Float](a, b []T) float64 {
	var s float64
	b = b[:len(a)]
	for i, v := range a {
		s += float64(v) * float64(b[i])
	}
	return s
}

// Norm returns the Frobenius norm of a, accumulated in float64.
func Norm[T Float](a []T) float64 {
	return math.Sqrt(Dot(a, a))
}

// Finite reports whether every entry of a is finite. It is branch-free:
// v - v is 0 for finite v and NaN for NaN or an infinity, and a NaN
// survives every later addition.
func Finite[T Float](a []T) bool {
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] - a[i]
		s1 += a[i+1] - a[i+1]
		s2 += a[i+2] - a[i+2]
		s3 += a[i+3] - a[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] - a[i]
	}
	return s0+s1+s2+s3 == 0
}

// Convert copies src into dst, converting element types.
func Convert[D, S Float](dst []D, src []S) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = D(v)
	}
}

// Identity sets the n x n matrix a to the identity.
func Identity[T Float](n int, a []T) {
	clear(a[:n*n])
	for i := 0; i < n; i++ {
		a[i*n+i] = 1
	}
}

// GramError returns ||X^T X - I||_F for the n x p row-major matrix x,
// computed in float64 so that the measurement is not limited by T.
// ws must hold at least p*p + n*p float64 values; it is scratch space.
func GramError[T Float](n, p int, x []T, ws []float64) float64 {
	xd := ws[:n*p]
	g := ws[n*p : n*p+p*p]
	Convert(xd, x[:n*p])
	blas64.Implementation().Dsyrk(blas.Upper, blas.Trans, p, n, 1, xd, p, 0, g, p)
	var s float64
	for i := 0; i < p; i++ {
		d := g[i*p+i] - 1
		s += d * d
		for j := i + 1; j < p; j++ {
			s += 2 * g[i*p+j] * g[i*p+j]
		}
	}
	return math.Sqrt(s)
}

// Transpose writes the transpose of src, an r x c row-major matrix, into
// dst (c x r).
func Transpose[T Float](dst, src []T, r, c int) {
	const tile = 32
	for i0 := 0; i0 < r; i0 += tile {
		for j0 := 0; j0 < c; j0 += tile {
			for i := i0; i < min(i0+tile, r); i++ {
				row := src[i*c : (i+1)*c]
				for j := j0; j < min(j0+tile, c); j++ {
					dst[j*r+i] = row[j]
				}
			}
		}
	}
}
