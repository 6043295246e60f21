package backend

import (
	"fmt"
	"slices"
)

// The kernels that copy: strided views into strided views (Copy:
// transposes, slices, concatenation, broadcasting), rows by index
// (GatherRows, ScatterRows: RSDM's submatrices) and slices along an axis by
// index (Take: Gorgonia's ByIndices, an embedding lookup; TakeGrad: its
// gradient). An index outside its range fails the run: the CPU
// implementations return an error before they write, the CUDA ones record
// it in the backend's fault words (reported at the next sync) and skip the
// entry.
var _ = []defined{Copy{}, GatherRows{}, ScatterRows{}, Take{}, TakeGrad{}}

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
	a := copyArgs{Nd: len(shape), N: n, Add: k.Add, Src: k.Src, Dst: k.Dst}
	copy(a.Shape[:], shape)
	copy(a.Ss[:], ss)
	copy(a.Ds[:], ds)
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
	elementwise(p, indexed(p, "on_copy", extents...), n, a)
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
	shape, strides, err := k.destinationAxes()
	if err != nil || oneToOne(shape, strides) {
		return err
	}
	if a, b, ok := overlap(shape, strides); ok {
		return fmt.Errorf("backend: copy: destination view overlaps itself: indices %v and %v (of shape %v, strides %v without axes of length 1) reach one element%s",
			a, b, shape, strides, k.race())
	}
	return nil
}

// destinationAxes returns the destination view's axes of more than one
// element and their strides made positive (none when the copy writes
// nothing), or an error for a stride 0 on such an axis.
func (k Copy) destinationAxes() (shape, strides []int, err error) {
	for i, n := range k.Shape {
		if n == 0 {
			return nil, nil, nil // nothing is written
		}
		if n == 1 {
			continue // a zero stride on one element repeats nothing
		}
		if k.DstStrides[i] == 0 {
			return nil, nil, fmt.Errorf("backend: copy: destination stride 0 on axis %d of %d elements: the destination view overlaps itself%s", i, n, k.race())
		}
		// A negative stride reflects its axis, which leaves which tuples
		// collide as they were.
		shape, strides = append(shape, n), append(strides, max(k.DstStrides[i], -k.DstStrides[i]))
	}
	return shape, strides, nil
}

// oneToOne reports whether a view of positive strides is one-to-one by
// its strides alone: sorted by stride, every stride passes the reach of
// the smaller ones (every contiguous, transposed, sliced or concatenated
// view).
func oneToOne(shape, strides []int) bool {
	axes := make([]int, len(shape))
	for i := range axes {
		axes[i] = i
	}
	slices.SortStableFunc(axes, func(a, b int) int { return strides[a] - strides[b] })
	reach := 0
	for _, a := range axes {
		if strides[a] <= reach {
			return false
		}
		reach += strides[a] * (shape[a] - 1)
	}
	return true
}

