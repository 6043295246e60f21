package backend

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Every kernel checks its operands the same way on every backend (Prepare
// calls Check first), and has its CPU implementation (Host) beside its CUDA
// one (Device): the launches of kernels.cu's kernels that compute it.
var (
	_ defined = Gemm{}
	_ defined = Map{}
	_ defined = Zip{}
	_ defined = Reduce{}
	_ defined = Softmax{}
	_ defined = SoftmaxGrad{}
	_ defined = Copy{}
	_ defined = Fill{}
	_ defined = CheckFinite{}
	_ defined = CheckProduct{}
	_ defined = GatherRows{}
	_ defined = ScatterRows{}
	_ defined = QF{}
)

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

// ReduceOp is how Reduce combines elements.
type ReduceOp uint8

// The reductions.
const (
	Sum ReduceOp = iota + 1
	Max
)

// Reduce reduces Src, a row-major (Outer, Mid, Inner) array, over its
// middle axis into Dst, an (Outer, Inner) array.
type Reduce struct {
	Op                ReduceOp
	Outer, Mid, Inner int
	Src, Dst          Operand
}

// Check checks the operands.
func (k Reduce) Check() error {
	if k.Op != Sum && k.Op != Max {
		return fmt.Errorf("backend: reduce: unknown reduction %d", k.Op)
	}
	return checkSized(k, []int{k.Outer, k.Mid, k.Inner}, DTypeOf(k.Dst), "source", k.Src, k.Outer*k.Mid*k.Inner, "destination", k.Dst, k.Outer*k.Inner)
}

// Softmax writes into Dst the softmax (or with Log its logarithm) of Src, a
// row-major (Outer, Axis, Inner) array, along its middle axis. It is
// computed stably (shifted by the maximum along the axis).
type Softmax struct {
	Log                bool
	Outer, Axis, Inner int
	Src, Dst           Operand
}

// Check checks the operands.
func (k Softmax) Check() error {
	n := k.Outer * k.Axis * k.Inner
	return checkSized(k, []int{k.Outer, k.Axis, k.Inner}, DTypeOf(k.Dst), "source", k.Src, n, "destination", k.Dst, n)
}

// SoftmaxGrad writes into DX the gradient of a softmax along the middle
// axis of (Outer, Axis, Inner) arrays, from the softmax's output Y and the
// gradient DY of the loss with respect to Y: DX = Y (DY - sum(DY Y)), or
// with Log (Y the log-softmax) DX = DY - exp(Y) sum(DY).
type SoftmaxGrad struct {
	Log                bool
	Outer, Axis, Inner int
	Y, DY, DX          Operand
}

// Check checks the operands.
func (k SoftmaxGrad) Check() error {
	n := k.Outer * k.Axis * k.Inner
	return checkSized(k, []int{k.Outer, k.Axis, k.Inner}, DTypeOf(k.DX), "Y", k.Y, n, "DY", k.DY, n, "DX", k.DX, n)
}

// MaxDims bounds the axes of a Copy.
const MaxDims = 8

// Copy copies a strided view of Src into a strided view of Dst, both of
// Shape, element (i0, i1, ...) from Src.Off + sum i_k SrcStrides[k] to
// Dst.Off + sum i_k DstStrides[k]; with Add it adds to Dst instead. A
// stride of 0 repeats an element (broadcasting). Transposes, slices,
// concatenation and repeats are all Copies. Dst's view must not overlap
// itself (no two index tuples may reach one destination element: no zero
// destination stride on an axis longer than 1, no strides that collide),
// which Check refuses, nor Src.
type Copy struct {
	Shape                  []int
	Src, Dst               Operand
	SrcStrides, DstStrides []int
	Add                    bool
}

// Check checks the operands.
func (k Copy) Check() error {
	d := len(k.Shape)
	if d > MaxDims || len(k.SrcStrides) != d || len(k.DstStrides) != d {
		return fmt.Errorf("backend: copy: shape %v with strides %v and %v (at most %d axes)", k.Shape, k.SrcStrides, k.DstStrides, MaxDims)
	}
	dt := DTypeOf(k.Dst)
views:
	for _, v := range []struct {
		name    string
		op      Operand
		strides []int
	}{{"source", k.Src, k.SrcStrides}, {"destination", k.Dst, k.DstStrides}} {
		lo, hi := 0, 0
		for i, n := range k.Shape {
			if n < 0 {
				return fmt.Errorf("backend: copy: shape %v has a negative axis", k.Shape)
			}
			if n == 0 {
				if err := CheckOperand("copy "+v.name, v.op, dt, 0); err != nil {
					return err
				}
				continue views
			}
			s := v.strides[i] * (n - 1)
			if s < 0 {
				lo += s
			} else {
				hi += s
			}
		}
		if err := CheckOperand("copy "+v.name, Operand{v.op.Buf, v.op.Off + lo}, dt, hi-lo+1); err != nil {
			return err
		}
	}
	return k.checkDestination()
}

// checkDestination refuses a destination view that reaches one element
// from two index tuples. With Add that is a lost update on a device (two
// threads read the element, each adds its own source element and writes
// back); without Add it is a race too: which write lands depends on the
// order the threads run in, where the CPU backend's is the last in
// row-major order. So both are refused, as a zero destination stride
// always was. (A repeated source element, a zero source stride, is
// legal: reading an element twice races with nothing.)
func (k Copy) checkDestination() error {
	var shape, strides []int
	for i, n := range k.Shape {
		if n == 0 {
			return nil // nothing is written
		}
		if n == 1 {
			continue // a zero stride on one element repeats nothing
		}
		if k.DstStrides[i] == 0 {
			return fmt.Errorf("backend: copy: destination stride 0 on axis %d of %d elements: the destination view overlaps itself%s", i, n, k.race())
		}
		// A negative stride reflects its axis, which leaves which tuples
		// collide as they were.
		shape, strides = append(shape, n), append(strides, max(k.DstStrides[i], -k.DstStrides[i]))
	}
	// Sorted by stride, a view whose every stride passes the reach of the
	// smaller ones is one-to-one: every contiguous, transposed, sliced or
	// concatenated view.
	axes := make([]int, len(shape))
	for i := range axes {
		axes[i] = i
	}
	slices.SortStableFunc(axes, func(a, b int) int { return strides[a] - strides[b] })
	reach, ok := 0, true
	for _, a := range axes {
		if strides[a] <= reach {
			ok = false
			break
		}
		reach += strides[a] * (shape[a] - 1)
	}
	if ok {
		return nil
	}
	// Otherwise visit every element, marking what it reaches: the marks
	// cover the view's span, which fits in the buffer (checked above), at
	// one bit an element.
	span := 0
	for i, n := range shape {
		span += strides[i] * (n - 1)
	}
	seen := make([]uint64, span/64+1)
	idx := make([]int, len(shape))
	first := func(at int) []int { // the first tuple that reaches at
		t := make([]int, len(shape))
		for {
			o := 0
			for i, c := range t {
				o += c * strides[i]
			}
			if o == at {
				return t
			}
			next(t, shape)
		}
	}
	for {
		o := 0
		for i, c := range idx {
			o += c * strides[i]
		}
		if seen[o/64]&(1<<(o%64)) != 0 {
			return fmt.Errorf("backend: copy: destination view overlaps itself: indices %v and %v (of shape %v, strides %v without axes of length 1) reach one element%s",
				first(o), idx, shape, strides, k.race())
		}
		seen[o/64] |= 1 << (o % 64)
		if !next(idx, shape) {
			return nil
		}
	}
}

// race says what overlapping destination elements do on a device.
func (k Copy) race() string {
	if k.Add {
		return " (with Add, threads adding into one element lose updates)"
	}
	return " (threads writing one element race)"
}

// next steps idx to the next tuple of shape in row-major order; false
// after the last.
func next(idx, shape []int) bool {
	for ax := len(idx) - 1; ax >= 0; ax-- {
		if idx[ax]++; idx[ax] < shape[ax] {
			return true
		}
		idx[ax] = 0
	}
	return false
}

// Simplified returns the copy's shape and strides without its axes of
// length 1 and with neighbours that are contiguous in both views merged:
// the same copy over fewer, longer axes.
func (k Copy) Simplified() (shape, src, dst []int) {
	for i, n := range k.Shape {
		if n == 1 {
			continue
		}
		if l := len(shape) - 1; l >= 0 && src[l] == k.SrcStrides[i]*n && dst[l] == k.DstStrides[i]*n {
			shape[l] *= n
			src[l], dst[l] = k.SrcStrides[i], k.DstStrides[i]
			continue
		}
		shape, src, dst = append(shape, n), append(src, k.SrcStrides[i]), append(dst, k.DstStrides[i])
	}
	return shape, src, dst
}

// Fill sets N elements of Dst to Value.
type Fill struct {
	N     int
	Dst   Operand
	Value float64
}

// Check checks the operand.
func (k Fill) Check() error { return CheckOperand("fill", k.Dst, 0, k.N) }

// CheckFinite sets Flag, one element of an Int32 buffer, to 1 when any of
// the N elements of Src is NaN or infinite. It never clears the flag.
type CheckFinite struct {
	N         int
	Src, Flag Operand
}

// Check checks the operands.
func (k CheckFinite) Check() error {
	return checkAll(k, 0, "source", k.Src, k.N, Int32, "flag", k.Flag, 1)
}

// CheckProduct sets Flag like CheckFinite would for the product C = A^T B
// of an RA x CA matrix A and an RA x CB matrix B (the gradient of a linear
// layer's weight), without reading C: it checks that every entry of A and
// B is finite and that RA max|A| max|B| is below half the largest finite
// value of the type, which bounds every entry (and partial sum) of C.
// When that bound fails it sets the flag, and the caller checks C itself.
type CheckProduct struct {
	RA, CA, CB int
	A, B, Flag Operand
}

// Check checks the operands.
func (k CheckProduct) Check() error {
	if k.RA < 0 || k.CA < 0 || k.CB < 0 {
		return fmt.Errorf("backend: check-product: negative size %d x %d, %d x %d", k.RA, k.CA, k.RA, k.CB)
	}
	return checkAll(k, DTypeOf(k.A), "A", k.A, k.RA*k.CA, "B", k.B, k.RA*k.CB, Int32, "flag", k.Flag, 1)
}

// GatherRows copies row Rows[i] of Src, a matrix of Width columns, into row
// i of Dst, for i < N. Rows is an Int32 operand of N entries.
type GatherRows struct {
	N, Width       int
	Rows, Src, Dst Operand
}

// Check checks the operands; the row indices are checked when the kernel
// runs.
func (k GatherRows) Check() error {
	return checkAll(k, Int32, "indices", k.Rows, k.N, DTypeOf(k.Dst), "source", k.Src, k.Width, "destination", k.Dst, k.N*k.Width)
}

// ScatterRows copies row i of Src into row Rows[i] of Dst, a matrix of
// Width columns, for i < N. The rows must be distinct: where one repeats,
// which copy lands depends on the backend.
type ScatterRows struct {
	N, Width       int
	Rows, Src, Dst Operand
}

// Check checks the operands; the row indices are checked when the kernel
// runs.
func (k ScatterRows) Check() error {
	return checkAll(k, Int32, "indices", k.Rows, k.N, DTypeOf(k.Src), "source", k.Src, k.N*k.Width, "destination", k.Dst, k.Width)
}

// QF replaces A, an M x N matrix with M >= N, by the Q factor of its QR
// decomposition with the signs chosen so that diag(R) > 0: the QR
// retraction of the Stiefel manifold, and RSDM's inner retraction on O(r).
// GramBound, when above 0, bounds the condition number of A^T A: a backend
// may then use Cholesky QR where that is as accurate as Householder.
type QF struct {
	M, N      int
	A         Operand
	GramBound float64
}

// Check checks the operand.
func (k QF) Check() error {
	if k.M < k.N || k.N < 1 {
		return fmt.Errorf("backend: qf: %d x %d, want M >= N >= 1", k.M, k.N)
	}
	return CheckOperand("qf", k.A, 0, k.M*k.N)
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
		elementwise(p, indexed(p, "on_scale_strided", n, reach), n, k.Batches(), k.M, k.N, k.LDC, k.StrideC, k.Beta, k.C)
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

// Host reduces in float64 (sums, four lanes at a time, where Inner is 1).
func (k Reduce) Host(p *Pool) (Func, error) {
	return onFloats(p, k, reduceHost[float32], reduceHost[float64])
}

// Device takes a block per row where Inner is 1, else a thread per output;
// a few sums over many rows are split into chunks first.
func (k Reduce) Device(p Planner) {
	op := int(k.Op)
	if k.Inner == 1 {
		p.Launch("on_reduce_rows", k.Outer, op, k.Outer, k.Mid, k.Inner, k.Src, k.Dst)
		return
	}
	if k.Op == Sum && k.Outer*k.Inner < splitCols && k.Mid >= 2*splitRows {
		// Few sums over many rows: each is split into chunks of rows, summed
		// by blocks of their own, then the chunks' sums added in order.
		cols, chunks := k.Outer*k.Inner, chunksOf(k.Mid)
		part := p.Scratch(Float64, chunks*cols)
		p.Launch("on_sum_partial", chunks*((cols+DeviceThreads-1)/DeviceThreads), k.Outer, k.Mid, k.Inner, chunks, k.Src, part)
		elementwise(p, "on_sum_parts", cols, cols, chunks, part, k.Dst)
		return
	}
	elementwise(p, indexed(p, "on_reduce_mid", k.Outer*k.Mid*k.Inner), k.Outer*k.Inner, op, k.Outer, k.Mid, k.Inner, k.Src, k.Dst)
}

// A sum down a middle axis is split on a device into chunks of at least
// splitRows rows when there are fewer than splitCols sums: a thread per
// sum would then leave most of a GPU idle.
const (
	splitCols = 1 << 15
	splitRows = 64
)

// chunksOf returns how many chunks the rows of a split sum go into.
func chunksOf(rows int) int { return max(1, min(rows/splitRows, 128)) }

func reduceHost[T Float](p *Pool, k Reduce) Func {
	src := hostData[T](k.Src)[:k.Outer*k.Mid*k.Inner]
	dst := hostData[T](k.Dst)[:k.Outer*k.Inner]
	mid, inner := k.Mid, k.Inner
	var s *splitter
	if inner == 1 {
		// Each output is a contiguous run of Mid elements.
		s = p.split(k.Outer, mid, func(lo, hi int) {
			for o := lo; o < hi; o++ {
				row := src[o*mid : (o+1)*mid]
				if k.Op == Sum {
					dst[o] = T(sum(row))
				} else {
					dst[o] = maxOf(row)
				}
			}
		})
	} else {
		// Rows of Inner elements are combined into the output row.
		s = p.split(k.Outer*inner, mid, func(lo, hi int) {
			for o := 0; o < k.Outer; o++ {
				l, h := max(lo, o*inner)-o*inner, min(hi, (o+1)*inner)-o*inner
				if l >= h {
					continue
				}
				out := dst[o*inner+l : o*inner+h]
				base := o * mid * inner
				copy(out, src[base+l:base+h])
				for m := 1; m < mid; m++ {
					row := src[base+m*inner+l : base+m*inner+h]
					if k.Op == Sum {
						for i, v := range row {
							out[i] += v
						}
					} else {
						for i, v := range row {
							if v > out[i] || v != v {
								out[i] = v
							}
						}
					}
				}
			}
		})
	}
	return s.loop()
}

// sum adds a in float64, four lanes at a time.
func sum[T Float](a []T) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i])
		s1 += float64(a[i+1])
		s2 += float64(a[i+2])
		s3 += float64(a[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// maxOf returns the largest element, or NaN if there is one.
func maxOf[T Float](a []T) T {
	m := a[0]
	for _, v := range a[1:] {
		if v > m || v != v {
			m = v
			if v != v {
				return v
			}
		}
	}
	return m
}

// Host computes the softmax lane by lane, its sum in float64.
func (k Softmax) Host(p *Pool) (Func, error) {
	return onFloats(p, k, softmaxHost[float32], softmaxHost[float64])
}

// Device launches on_softmax (on_softmax_rows where Inner is 1).
func (k Softmax) Device(p Planner) {
	alongAxis(p, lanes(p, "on_softmax", k.Outer, k.Axis, k.Inner), k.Outer, k.Inner, k.Log, k.Outer, k.Axis, k.Inner, k.Src, k.Dst)
}

// lanes returns the name of a kernel along the middle axis for alongAxis:
// with 32-bit index arithmetic where it takes lanes (Inner > 1) and p
// allows it.
func lanes(p Planner, name string, outer, axis, inner int) string {
	if inner == 1 {
		return name
	}
	return indexed(p, name, outer*axis*inner)
}

func softmaxHost[T Float](p *Pool, k Softmax) Func {
	n := k.Outer * k.Axis * k.Inner
	src, dst := hostData[T](k.Src)[:n], hostData[T](k.Dst)[:n]
	axis, inner := k.Axis, k.Inner
	s := p.split(k.Outer*inner, 4*axis, func(lo, hi int) {
		for lane := lo; lane < hi; lane++ {
			o, in := lane/inner, lane%inner
			base := o*axis*inner + in
			m := src[base]
			for j := 1; j < axis; j++ {
				if v := src[base+j*inner]; v > m {
					m = v
				}
			}
			var z float64
			for j := 0; j < axis; j++ {
				z += math.Exp(float64(src[base+j*inner] - m))
			}
			if k.Log {
				lz := math.Log(z)
				for j := 0; j < axis; j++ {
					dst[base+j*inner] = T(float64(src[base+j*inner]-m) - lz)
				}
				continue
			}
			for j := 0; j < axis; j++ {
				dst[base+j*inner] = T(math.Exp(float64(src[base+j*inner]-m)) / z)
			}
		}
	})
	return s.loop()
}

// Host computes the gradient lane by lane, its sum in float64.
func (k SoftmaxGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, softmaxGradHost[float32], softmaxGradHost[float64])
}

// Device launches on_softmax_grad (on_softmax_grad_rows where Inner is 1).
func (k SoftmaxGrad) Device(p Planner) {
	alongAxis(p, lanes(p, "on_softmax_grad", k.Outer, k.Axis, k.Inner), k.Outer, k.Inner, k.Log, k.Outer, k.Axis, k.Inner, k.Y, k.DY, k.DX)
}

func softmaxGradHost[T Float](p *Pool, k SoftmaxGrad) Func {
	n := k.Outer * k.Axis * k.Inner
	y, dy, dx := hostData[T](k.Y)[:n], hostData[T](k.DY)[:n], hostData[T](k.DX)[:n]
	axis, inner := k.Axis, k.Inner
	s := p.split(k.Outer*inner, 3*axis, func(lo, hi int) {
		for lane := lo; lane < hi; lane++ {
			o, in := lane/inner, lane%inner
			base := o*axis*inner + in
			var dot float64
			for j := 0; j < axis; j++ {
				i := base + j*inner
				if k.Log {
					dot += float64(dy[i])
				} else {
					dot += float64(dy[i]) * float64(y[i])
				}
			}
			for j := 0; j < axis; j++ {
				i := base + j*inner
				if k.Log {
					dx[i] = T(float64(dy[i]) - math.Exp(float64(y[i]))*dot)
				} else {
					dx[i] = T(float64(y[i]) * (float64(dy[i]) - dot))
				}
			}
		}
	})
	return s.loop()
}

// Host copies row by row of the simplified views.
func (k Copy) Host(p *Pool) (Func, error) {
	return onFloats(p, k, copyHost[float32], copyHost[float64])
}

// Device launches on_copy, a thread per element of the simplified views.
func (k Copy) Device(p Planner) {
	shape, ss, ds := k.Simplified()
	n := 1
	for _, s := range shape {
		n *= s
	}
	if n == 0 {
		return
	}
	args := []any{len(shape), n, k.Add}
	for _, list := range [][]int{shape, ss, ds} {
		for i := range MaxDims {
			v := 0
			if i < len(list) {
				v = list[i]
			}
			args = append(args, v)
		}
	}
	// Every offset of either view lies between the sums of its negative
	// and of its positive strides times the axes' lengths less one.
	extents := []int{n}
	for _, strides := range [][]int{ss, ds} {
		lo, hi := 0, 0
		for i, s := range strides {
			if s < 0 {
				lo += s * (shape[i] - 1)
			} else {
				hi += s * (shape[i] - 1)
			}
		}
		extents = append(extents, -lo+1, hi+1)
	}
	elementwise(p, indexed(p, "on_copy", extents...), n, append(args, k.Src, k.Dst)...)
}

func copyHost[T Float](p *Pool, k Copy) Func {
	// Drop axes of length 1 and merge axes that are contiguous in both
	// views, so that the innermost loop is as long as possible.
	shape, ss, ds := k.Simplified()
	for _, n := range shape {
		if n < 1 {
			return func() error { return nil } // nothing to copy
		}
	}
	if len(shape) == 0 { // one element: an axis of one
		shape, ss, ds = []int{1}, []int{1}, []int{1}
	}
	// Negative strides reach below the operand's offset: index from the
	// lowest element each view reaches (Check keeps it in the buffer).
	var s0, d0 int
	for i, n := range shape {
		s0 -= min(ss[i], 0) * (n - 1)
		d0 -= min(ds[i], 0) * (n - 1)
	}
	src := hostData[T](At(k.Src.Buf, k.Src.Off-s0))
	dst := hostData[T](At(k.Dst.Buf, k.Dst.Off-d0))
	d := len(shape)
	inner := shape[d-1]
	outer := 1
	for _, n := range shape[:d-1] {
		outer *= n
	}
	sIn, dIn := ss[d-1], ds[d-1]
	s := p.split(outer, inner, func(lo, hi int) {
		var idx [MaxDims]int
		// Position idx at row lo.
		r := lo
		for ax := d - 2; ax >= 0; ax-- {
			idx[ax] = r % shape[ax]
			r /= shape[ax]
		}
		for row := lo; row < hi; row++ {
			so, do := s0, d0
			for ax := 0; ax < d-1; ax++ {
				so += idx[ax] * ss[ax]
				do += idx[ax] * ds[ax]
			}
			switch {
			case sIn == 1 && dIn == 1 && !k.Add:
				copy(dst[do:do+inner], src[so:so+inner])
			case sIn == 1 && dIn == 1:
				dv, sv := dst[do:do+inner], src[so:so+inner]
				for i := range dv {
					dv[i] += sv[i]
				}
			case k.Add:
				for i := 0; i < inner; i++ {
					dst[do+i*dIn] += src[so+i*sIn]
				}
			default:
				for i := 0; i < inner; i++ {
					dst[do+i*dIn] = src[so+i*sIn]
				}
			}
			next(idx[:d-1], shape[:d-1])
		}
	})
	return s.loop()
}

// Host fills the buffer, of any element type.
func (k Fill) Host(*Pool) (Func, error) {
	switch d := k.Dst.Buf.(HostBuffer).Host().(type) {
	case []float32:
		return fillHost(d[k.Dst.Off:k.Dst.Off+k.N], float32(k.Value)), nil
	case []float64:
		return fillHost(d[k.Dst.Off:k.Dst.Off+k.N], k.Value), nil
	case []int32:
		return fillHost(d[k.Dst.Off:k.Dst.Off+k.N], int32(k.Value)), nil
	}
	return nil, fmt.Errorf("%w: fill of %v", ErrUnsupported, DTypeOf(k.Dst))
}

// Device launches on_fill in the destination's type.
func (k Fill) Device(p Planner) {
	p.SetType(DTypeOf(k.Dst))
	elementwise(p, "on_fill", k.N, k.N, k.Value, k.Dst)
}

func fillHost[E Float | int32](d []E, v E) Func {
	return func() error {
		for i := range d {
			d[i] = v
		}
		return nil
	}
}

// Host checks the elements (integers are finite).
func (k CheckFinite) Host(*Pool) (Func, error) {
	flag := hostData[int32](k.Flag)
	var finite func() bool
	switch s := k.Src.Buf.(HostBuffer).Host().(type) {
	case []float32:
		finite = func() bool { return linalg.Finite(s[k.Src.Off : k.Src.Off+k.N]) }
	case []float64:
		finite = func() bool { return linalg.Finite(s[k.Src.Off : k.Src.Off+k.N]) }
	default:
		return func() error { return nil }, nil // integers are finite
	}
	return func() error {
		if !finite() {
			flag[0] = 1
		}
		return nil
	}, nil
}

// Device launches on_check_finite (nothing for integers).
func (k CheckFinite) Device(p Planner) {
	dt := DTypeOf(k.Src)
	p.SetType(dt)
	if dt != Int32 { // integers are finite
		elementwise(p, "on_check_finite", k.N, k.N, k.Src, k.Flag)
	}
}

// Host takes the largest magnitudes of A and B across the pool's threads.
func (k CheckProduct) Host(p *Pool) (Func, error) {
	return onFloats(p, k, checkProductHost[float32], checkProductHost[float64])
}

// Device takes the largest magnitudes by blocks (on_absmax), then one
// thread gives the verdict (on_product_verdict).
func (k CheckProduct) Device(p Planner) {
	limit := math.MaxFloat64 / 2
	if DTypeOf(k.A) == Float32 {
		limit = math.MaxFloat32 / 2
	}
	ws := p.Scratch(Float64, 2) // two 64-bit words, zero between runs
	elementwise(p, "on_absmax", k.RA*(k.CA+k.CB), k.RA*k.CA, k.RA*k.CB, k.A, k.B, ws)
	p.Launch("on_product_verdict", 1, k.RA, limit, ws, k.Flag)
}

func checkProductHost[T Float](p *Pool, k CheckProduct) Func {
	a := hostData[T](k.A)[:k.RA*k.CA]
	bb := hostData[T](k.B)[:k.RA*k.CB]
	flag := hostData[int32](k.Flag)
	limit := math.MaxFloat64 / 2
	if linalg.Is32[T]() {
		limit = math.MaxFloat32 / 2
	}
	// The largest magnitudes of A and B, in parts across the threads: each
	// part folds its maximum's bits into the shared one.
	var ma, mb atomic.Uint64
	sa := p.split(len(a), 1, func(lo, hi int) { foldMax(&ma, absMaxBits(a[lo:hi])) })
	sb := p.split(len(bb), 1, func(lo, hi int) { foldMax(&mb, absMaxBits(bb[lo:hi])) })
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

// Host copies the rows, after checking every index.
func (k GatherRows) Host(*Pool) (Func, error) {
	return rowsHost(k, k.N, k.Width, k.Rows, k.Src, k.Dst, true)
}

// Device launches on_rows, which records a bad index as a fault.
func (k GatherRows) Device(p Planner) { rowsDevice(p, k.N, k.Width, k.Rows, k.Src, k.Dst, true) }

// Host copies the rows, after checking every index.
func (k ScatterRows) Host(*Pool) (Func, error) {
	return rowsHost(k, k.N, k.Width, k.Rows, k.Src, k.Dst, false)
}

// Device launches on_rows, which records a bad index as a fault.
func (k ScatterRows) Device(p Planner) { rowsDevice(p, k.N, k.Width, k.Rows, k.Src, k.Dst, false) }

// rowsHost is the CPU implementation of k, a GatherRows or a ScatterRows.
func rowsHost(k Kernel, n, width int, rows, src, dst Operand, gather bool) (Func, error) {
	dt, err := FloatType(k)
	if err != nil {
		return nil, err
	}
	if dt == Float64 {
		return copyRows[float64](n, width, rows, src, dst, gather), nil
	}
	return copyRows[float32](n, width, rows, src, dst, gather), nil
}

func rowsDevice(p Planner, n, width int, rows, src, dst Operand, gather bool) {
	if n == 0 || width == 0 {
		return
	}
	m := dst
	if gather {
		m = src
	}
	limit := (m.Buf.Len() - m.Off) / width
	elementwise(p, indexed(p, "on_rows", n*width, limit*width), n*width, n, width, limit, gather, rows, src, dst, p.Fault())
}

func copyRows[T Float](n, width int, rows, src, dst Operand, gather bool) Func {
	if width == 0 {
		return func() error { return nil } // rows of no elements
	}
	idx := hostData[int32](rows)[:n]
	s, d := hostData[T](src), hostData[T](dst)
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

// Host factors by Householder QR (Cholesky QR in float64 where GramBound
// allows).
func (k QF) Host(p *Pool) (Func, error) { return onFloats(p, k, qfHost[float32], qfHost[float64]) }

// Device factors by Cholesky QR, twice (the second pass restores the
// orthogonality the first loses to rounding): G = A^T A, G = R^T R,
// A = A R^-1. R's positive diagonal gives the Q factor's signs. GramBound
// is not needed: a rank-deficient or ill-conditioned A fails the
// factorization, which the backend reports at its next sync. Up to
// smallQF columns one block factors G and a thread per row solves;
// beyond, cuSOLVER and cuBLAS do.
func (k QF) Device(p Planner) {
	dt := DTypeOf(k.A)
	a := p.Addr(k.A)
	g := p.Scratch(dt, k.N*k.N)
	gram := DeviceGemm{TransA: true, M: k.N, N: k.N, K: k.M, Alpha: 1, A: a, B: a, C: g, LDA: k.N, LDB: k.N, LDC: k.N}
	// A pivot R_kk^2 at most tol G_kk means a column all but in the span of
	// those before it, where Cholesky QR loses what it computes.
	tol := 64 * 0x1p-52
	if dt == Float32 {
		tol = 64 * 0x1p-23
	}
	if k.N <= smallQF {
		r := p.Scratch(Float64, k.N*k.N)
		for range 2 {
			p.Gemm(gram)
			p.Launch("on_cholesky", 1, k.N, tol, g, r, p.Fault())
			elementwise(p, "on_trsm", k.M, k.M, k.N, a, r, p.Fault())
		}
		return
	}
	info := p.Scratch(Int32, 1)
	diag := p.Scratch(Float64, k.N)
	for range 2 {
		p.Gemm(gram)
		elementwise(p, "on_diag_save", k.N, k.N, g, diag)
		p.Potrf(k.N, g, info)
		p.Launch("on_potrf_check", 1, k.N, tol, info, g, diag, p.Fault())
		p.Trsm(k.M, k.N, g, a)
	}
}

// smallQF is the most columns whose Q factor one block of a device
// computes.
const smallQF = 32

func qfHost[T Float](_ *Pool, k QF) Func {
	a := hostData[T](k.A)[:k.M*k.N]
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
