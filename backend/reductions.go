package backend

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/orthonet/orthonet/internal/linalg"
)

// The kernels that reduce: sums and maxima along an axis (Reduce), softmax
// and sparsemax along an axis and their gradients, the checks that set a
// flag (CheckFinite, CheckProduct) and a classifier's count of correct
// predictions (CountCorrect).
var _ = []defined{
	Reduce{}, Softmax{}, SoftmaxGrad{}, CheckFinite{}, CheckProduct{}, CountCorrect{}, Sparsemax{}, SparsemaxGrad{},
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

// Host reduces in float64 (sums, four lanes at a time, where Inner is 1).
func (k Reduce) Host(p *Pool) (Func, error) {
	return onFloats(p, k, reduceHost[float32], reduceHost[float64])
}

// Device takes a block per row where Inner is 1, else a thread per output;
// a few sums over many rows are split into chunks first.
func (k Reduce) Device(p Planner) {
	a := reduceArgs{Op: int(k.Op), Outer: k.Outer, Mid: k.Mid, Inner: k.Inner, Src: k.Src, Dst: k.Dst}
	if k.Inner == 1 {
		p.Launch("on_reduce_rows", k.Outer, a)
		return
	}
	if k.Op == Sum && k.Outer*k.Inner < splitCols && k.Mid >= 2*splitRows {
		// Few sums over many rows: each is split into chunks of rows, summed
		// by blocks of their own, then the chunks' sums added in order.
		cols, chunks := k.Outer*k.Inner, chunksOf(k.Mid)
		part := p.Scratch(Float64, chunks*cols)
		p.Launch("on_sum_partial", chunks*((cols+DeviceThreads-1)/DeviceThreads),
			partialArgs{Outer: k.Outer, Mid: k.Mid, Inner: k.Inner, Chunks: chunks, Src: k.Src, Part: part})
		elementwise(p, "on_sum_parts", cols, partsArgs{Cols: cols, Chunks: chunks, Part: part, Dst: k.Dst})
		return
	}
	elementwise(p, indexed(p, "on_reduce_mid", k.Outer*k.Mid*k.Inner), k.Outer*k.Inner, a)
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

// Host computes the softmax lane by lane, its sum in float64.
func (k Softmax) Host(p *Pool) (Func, error) {
	return onFloats(p, k, softmaxHost[float32], softmaxHost[float64])
}

// Device launches on_softmax (on_softmax_rows where Inner is 1).
func (k Softmax) Device(p Planner) {
	alongAxis(p, lanes(p, "on_softmax", k.Outer, k.Axis, k.Inner), k.Outer, k.Inner,
		softmaxArgs{Log: k.Log, Outer: k.Outer, Axis: k.Axis, Inner: k.Inner, Src: k.Src, Dst: k.Dst})
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

// Host computes the gradient lane by lane, its sum in float64.
func (k SoftmaxGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, softmaxGradHost[float32], softmaxGradHost[float64])
}

// Device launches on_softmax_grad (on_softmax_grad_rows where Inner is 1).
func (k SoftmaxGrad) Device(p Planner) {
	alongAxis(p, lanes(p, "on_softmax_grad", k.Outer, k.Axis, k.Inner), k.Outer, k.Inner,
		softmaxGradArgs{Log: k.Log, Outer: k.Outer, Axis: k.Axis, Inner: k.Inner, Y: k.Y, Dy: k.DY, Dx: k.DX})
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
		elementwise(p, "on_check_finite", k.N, finiteArgs(k))
	}
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
	elementwise(p, "on_absmax", k.RA*(k.CA+k.CB), absMaxArgs{Na: k.RA * k.CA, Nb: k.RA * k.CB, A: k.A, B: k.B, Ws: ws})
	p.Launch("on_product_verdict", 1, verdictArgs{Ra: k.RA, Limit: limit, Ws: ws, Flag: k.Flag})
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

// CountCorrect writes into Count (one Int32 element) how many of the Rows
// rows of Scores, a Rows x Classes matrix, have their largest entry where
// the one-hot rows of Targets (of the same shape) have theirs: a
// classifier's correct predictions over a batch, counted where its logits
// live. A row's largest entry is nn.Accuracy's: where a scan from the first
// entry that moves on only to a strictly larger one ends (so that ties go to
// the first, and a NaN holds the place it was first met at).
type CountCorrect struct {
	Rows, Classes          int
	Scores, Targets, Count Operand
}

// Check checks the operands.
func (k CountCorrect) Check() error {
	if k.Rows > math.MaxInt32 {
		return fmt.Errorf("backend: %s: %d rows, more than an int32 counts", Name(k), k.Rows)
	}
	n := k.Rows * k.Classes
	return checkSized(k, []int{k.Rows, k.Classes}, DTypeOf(k.Scores), "scores", k.Scores, n, "targets", k.Targets, n,
		Int32, "count", k.Count, 1)
}

// Host counts row by row.
func (k CountCorrect) Host(p *Pool) (Func, error) {
	return onFloats(p, k, countCorrectHost[float32], countCorrectHost[float64])
}

// Device counts with one block, a thread per row (on_count_correct).
func (k CountCorrect) Device(p Planner) {
	p.Launch("on_count_correct", 1, correctArgs{Rows: k.Rows, Classes: k.Classes, S: k.Scores, T: k.Targets, Count: k.Count})
}

func countCorrectHost[T Float](_ *Pool, k CountCorrect) Func {
	n := k.Rows * k.Classes
	s, t, count := hostData[T](k.Scores)[:n], hostData[T](k.Targets)[:n], hostData[int32](k.Count)[:1]
	return func() error {
		var c int32
		for r := range k.Rows {
			if argmax(s[r*k.Classes:(r+1)*k.Classes]) == argmax(t[r*k.Classes:(r+1)*k.Classes]) {
				c++
			}
		}
		count[0] = c
		return nil
	}
}

// argmax returns where a scan of row from its first entry that moves on
// only to a strictly larger entry ends.
func argmax[T Float](row []T) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}

// Sparsemax writes into Dst the sparsemax of each of the Rows rows of Src
// (Rows x Cols): the Euclidean projection of the row onto the probability
// simplex, max(z - tau, 0) for z the row less its maximum and tau the
// threshold that makes the row sum to 1 (Martins and Astudillo 2016).
// Sums are taken in float64.
type Sparsemax struct {
	Rows, Cols int
	Src, Dst   Operand
}

// Check checks the operands.
func (k Sparsemax) Check() error {
	n := k.Rows * k.Cols
	return checkSized(k, []int{k.Rows, k.Cols}, DTypeOf(k.Dst), "source", k.Src, n, "destination", k.Dst, n)
}

// Host sorts each row (a copy) to find its threshold.
func (k Sparsemax) Host(p *Pool) (Func, error) {
	return onFloats(p, k, sparsemaxHost[float32], sparsemaxHost[float64])
}

// Device takes a block per row (on_sparsemax): the support is found by
// counting, for each element, the elements at least as large and their
// sum, without a sort.
func (k Sparsemax) Device(p Planner) {
	p.Launch("on_sparsemax", k.Rows, sparsemaxArgs(k))
}

func sparsemaxHost[T Float](p *Pool, k Sparsemax) Func {
	cols, n := k.Cols, k.Rows*k.Cols
	src, dst := hostData[T](k.Src)[:n], hostData[T](k.Dst)[:n]
	var s *splitter
	var sorted [][]float64 // a row's worth of scratch per part of the loop
	s = p.split(k.Rows, 8*cols, func(lo, hi int) {
		zs := sorted[part(s, lo)]
		for r := lo; r < hi; r++ {
			x, y := src[r*cols:(r+1)*cols], dst[r*cols:(r+1)*cols]
			m := x[0]
			for _, v := range x[1:] {
				m = max(m, v)
			}
			for j, v := range x {
				zs[j] = float64(v - m) // shifted in the element type, as gorgonia does
			}
			slices.Sort(zs)
			// The support is the largest k with 1 + k z_(k) > sum_(j<=k) z_(j),
			// z sorted in decreasing order.
			var cum, support float64
			size := 0
			for j := range cols {
				z := zs[cols-1-j]
				cum += z
				if 1+float64(j+1)*z > cum {
					size, support = j+1, cum
				}
			}
			tau := (support - 1) / float64(size)
			for j, v := range x {
				y[j] = T(max(float64(v-m)-tau, 0))
			}
		}
	})
	sorted = make([][]float64, s.parts)
	for i := range sorted {
		sorted[i] = make([]float64, cols)
	}
	return s.loop()
}

// SparsemaxGrad writes into DX the gradient of Sparsemax from its output Y
// and the gradient DY of Y, row by row (Rows x Cols): with s the support
// (Y != 0), DX = s (DY - sum(s DY) / sum(s)).
type SparsemaxGrad struct {
	Rows, Cols int
	Y, DY, DX  Operand
}

// Check checks the operands.
func (k SparsemaxGrad) Check() error {
	n := k.Rows * k.Cols
	return checkSized(k, []int{k.Rows, k.Cols}, DTypeOf(k.DX), "Y", k.Y, n, "DY", k.DY, n, "DX", k.DX, n)
}

// Host computes the gradient row by row, its sums in float64.
func (k SparsemaxGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, sparsemaxGradHost[float32], sparsemaxGradHost[float64])
}

// Device takes a block per row (on_sparsemax_grad).
func (k SparsemaxGrad) Device(p Planner) {
	p.Launch("on_sparsemax_grad", k.Rows, sparsemaxGradArgs{Rows: k.Rows, Cols: k.Cols, Y: k.Y, Dy: k.DY, Dx: k.DX})
}

func sparsemaxGradHost[T Float](p *Pool, k SparsemaxGrad) Func {
	cols, n := k.Cols, k.Rows*k.Cols
	y, dy, dx := hostData[T](k.Y)[:n], hostData[T](k.DY)[:n], hostData[T](k.DX)[:n]
	return p.split(k.Rows, 3*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			yr, dyr, dxr := y[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
			var sum, count float64
			for j, v := range yr {
				if v != 0 {
					sum += float64(dyr[j])
					count++
				}
			}
			mean := 0.0
			if count > 0 {
				mean = sum / count
			}
			for j, v := range yr {
				dxr[j] = 0
				if v != 0 {
					dxr[j] = T(float64(dyr[j]) - mean)
				}
			}
		}
	}).loop()
}
