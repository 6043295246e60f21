package cpu

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/linalg"
)

// Float is the element type of the float kernels.
type Float interface{ float32 | float64 }

// Prepare checks k and returns a Func that runs it.
func (b *Backend) Prepare(k backend.Kernel) (backend.Func, error) {
	if c, ok := k.(backend.Checker); ok {
		if err := c.Check(); err != nil {
			return nil, err
		}
	}
	if err := b.owns(k); err != nil {
		return nil, err
	}
	if err := floatData(k); err != nil {
		return nil, err
	}
	var f backend.Func
	var err error
	if d, ok := k.(backend.IdentityDelta); ok { // float64 in, the destination's type out
		if backend.DTypeOf(d.Dst) == backend.Float64 {
			return prepareIdentityDelta[float64](d), nil
		}
		return prepareIdentityDelta[float32](d), nil
	}
	if is64(k) {
		f, err = prepare[float64](b, k)
	} else {
		f, err = prepare[float32](b, k)
	}
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", k.Name(), err)
	}
	return f, nil
}

// owns checks that every operand of k is a buffer of this backend.
func (b *Backend) owns(k backend.Kernel) error {
	for _, op := range k.Operands() {
		if op.Buf == nil {
			continue
		}
		if _, err := own(op.Buf); err != nil {
			return fmt.Errorf("%s: %w", k.Name(), err)
		}
	}
	return nil
}

// floatData refuses int32 data, which Check lets through, in the kernels
// that compute on floats: all but Fill and CheckFinite.
func floatData(k backend.Kernel) error {
	switch k.(type) {
	case backend.Fill, backend.CheckFinite:
		return nil
	}
	for _, op := range k.Operands() {
		if dt := backend.DTypeOf(op); dt == backend.Float32 || dt == backend.Float64 {
			return nil
		}
	}
	return fmt.Errorf("cpu: %s: %w: int32 data", k.Name(), backend.ErrUnsupported)
}

// is64 reports whether k works on float64 data.
func is64(k backend.Kernel) bool {
	for _, op := range k.Operands() {
		if dt := backend.DTypeOf(op); dt == backend.Float64 {
			return true
		} else if dt == backend.Float32 {
			return false
		}
	}
	return false
}

func prepare[T Float](b *Backend, k backend.Kernel) (backend.Func, error) {
	switch k := k.(type) {
	case backend.Gemm:
		return prepareGemm[T](b, k), nil
	case backend.Map:
		return prepareMap[T](b, k)
	case backend.Zip:
		return prepareZip[T](b, k)
	case backend.Reduce:
		return prepareReduce[T](b, k), nil
	case backend.Softmax:
		return prepareSoftmax[T](b, k), nil
	case backend.SoftmaxGrad:
		return prepareSoftmaxGrad[T](b, k), nil
	case backend.Copy:
		return prepareCopy[T](b, k), nil
	case backend.Fill:
		return prepareFill(k), nil
	case backend.CheckFinite:
		return prepareCheckFinite(k), nil
	case backend.CheckProduct:
		return prepareCheckProduct[T](b, k), nil
	case backend.GatherRows:
		return prepareRows[T](k.N, k.Width, k.Rows, k.Src, k.Dst, true), nil
	case backend.ScatterRows:
		return prepareRows[T](k.N, k.Width, k.Rows, k.Src, k.Dst, false), nil
	case backend.QF:
		return prepareQF[T](k), nil
	}
	if f, ok, err := prepareFused[T](b, k); ok {
		return f, err
	}
	if f, ok := prepareStep[T](b, k); ok {
		return f, nil
	}
	return nil, fmt.Errorf("%w: %T", backend.ErrUnsupported, k)
}

func prepareGemm[T Float](b *Backend, k backend.Gemm) backend.Func {
	a, bb, c := Host[T](k.A), Host[T](k.B), Host[T](k.C)
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
	if batches == 1 && k.K <= 64 && k.M >= 128 && k.N >= 128 && b.threads > 1 {
		// A product over a short inner dimension (a weight's gradient over
		// a batch) is bound by memory, and OpenBLAS's threads share it
		// badly (1024 x 1024 x 16 on this workplace's 2 cores: 0.59 ms on
		// two OpenBLAS threads, 0.24 ms as two single-threaded halves): its
		// rows are split across goroutines.
		s := b.split(k.M, k.N*k.K, func(lo, hi int) {
			ao := lo * k.LDA
			if k.TransA {
				ao = lo
			}
			linalg.Gemm(k.TransA, k.TransB, hi-lo, k.N, k.K, alpha, a[ao:], k.LDA, bb, k.LDB, beta, c[lo*k.LDC:], k.LDC)
		})
		s.parts = b.threads
		return func() error {
			prev := linalg.SetBLASThreads(1)
			s.run()
			linalg.SetBLASThreads(prev)
			return nil
		}
	}
	return func() error {
		for i := 0; i < batches; i++ {
			linalg.Gemm(k.TransA, k.TransB, k.M, k.N, k.K, alpha, a[i*k.StrideA:], k.LDA, bb[i*k.StrideB:], k.LDB, beta, c[i*k.StrideC:], k.LDC)
		}
		return nil
	}
}

