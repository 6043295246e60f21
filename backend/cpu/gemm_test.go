package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// gemmCase is a batched GEMM with padded leading dimensions, gaps between
// the matrices of a batch and offsets into the buffers.
type gemmCase struct {
	tA, tB           bool
	m, n, k          int
	padA, padB, padC int // leading dimension minus columns
	batch            int
	gapA, gapB, gapC int // elements between the matrices of a batch
	offA, offB, offC int
	alpha, beta      float64
	nanC             bool // C starts as NaN (only with beta 0)
}

func (c gemmCase) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s_%dx%dx%d_b%d_a%g_b%g_nan%v", t(c.tA), t(c.tB), c.m, c.n, c.k, c.batch, c.alpha, c.beta, c.nanC)
}

// layout returns the rows, columns, leading dimension, batch stride and
// buffer length of a matrix.
func layout(rows, cols, pad, gap, off, batch int) (ld, stride, n int) {
	ld = cols + pad
	stride = rows*ld + gap
	n = off + max(batch, 1)*stride + 2 // two spare elements at the end
	return ld, stride, n
}

func gemmCases() []gemmCase {
	var cs []gemmCase
	shapes := [][3]int{{1, 1, 1}, {3, 7, 1}, {7, 3, 65}, {65, 7, 3}, {1, 257, 3}, {5, 1, 7}, {65, 65, 65}}
	alphas := []float64{1, -0.5, 2}
	betas := []float64{0, 1, 0.5}
	i := 0
	for _, s := range shapes {
		for tr := 0; tr < 4; tr++ {
			cs = append(cs, gemmCase{
				tA: tr&1 != 0, tB: tr&2 != 0,
				m: s[0], n: s[1], k: s[2],
				padA: i % 3, padB: (i + 1) % 3, padC: (i + 2) % 3,
				batch: i % 4, // 0 means 1
				gapA:  i % 2, gapB: 2 * (i % 2), gapC: 1 + i%2,
				offA: i % 5, offB: (i + 2) % 5, offC: (i + 4) % 5,
				alpha: alphas[i%3], beta: betas[(i/3)%3],
				nanC: (i/3)%3 == 0,
			})
			i++
		}
	}
	// A short inner dimension under large M and N, one matrix: the rows
	// are split across the backend's threads.
	for tr := 0; tr < 4; tr++ {
		cs = append(cs, gemmCase{tA: tr&1 != 0, tB: tr&2 != 0, m: 129, n: 130, k: 7 + 19*tr,
			padA: tr, padB: 1, padC: 2, batch: tr % 2, offA: 1, offB: 2, offC: 3, alpha: -0.5, beta: float64(tr % 2), nanC: tr%2 == 0})
	}
	// Empty products: C = beta C, written without being read when beta
	// is 0.
	cs = append(cs,
		gemmCase{m: 3, n: 4, k: 0, padA: 1, padB: 0, batch: 2, gapC: 1, alpha: 1, beta: 0, nanC: true},
		gemmCase{m: 3, n: 4, k: 0, tA: true, tB: true, padA: 2, batch: 2, alpha: 1, beta: 0.5},
		gemmCase{m: 128, n: 129, k: 0, padC: 1, alpha: 1, beta: 0, nanC: true},
		gemmCase{m: 0, n: 4, k: 3, alpha: 1, beta: 0.5},
		gemmCase{m: 3, n: 0, k: 3, alpha: 1, beta: 0.5},
		gemmCase{m: 3, n: 5, k: 7, alpha: 0, beta: 0, nanC: true},
	)
	return cs
}

func TestGemm(t *testing.T) {
	floats(t, testGemm[float32], testGemm[float64])
}

func testGemm[T num](t *testing.T) {
	for ci, c := range gemmCases() {
		t.Run(c.String(), func(t *testing.T) {
			r := rng(uint64(ci))
			ra, ca := c.m, c.k
			if c.tA {
				ra, ca = c.k, c.m
			}
			rb, cb := c.k, c.n
			if c.tB {
				rb, cb = c.n, c.k
			}
			lda, sa, na := layout(ra, ca, c.padA, c.gapA, c.offA, c.batch)
			ldb, sb, nb := layout(rb, cb, c.padB, c.gapB, c.offB, c.batch)
			ldc, sc, nc := layout(c.m, c.n, c.padC, c.gapC, c.offC, c.batch)
			a, b := uniform[T](r, na, -1, 1), uniform[T](r, nb, -1, 1)
			c0 := uniform[T](r, nc, -1, 1)
			if c.nanC {
				for i := range c0 {
					c0[i] = T(math.NaN())
				}
			}
			// The reference, with the error bound of a float sum of k
			// products: untouched elements must stay exactly as they were.
			want, tol := wide(c0), make([]float64, nc)
			at := func(bi, i, p int) float64 {
				if c.tA {
					return float64(a[c.offA+bi*sa+p*lda+i])
				}
				return float64(a[c.offA+bi*sa+i*lda+p])
			}
			bt := func(bi, p, j int) float64 {
				if c.tB {
					return float64(b[c.offB+bi*sb+j*ldb+p])
				}
				return float64(b[c.offB+bi*sb+p*ldb+j])
			}
			for bi := 0; bi < max(c.batch, 1); bi++ {
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						var s, mag float64
						for p := 0; p < c.k; p++ {
							s += at(bi, i, p) * bt(bi, p, j)
							mag += math.Abs(at(bi, i, p) * bt(bi, p, j))
						}
						x := c.offC + bi*sc + i*ldc + j
						v := c.alpha * s
						mag *= math.Abs(c.alpha)
						if c.beta != 0 {
							v += c.beta * want[x]
							mag += math.Abs(c.beta * want[x])
						}
						want[x] = round[T](v)
						tol[x] = 2 * float64(c.k+2) * eps[T]() * mag
					}
				}
			}
			// One matrix of many rows over a short inner dimension is
			// split by rows across the threads, each part one BLAS call:
			// that changes OpenBLAS's blocking, and so the rounding.
			rowSplit := c.batch <= 1 && c.k <= 64 && c.m >= 128 && c.n >= 128
			onEachBits(t, !rowSplit, func(t *testing.T, be *cpu.Backend) []T {
				bc := load(t, be, c0)
				run(t, be, backend.Gemm{
					TransA: c.tA, TransB: c.tB, M: c.m, N: c.n, K: c.k,
					Alpha: c.alpha, Beta: c.beta,
					A: backend.At(load(t, be, a), c.offA), LDA: lda,
					B: backend.At(load(t, be, b), c.offB), LDB: ldb,
					C: backend.At(bc, c.offC), LDC: ldc,
					Batch: c.batch, StrideA: sa, StrideB: sb, StrideC: sc,
				})
				got := read[T](t, be, bc)
				near(t, "C", got, want, tol)
				return got
			})
		})
	}
}
