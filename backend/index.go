package backend

import "fmt"

// The kernels of indexing along an axis (Gorgonia's ByIndices, an
// embedding lookup, and its gradient), each with its CPU implementation
// beside its CUDA launches. An index outside the axis fails the run: the
// CPU implementations return an error before they write, the CUDA ones
// record it in the backend's fault words (reported at the next sync) and
// skip the entry.
var (
	_ defined = Take{}
	_ defined = TakeGrad{}
)

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
	if err := checkSized(k, []int{k.Outer, k.Axis, k.Inner}, 0); err != nil {
		return err
	}
	if k.N < 0 {
		return fmt.Errorf("backend: take: %d indices", k.N)
	}
	return checkAll(k, Int32, "indices", k.Indices, k.N, DTypeOf(k.Dst), "source", k.Src, k.Outer*k.Axis*k.Inner,
		"destination", k.Dst, k.Outer*k.N*k.Inner)
}

// Host checks every index, then copies the slices, split across the pool.
func (k Take) Host(p *Pool) (Func, error) {
	return onFloats(p, k, takeHost[float32], takeHost[float64])
}

// Device launches on_take, a thread per destination element.
func (k Take) Device(p Planner) {
	elementwise(p, "on_take", k.Outer*k.N*k.Inner, k.Outer, k.Axis, k.Inner, k.N, k.Indices, k.Src, k.Dst, p.Fault())
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
		if err := checkIndices("take", idx, k.Axis); err != nil {
			return err
		}
		s.run()
		return nil
	}
}

// checkIndices reports the first index outside [0, n).
func checkIndices(kernel string, idx []int32, n int) error {
	for i, r := range idx {
		if r < 0 || int(r) >= n {
			return fmt.Errorf("backend: %s: index %d (entry %d of the indices) outside 0 to %d", kernel, r, i, n-1)
		}
	}
	return nil
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
	if err := checkSized(k, []int{k.Outer, k.Axis, k.Inner}, 0); err != nil {
		return err
	}
	if k.N < 0 {
		return fmt.Errorf("backend: take-grad: %d indices", k.N)
	}
	return checkAll(k, Int32, "indices", k.Indices, k.N, DTypeOf(k.DX), "DY", k.DY, k.Outer*k.N*k.Inner,
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
	p.Launch("on_take_index", 1, k.Axis, k.N, k.Indices, offsets, cursor, order, p.Fault())
	p.SetType(dt)
	elementwise(p, "on_take_grad", k.Outer*k.Axis*k.Inner, k.Outer, k.Axis, k.Inner, k.N, offsets, order, k.DY, k.DX)
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
		if err := checkIndices("take-grad", idx, k.Axis); err != nil {
			return err
		}
		s.run()
		return nil
	}
}
