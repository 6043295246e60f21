package backendtest

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
)

// opCases are the cases of the kernels of Gorgonia's other ops (take and
// its gradient, comparisons with boolean results, sparsemax, YOLO's
// decoding), for float type dt.
func opCases(dt backend.DType, g gen) []Case {
	var cs []Case
	add := func(name string, kernel backend.Kernel, out []int, bufs ...any) {
		cs = append(cs, Case{Name: name, Bufs: bufs, Float: dt, Kernel: kernel, Out: out})
	}
	// Indices with repeats, more entries than a block's threads (so that
	// the stable sort of the gradient goes over several chunks), and an
	// axis longer than a block (several chunks of its prefix sum).
	for _, s := range []struct{ outer, axis, inner, n int }{{1, 13, 7, 5}, {2, 5, 3, 700}, {3, 300, 1, 40}, {1, 1, 1, 1}, {2, 4, 2, 0}} {
		idx := make([]int32, s.n)
		for i := range idx {
			idx[i] = int32(g.r.IntN(s.axis))
		}
		src, out := g.normal(s.outer*s.axis*s.inner, 1), g.normal(s.outer*s.n*s.inner, 1)
		add(fmt.Sprintf("take/%v", s), backend.Take{Outer: s.outer, Axis: s.axis, Inner: s.inner, N: s.n, Indices: at(slot(0)), Src: at(slot(1)), Dst: at(slot(2))},
			[]int{2}, idx, src, out)
		add(fmt.Sprintf("take-grad/%v", s), backend.TakeGrad{Outer: s.outer, Axis: s.axis, Inner: s.inner, N: s.n, Indices: at(slot(0)), DY: at(slot(1)), DX: at(slot(2))},
			[]int{2}, idx, g.normal(s.outer*s.n*s.inner, 1), g.normal(s.outer*s.axis*s.inner, 1))
	}
	for op := backend.Lt; op <= backend.Ne; op++ {
		for _, sc := range [][2]bool{{false, false}, {true, false}, {false, true}} {
			add(fmt.Sprintf("compare/%v/scalars%v%v", op, sc[0], sc[1]),
				backend.Compare{Op: op, N: 333, A: at(slot(0)), B: at(slot(1)), Dst: at(slot(2)), AScalar: sc[0], BScalar: sc[1]},
				[]int{2}, g.halves(333), g.halves(333), make([]int32, 333))
		}
	}
	for _, s := range [][2]int{{5, 10}, {3, 700}, {1, 1}, {4, 3}} {
		n := s[0] * s[1]
		add(fmt.Sprintf("sparsemax/%v", s), backend.Sparsemax{Rows: s[0], Cols: s[1], Src: at(slot(0)), Dst: at(slot(1))},
			[]int{1}, g.normal(n, 2), g.normal(n, 1))
		y := g.uniform(n, 0, 1)
		for i := range y {
			if i%3 != 0 {
				y[i] = 0 // outside the support
			}
		}
		add(fmt.Sprintf("sparsemax-grad/%v", s), backend.SparsemaxGrad{Rows: s[0], Cols: s[1], Y: at(slot(0)), DY: at(slot(1)), DX: at(slot(2))},
			[]int{2}, y, g.normal(n, 1), g.normal(n, 1))
	}
	for _, s := range [][4]int{{2, 3, 7, 5}, {1, 1, 5, 1}} {
		batch, boxes, attrs, grid := s[0], s[1], s[2], s[3]
		n := batch * boxes * attrs * grid * grid
		add(fmt.Sprintf("yolo-decode/%v", s), backend.YOLODecode{Batch: batch, Boxes: boxes, Attrs: attrs, Grid: grid, Stride: 32,
			Anchors: at(slot(0)), Src: at(slot(1)), Dst: at(slot(2))}, []int{2}, g.uniform(2*boxes, 0.2, 4), g.normal(n, 1), g.normal(n, 1))
	}
	// A bad index fails the run on every backend.
	idx := []int32{2, 0, 5, 1}
	add("take/out-of-range", backend.Take{Outer: 2, Axis: 5, Inner: 3, N: 4, Indices: at(slot(0)), Src: at(slot(1)), Dst: at(slot(2))},
		nil, idx, g.normal(30, 1), g.normal(24, 1))
	cs[len(cs)-1].Fails = true
	add("take-grad/out-of-range", backend.TakeGrad{Outer: 2, Axis: 5, Inner: 3, N: 4, Indices: at(slot(0)), DY: at(slot(1)), DX: at(slot(2))},
		nil, []int32{-1, 0, 1, 1}, g.normal(24, 1), g.normal(30, 1))
	cs[len(cs)-1].Fails = true
	return cs
}