func prepareFill(k backend.Fill) backend.Func {
	h := k.Dst.Buf.(*buffer)
	return func() error {
		switch h.dt {
		case backend.Float32:
			d := h.f32[k.Dst.Off : k.Dst.Off+k.N]
			for i := range d {
				d[i] = float32(k.Value)
			}
		case backend.Float64:
			d := h.f64[k.Dst.Off : k.Dst.Off+k.N]
			for i := range d {
				d[i] = k.Value
			}
		default:
			d := h.i32[k.Dst.Off : k.Dst.Off+k.N]
			for i := range d {
				d[i] = int32(k.Value)
			}
		}
		return nil
	}
}

func prepareCheckFinite(k backend.CheckFinite) backend.Func {
	flag := Host[int32](k.Flag)
	h := k.Src.Buf.(*buffer)
	if h.dt == backend.Int32 {
		return func() error { return nil } // integers are finite
	}
	return func() error {
		var ok bool
		if h.dt == backend.Float32 {
			ok = linalg.Finite(h.f32[k.Src.Off : k.Src.Off+k.N])
		} else {
			ok = linalg.Finite(h.f64[k.Src.Off : k.Src.Off+k.N])
		}
		if !ok {
			flag[0] = 1
		}
		return nil
	}
}

func prepareCheckProduct[T Float](b *Backend, k backend.CheckProduct) backend.Func {
	a := Host[T](k.A)[:k.RA*k.CA]
	bb := Host[T](k.B)[:k.RA*k.CB]
	flag := Host[int32](k.Flag)
	limit := math.MaxFloat64 / 2
	if linalg.Is32[T]() {
		limit = math.MaxFloat32 / 2
	}
	// The largest magnitudes of A and B, in parts across the threads: each
	// part folds its maximum's bits into the shared one.
	var ma, mb atomic.Uint64
	sa := b.split(len(a), 1, func(lo, hi int) { foldMax(&ma, absMaxBits(a[lo:hi])) })
	sb := b.split(len(bb), 1, func(lo, hi int) { foldMax(&mb, absMaxBits(bb[lo:hi])) })
	return func() error {
		ma.Store(0)
		mb.Store(0)
		sa.run()
		sb.run()
		x, y := bitsFloat[T](ma.Load()), bitsFloat[T](mb.Load())
		// NaN fails the comparison, as does an infinite maximum.
		if !(float64(k.RA)*x*y < limit) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			flag[0] = 1
		}
		return nil
	}
}

// absMaxBits returns the bits of the largest |a[i]|: for IEEE floats
// without their sign, integer order is magnitude order, with +Inf above
// every finite value and NaN above +Inf.
func absMaxBits[T Float](a []T) uint64 {
	var m0, m1 uint64
	if linalg.Is32[T]() {
		f := linalg.As32(a)
		i := 0
		for ; i+2 <= len(f); i += 2 {
			m0 = max(m0, uint64(math.Float32bits(f[i])&0x7fffffff))
			m1 = max(m1, uint64(math.Float32bits(f[i+1])&0x7fffffff))
		}
		if i < len(f) {
			m0 = max(m0, uint64(math.Float32bits(f[i])&0x7fffffff))
		}
		return max(m0, m1)
	}
	f := linalg.As64(a)
	i := 0
	for ; i+2 <= len(f); i += 2 {
		m0 = max(m0, math.Float64bits(f[i])&^(1<<63))
		m1 = max(m1, math.Float64bits(f[i+1])&^(1<<63))
	}
	if i < len(f) {
		m0 = max(m0, math.Float64bits(f[i])&^(1<<63))
	}
	return max(m0, m1)
}

// foldMax sets m to the larger of m and v.
func foldMax(m *atomic.Uint64, v uint64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// bitsFloat returns the float of T whose bits absMaxBits returned, in
// float64.
func bitsFloat[T Float](b uint64) float64 {
	if linalg.Is32[T]() {
		return float64(math.Float32frombits(uint32(b)))
	}
	return math.Float64frombits(b)
}

func prepareRows[T Float](n, width int, rows, src, dst backend.Operand, gather bool) backend.Func {
	if width == 0 {
		return func() error { return nil } // rows of no elements
	}
	idx := Host[int32](rows)[:n]
	s, d := Host[T](src), Host[T](dst)
	limit := len(s) / width // rows of the indexed matrix
	if !gather {
		limit = len(d) / width
	}
	return func() error {
		for i, r := range idx {
			if r < 0 || int(r) >= limit {
				return fmt.Errorf("cpu: row index %d (entry %d of the indices) outside 0 to %d", r, i, limit-1)
			}
		}
		for i, r := range idx {
			if gather {
				copy(d[i*width:(i+1)*width], s[int(r)*width:(int(r)+1)*width])
			} else {
				copy(d[int(r)*width:(int(r)+1)*width], s[i*width:(i+1)*width])
			}
		}
		return nil
	}
}

func prepareQF[T Float](k backend.QF) backend.Func {
	a := Host[T](k.A)[:k.M*k.N]
	var q linalg.QR[T]
	var q64 linalg.QR[float64]
	return func() error {
		if k.GramBound > 0 && k.M == k.N && !linalg.Is32[T]() {
			return q64.QFGram(k.N, linalg.As64(a), k.GramBound)
		}
		if err := q.QF(k.M, k.N, a); err != nil {
			return errors.Join(errors.New("QR factorization failed"), err)
		}
		return nil
	}
}
