package backend

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/linalg"
)

// The matrix products: BLAS on the CPU (linalg.Backend: OpenBLAS where it is
// installed, pure-Go gonum otherwise), cuBLAS on a device.
var _ defined = Gemm{}

// Gemm is C = Alpha op(A) op(B) + Beta C for Batch matrices, op(A) M x K
// and op(B) K x N (op transposes when TransA / TransB is set), all
// row-major with leading dimensions LDA, LDB and LDC. Matrix i of a batch
// starts i*StrideA (StrideB, StrideC) elements after its operand. A Batch
// of 0 means 1. With Beta = 0, C is written without being read.
type Gemm struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float64
	A, B, C                   Operand
	LDA, LDB, LDC             int
	Batch                     int
	StrideA, StrideB, StrideC int
}

// Batches returns Batch, or 1 when it is 0.
func (k Gemm) Batches() int { return max(k.Batch, 1) }

// Check checks the operands' types and extents.
func (k Gemm) Check() error {
	if k.M < 0 || k.N < 0 || k.K < 0 || k.Batch < 0 {
		return fmt.Errorf("backend: gemm: negative size %d x %d x %d, batch %d", k.M, k.N, k.K, k.Batch)
	}
	ra, ca := k.M, k.K
	if k.TransA {
		ra, ca = k.K, k.M
	}
	rb, cb := k.K, k.N
	if k.TransB {
		rb, cb = k.N, k.K
	}
	dt := DTypeOf(k.C)
	b := k.Batches()
	for _, m := range []struct {
		name       string
		op         Operand
		rows, cols int
		ld, stride int
	}{{"A", k.A, ra, ca, k.LDA, k.StrideA}, {"B", k.B, rb, cb, k.LDB, k.StrideB}, {"C", k.C, k.M, k.N, k.LDC, k.StrideC}} {
		span := 0 // an empty matrix needs only a buffer
		if m.rows > 0 && m.cols > 0 {
			if m.ld < m.cols {
				return fmt.Errorf("backend: gemm: leading dimension of %s is %d, less than its %d columns", m.name, m.ld, m.cols)
			}
			span = (b-1)*m.stride + (m.rows-1)*m.ld + m.cols
		}
		if err := CheckOperand("gemm "+m.name, m.op, dt, span); err != nil {
			return err
		}
	}
	return nil
}

// Host runs the product through BLAS.
func (k Gemm) Host(p *Pool) (Func, error) {
	return onFloats(p, k, gemmHost[float32], gemmHost[float64])
}

// Device runs the product through cuBLAS. An empty inner dimension is
// C = Beta C, by a kernel of ours: cuBLAS's handling of k = 0 is not
// something to rely on.
func (k Gemm) Device(p Planner) {
	if k.M == 0 || k.N == 0 {
		return
	}
	if k.K == 0 {
		n, reach := k.Batches()*k.M*k.N, (k.Batches()-1)*k.StrideC+(k.M-1)*k.LDC+k.N
		elementwise(p, indexed(p, "on_scale_strided", n, reach), n,
			scaleArgs{Batch: k.Batches(), M: k.M, N: k.N, Ldc: k.LDC, Stride: k.StrideC, Beta: k.Beta, C: k.C})
		return
	}
	p.Gemm(DeviceGemm{TransA: k.TransA, TransB: k.TransB, M: k.M, N: k.N, K: k.K, Alpha: k.Alpha, Beta: k.Beta,
		A: p.Addr(k.A), B: p.Addr(k.B), C: p.Addr(k.C), LDA: k.LDA, LDB: k.LDB, LDC: k.LDC,
		StrideA: k.StrideA, StrideB: k.StrideB, StrideC: k.StrideC, Batch: k.Batches()})
}

func gemmHost[T Float](p *Pool, k Gemm) Func {
	a, bb, c := hostData[T](k.A), hostData[T](k.B), hostData[T](k.C)
	batches := k.Batches()
	alpha, beta := T(k.Alpha), T(k.Beta)
	if k.K == 0 && k.M > 0 && k.N > 0 {
		// An empty sum: C = Beta C. BLAS would refuse the leading
		// dimensions of A and B, which Check does not constrain here.
		return func() error {
			for i := 0; i < batches; i++ {
				for r := 0; r < k.M; r++ {
					row := c[i*k.StrideC+r*k.LDC:][:k.N]
					for j := range row {
						if beta == 0 {
							row[j] = 0
						} else {
							row[j] *= beta
						}
					}
				}
			}
			return nil
		}
	}
	if batches == 1 && k.K <= 64 && k.M >= 128 && k.N >= 128 && p.threads > 1 {
		// A product over a short inner dimension (a weight's gradient over
		// a batch) is bound by memory, and OpenBLAS's threads share it
		// badly (1024 x 1024 x 16 on this workplace's 2 cores: 0.59 ms on
		// two OpenBLAS threads, 0.24 ms as two single-threaded halves): its
		// rows are split across goroutines.
		s := p.split(k.M, k.N*k.K, func(lo, hi int) {
			ao := lo * k.LDA
			if k.TransA {
				ao = lo
			}
			linalg.Gemm(k.TransA, k.TransB, hi-lo, k.N, k.K, alpha, a[ao:], k.LDA, bb, k.LDB, beta, c[lo*k.LDC:], k.LDC)
		})
		s.parts = p.threads
		return oneBLASThread(s)
	}
	return func() error {
		for i := 0; i < batches; i++ {
			linalg.Gemm(k.TransA, k.TransB, k.M, k.N, k.K, alpha, a[i*k.StrideA:], k.LDA, bb[i*k.StrideB:], k.LDB, beta, c[i*k.StrideC:], k.LDC)
		}
		return nil
	}
}

// oneBLASThread returns a Func that runs s, its parts split across the
// pool's threads with OpenBLAS on one thread in each: the per-head products
// of attention are small (65 x 65 x 256 in the paper's ViT) and OpenBLAS's
// own threads share them badly.
func oneBLASThread(s *splitter) Func {
	return func() error {
		if s.parts > 1 {
			prev := linalg.SetBLASThreads(1)
			defer linalg.SetBLASThreads(prev)
		}
		s.run()
		return nil
	}
}