// overlap returns two index tuples of a view of positive strides that
// reach one element, for the first element reached twice in row-major
// order: the tuple that reached it first and the one that reached it
// again; false when none do. It visits every element, marking what it
// reaches: the marks cover the view's span, which fits in the buffer
// (checked before), at one bit an element.
func overlap(shape, strides []int) (first, again []int, ok bool) {
	span := 0
	for i, n := range shape {
		span += strides[i] * (n - 1)
	}
	seen := make([]uint64, span/64+1)
	idx := make([]int, len(shape))
	firstAt := func(at int) []int { // the first tuple that reaches at
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
			return firstAt(o), idx, true
		}
		seen[o/64] |= 1 << (o % 64)
		if !next(idx, shape) {
			return nil, nil, false
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

// hostCopyLayout returns the axes copyHost loops over, the copy's without
// axes of length 1 and with axes contiguous in both views merged (so that
// the innermost loop is as long as possible; one axis of one for one
// element), and how far below its operand's offset each view reaches
// (negative strides); false when there is nothing to copy.
func hostCopyLayout(k Copy) (shape, ss, ds []int, s0, d0 int, ok bool) {
	shape, ss, ds = k.Simplified()
	for _, n := range shape {
		if n < 1 {
			return nil, nil, nil, 0, 0, false
		}
	}
	if len(shape) == 0 { // one element: an axis of one
		shape, ss, ds = []int{1}, []int{1}, []int{1}
	}
	// Negative strides reach below the operand's offset: index from the
	// lowest element each view reaches (Check keeps it in the buffer).
	for i, n := range shape {
		s0 -= min(ss[i], 0) * (n - 1)
		d0 -= min(ds[i], 0) * (n - 1)
	}
	return shape, ss, ds, s0, d0, true
}

func copyHost[T Float](p *Pool, k Copy) Func {
	shape, ss, ds, s0, d0, ok := hostCopyLayout(k)
	if !ok {
		return func() error { return nil } // nothing to copy
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

// Host copies the rows, after checking every index.
func (k GatherRows) Host(p *Pool) (Func, error) {
	return onFloats(p, k, gatherRowsHost[float32], gatherRowsHost[float64])
}

func gatherRowsHost[T Float](_ *Pool, k GatherRows) Func {
	return copyRows[T](k.N, k.Width, k.Rows, k.Src, k.Dst, true)
}

// Device launches on_rows, which records a bad index as a fault.
func (k GatherRows) Device(p Planner) { rowsDevice(p, k.N, k.Width, k.Rows, k.Src, k.Dst, true) }

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

// Host copies the rows, after checking every index.
func (k ScatterRows) Host(p *Pool) (Func, error) {
	return onFloats(p, k, scatterRowsHost[float32], scatterRowsHost[float64])
}

func scatterRowsHost[T Float](_ *Pool, k ScatterRows) Func {
	return copyRows[T](k.N, k.Width, k.Rows, k.Src, k.Dst, false)
}

// Device launches on_rows, which records a bad index as a fault.
func (k ScatterRows) Device(p Planner) { rowsDevice(p, k.N, k.Width, k.Rows, k.Src, k.Dst, false) }

func rowsDevice(p Planner, n, width int, rows, src, dst Operand, gather bool) {
	if n == 0 || width == 0 {
		return
	}
	m := dst
	if gather {
		m = src
	}
	limit := (m.Buf.Len() - m.Off) / width
	elementwise(p, indexed(p, "on_rows", n*width, limit*width), n*width,
		rowsArgs{N: n, Width: width, Limit: limit, Gather: gather, Rows: rows, Src: src, Dst: dst, Fault: p.Fault()})
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
		if err := checkIndices("cpu: row index", idx, limit); err != nil {
			return err
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

// Take copies, for a Src that is a row-major (Outer, Axis, Inner) array,
// the slices Src[:, Indices[i], :] into Dst[:, i, :], an (Outer, N, Inner)
// array: numpy's take along an axis. Indices is an Int32 operand of N
// entries, each in [0, Axis).
type Take struct {
	Outer, Axis, Inner, N int
	Indices, Src, Dst     Operand
}

// Check checks the operands; the indices are checked when the kernel runs.
func (k Take) Check() error {
	return checkTake(k, k.Outer, k.Axis, k.Inner, k.N, k.Indices, DTypeOf(k.Dst), "source", k.Src, k.Outer*k.Axis*k.Inner,
		"destination", k.Dst, k.Outer*k.N*k.Inner)
}

// Host checks every index, then copies the slices, split across the pool.
func (k Take) Host(p *Pool) (Func, error) {
	return onFloats(p, k, takeHost[float32], takeHost[float64])
}

// Device launches on_take, a thread per destination element.
func (k Take) Device(p Planner) {
	elementwise(p, "on_take", k.Outer*k.N*k.Inner,
		takeArgs{Outer: k.Outer, Axis: k.Axis, Inner: k.Inner, N: k.N, Idx: k.Indices, Src: k.Src, Dst: k.Dst, Fault: p.Fault()})
}

func takeHost[T Float](p *Pool, k Take) Func {
	idx := hostData[int32](k.Indices)[:k.N]
	src, dst := hostData[T](k.Src)[:k.Outer*k.Axis*k.Inner], hostData[T](k.Dst)[:k.Outer*k.N*k.Inner]
	in := k.Inner
	s := p.split(k.Outer*k.N, in, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			o, i := row/k.N, row%k.N
			from := (o*k.Axis + int(idx[i])) * in
			copy(dst[row*in:(row+1)*in], src[from:from+in])
		}
	})
	return func() error {
		if err := checkIndices("backend: take: index", idx, k.Axis); err != nil {
			return err
		}
		s.run()
		return nil
	}
}

// checkIndices reports the first index outside [0, n), after what (the
// kernel and the kind of index).
func checkIndices(what string, idx []int32, n int) error {
	for i, r := range idx {
		if r < 0 || int(r) >= n {
			return fmt.Errorf("%s %d (entry %d of the indices) outside 0 to %d", what, r, i, n-1)
		}
	}
	return nil
}

// checkTake checks the sizes of k, Take or TakeGrad (outer, axis and inner
// positive, n not negative), its n indices and its other operands, ops, as
// checkAll does.
func checkTake(k Kernel, outer, axis, inner, n int, indices Operand, ops ...any) error {
	if err := checkSized(k, []int{outer, axis, inner}, 0); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("backend: %s: %d indices", Name(k), n)
	}
	return checkAll(k, Int32, append([]any{"indices", indices, n}, ops...)...)
}

// TakeGrad is the gradient of Take: DX, an (Outer, Axis, Inner) array, is
// zero but for DX[:, r, :] = the sum of DY[:, i, :] over the entries i
// with Indices[i] = r, DY being an (Outer, N, Inner) array (a scatter-add).
// Each sum is taken in the element type in the order of the entries, on
// every backend, so the result is the same bit for bit on every backend
// and run, whatever the threads (no atomic float additions).
type TakeGrad struct {
	Outer, Axis, Inner, N int
	Indices, DY, DX       Operand
}

// Check checks the operands; the indices are checked when the kernel runs.
func (k TakeGrad) Check() error {
	return checkTake(k, k.Outer, k.Axis, k.Inner, k.N, k.Indices, DTypeOf(k.DX), "DY", k.DY, k.Outer*k.N*k.Inner,
		"DX", k.DX, k.Outer*k.Axis*k.Inner)
}

// Host checks every index, zeroes DX and adds the entries in order, each
// thread of the pool over its own range of (outer, inner) lanes.
func (k TakeGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, takeGradHost[float32], takeGradHost[float64])
}

// Device sorts the entries by index, stably, in one block (on_take_index:
// counts by integer atomics, a prefix sum, then each entry's place among
// those before it with the same index), then a thread per element of DX
// adds its entries in order (on_take_grad).
func (k TakeGrad) Device(p Planner) {
	dt := DTypeOf(k.DX)
	offsets, cursor, order := p.Scratch(Int32, k.Axis+1), p.Scratch(Int32, k.Axis), p.Scratch(Int32, max(k.N, 1))
	p.SetType(Int32)
	p.Launch("on_take_index", 1, takeIndexArgs{Axis: k.Axis, N: k.N, Idx: k.Indices, Offsets: offsets, Cursor: cursor, Order: order, Fault: p.Fault()})
	p.SetType(dt)
	elementwise(p, "on_take_grad", k.Outer*k.Axis*k.Inner,
		takeGradArgs{Outer: k.Outer, Axis: k.Axis, Inner: k.Inner, N: k.N, Offsets: offsets, Order: order, Dy: k.DY, Dx: k.DX})
}

func takeGradHost[T Float](p *Pool, k TakeGrad) Func {
	idx := hostData[int32](k.Indices)[:k.N]
	dy, dx := hostData[T](k.DY)[:k.Outer*k.N*k.Inner], hostData[T](k.DX)[:k.Outer*k.Axis*k.Inner]
	in := k.Inner
	// Lanes (o, j) of the outer and inner axes, in parts: a part adds
	// every entry into its own lanes, in the order of the entries.
	s := p.split(k.Outer*in, k.N+k.Axis, func(lo, hi int) {
		for o := lo / in; o*in < hi; o++ {
			l, h := max(lo, o*in)-o*in, min(hi, (o+1)*in)-o*in
			out := dx[o*k.Axis*in : (o+1)*k.Axis*in]
			for r := range k.Axis {
				clear(out[r*in+l : r*in+h])
			}
			for i, r := range idx {
				d := out[int(r)*in+l : int(r)*in+h]
				for j, v := range dy[(o*k.N+i)*in+l : (o*k.N+i)*in+h] {
					d[j] += v
				}
			}
		}
	})
	return func() error {
		if err := checkIndices("backend: take-grad: index", idx, k.Axis); err != nil {
			return err
		}
		s.run()
		return nil
	}
}
