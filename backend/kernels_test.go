package backend_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
)

func TestDType(t *testing.T) {
	for _, c := range []struct {
		dt   backend.DType
		name string
		size int
	}{{backend.Float32, "float32", 4}, {backend.Float64, "float64", 8}, {backend.Int32, "int32", 4}} {
		if c.dt.String() != c.name || c.dt.Size() != c.size {
			t.Errorf("%v: name %q, size %d; want %q, %d", c.dt, c.dt.String(), c.dt.Size(), c.name, c.size)
		}
	}
	if s := backend.DType(0).String(); s != "DType(0)" {
		t.Errorf("DType(0) is %q", s)
	}
}

func TestOpNames(t *testing.T) {
	// The named functions are numbered from 1 without gaps, each with its
	// own name; Check refuses exactly the unnamed ones.
	one := backend.At(backendtest.Extent(backend.Float32, 1), 0)
	seen := map[string]bool{}
	last := true // whether op-1 is named
	for op := backend.UnaryOp(0); op < 255; op++ {
		s, err := op.String(), (backend.Map{Op: op, N: 1, Src: one, Dst: one}).Check()
		named := s != fmt.Sprintf("UnaryOp(%d)", op)
		if named == (err != nil) || seen[s] || named && (op == 0 || !last) {
			t.Errorf("UnaryOp %d: named %q, Check: %v", op, s, err)
		}
		seen[s], last = true, named || op == 0
	}
	clear(seen)
	last = true
	for op := backend.BinaryOp(0); op < 255; op++ {
		s, err := op.String(), (backend.Zip{Op: op, N: 1, A: one, B: one, Dst: one}).Check()
		named := s != fmt.Sprintf("BinaryOp(%d)", op)
		if named == (err != nil) || seen[s] || named && (op == 0 || !last) {
			t.Errorf("BinaryOp %d: named %q, Check: %v", op, s, err)
		}
		seen[s], last = true, named || op == 0
	}
	if backend.Identity.String() != "identity" || backend.Min2.String() != "min" {
		t.Errorf("Identity and Min2 are named %q and %q", backend.Identity, backend.Min2)
	}
}

func TestCheckOperand(t *testing.T) {
	b := backendtest.Extent(backend.Float32, 10)
	for _, c := range []struct {
		op   backend.Operand
		dt   backend.DType
		n    int
		want string // "" for no error
	}{
		{backend.At(b, 0), backend.Float32, 10, ""},
		{backend.At(b, 4), 0, 6, ""},
		{backend.At(b, 10), backend.Float32, 0, ""},
		{backend.At(b, 5), backend.Float32, 6, "x: elements 5 to 11 of a buffer of 10"},
		{backend.At(b, -1), backend.Float32, 1, "elements -1 to 0"},
		{backend.At(b, 0), backend.Float32, -1, "elements 0 to -1"},
		{backend.At(b, 11), backend.Float32, 0, "elements 11 to 11"},
		{backend.At(b, 0), backend.Float64, 1, "x: buffer of float32, want float64"},
		{backend.Operand{}, 0, 0, "x: no buffer"},
	} {
		err := backend.CheckOperand("x", c.op, c.dt, c.n)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckOperand(%v, %v, %d): %v, want %q", c.op, c.dt, c.n, err, c.want)
		}
	}
}

// reach returns the lowest and highest element a strided view of shape
// reaches, by visiting every element.
func reach(shape, strides []int) (lo, hi int) {
	n := 1
	for _, s := range shape {
		n *= s
	}
	lo, hi = 1<<62, -1<<62
	for e := 0; e < n; e++ {
		r, at := e, 0
		for ax := len(shape) - 1; ax >= 0; ax-- {
			at += r % shape[ax] * strides[ax]
			r /= shape[ax]
		}
		lo, hi = min(lo, at), max(hi, at)
	}
	return lo, hi
}

// exact checks that k built with each operand at exactly the extent the
// kernel reaches passes Check, and that each operand one element short,
// either end, fails naming it. build returns the kernel given its
// operands; extents gives each operand's lowest and highest element
// relative to its offset, and its name in errors.
func exact(t *testing.T, name string, dts []backend.DType, extents [][2]int, names []string, build func(ops []backend.Operand) backend.Kernel) {
	t.Helper()
	ops := make([]backend.Operand, len(extents))
	for i, e := range extents {
		ops[i] = backend.At(backendtest.Extent(dts[i], e[1]-e[0]+1), -e[0])
		if e[1] < e[0] { // reaches nothing
			ops[i] = backend.At(backendtest.Extent(dts[i], 0), 0)
		}
	}
	if err := build(ops).Check(); err != nil {
		t.Fatalf("%s with exact operands: %v", name, err)
	}
	for i := range ops {
		if extents[i][1] < extents[i][0] {
			continue
		}
		short := append([]backend.Operand(nil), ops...)
		short[i].Buf = backendtest.Extent(dts[i], ops[i].Buf.Len()-1) // the top element missing
		if err := build(short).Check(); err == nil || !strings.Contains(err.Error(), names[i]) {
			t.Errorf("%s with %s short at the end: %v", name, names[i], err)
		}
		short[i] = backend.At(ops[i].Buf, ops[i].Off-1) // the bottom element missing
		if err := build(short).Check(); err == nil || !strings.Contains(err.Error(), names[i]) {
			t.Errorf("%s with %s short at the start: %v", name, names[i], err)
		}
		other := append([]backend.Operand(nil), ops...)
		wrong := backend.Float64
		if dts[i] == backend.Float64 {
			wrong = backend.Int32
		}
		other[i].Buf = backendtest.Extent(wrong, ops[i].Buf.Len())
		if err := build(other).Check(); err == nil || !strings.Contains(err.Error(), "buffer of") {
			t.Errorf("%s with %s of %v: %v", name, names[i], wrong, err)
		}
	}
}

func TestGemmCheck(t *testing.T) {
	f := backend.Float32
	for tr := 0; tr < 4; tr++ {
		for _, batch := range []int{0, 1, 3} {
			tA, tB := tr&1 != 0, tr&2 != 0
			m, n, k := 3, 5, 7
			ra, ca, rb, cb := m, k, k, n
			if tA {
				ra, ca = k, m
			}
			if tB {
				rb, cb = n, k
			}
			lda, ldb, ldc := ca+1, cb+2, n
			sa, sb, sc := ra*lda+3, rb*ldb, m*ldc+1
			ext := func(rows, cols, ld, stride int) [2]int {
				return [2]int{0, (max(batch, 1)-1)*stride + (rows-1)*ld + cols - 1}
			}
			exact(t, fmt.Sprintf("gemm %v %v batch %d", tA, tB, batch), []backend.DType{f, f, f},
				[][2]int{ext(ra, ca, lda, sa), ext(rb, cb, ldb, sb), ext(m, n, ldc, sc)},
				[]string{"gemm A", "gemm B", "gemm C"},
				func(ops []backend.Operand) backend.Kernel {
					return backend.Gemm{TransA: tA, TransB: tB, M: m, N: n, K: k, A: ops[0], B: ops[1], C: ops[2],
						LDA: lda, LDB: ldb, LDC: ldc, Batch: batch, StrideA: sa, StrideB: sb, StrideC: sc}
				})
			// A leading dimension below the columns is refused.
			big := backend.At(backendtest.Extent(f, 1000), 0)
			g := backend.Gemm{TransA: tA, TransB: tB, M: m, N: n, K: k, A: big, B: big, C: big, LDA: ca - 1, LDB: ldb, LDC: ldc}
			if err := g.Check(); err == nil || !strings.Contains(err.Error(), "leading dimension of A") {
				t.Errorf("LDA %d of %d columns: %v", ca-1, ca, err)
			}
		}
	}
	if b := (backend.Gemm{}).Batches(); b != 1 {
		t.Errorf("Batch 0 gives %d batches", b)
	}
}

func TestCopyCheck(t *testing.T) {
	f := backend.Float64
	for _, c := range []struct {
		shape    []int
		ss, ds   []int
		dstShort bool
	}{
		{[]int{2, 3, 4}, []int{12, 4, 1}, []int{1, 2, 6}, false},
		{[]int{5, 7}, []int{0, 1}, []int{7, 1}, false},
		{[]int{5, 7}, []int{-7, 1}, []int{1, -5}, false},
		{[]int{4, 1, 3}, []int{-1, 0, -4}, []int{3, 0, 1}, false},
		{[]int{}, []int{}, []int{}, false},
	} {
		slo, shi := reach(c.shape, c.ss)
		dlo, dhi := reach(c.shape, c.ds)
		exact(t, fmt.Sprintf("copy %v %v %v", c.shape, c.ss, c.ds), []backend.DType{f, f},
			[][2]int{{slo, shi}, {dlo, dhi}}, []string{"copy source", "copy destination"},
			func(ops []backend.Operand) backend.Kernel {
				return backend.Copy{Shape: c.shape, Src: ops[0], Dst: ops[1], SrcStrides: c.ss, DstStrides: c.ds}
			})
	}
	ok := backend.At(backendtest.Extent(f, 100), 50)
	for _, c := range []struct {
		k    backend.Copy
		want string
	}{
		{backend.Copy{Shape: []int{3, 2}, Src: ok, Dst: ok, SrcStrides: []int{2, 1}, DstStrides: []int{0, 1}}, "destination stride 0 on axis 0"},
		{backend.Copy{Shape: []int{3, 2}, Src: ok, Dst: ok, SrcStrides: []int{2, 1}, DstStrides: []int{2}}, "strides"},
		{backend.Copy{Shape: []int{3, -1}, Src: ok, Dst: ok, SrcStrides: []int{2, 1}, DstStrides: []int{2, 1}}, "negative axis"},
		{backend.Copy{Shape: []int{3, 0}, Src: ok, Dst: backend.Operand{}, SrcStrides: []int{2, 1}, DstStrides: []int{2, 1}}, "copy destination: no buffer"},
		{backend.Copy{Shape: []int{0}, Src: ok, Dst: backend.At(backendtest.Extent(f, 3), 4), SrcStrides: []int{1}, DstStrides: []int{1}}, "copy destination"},
		{backend.Copy{Shape: []int{0}, Src: ok, Dst: backend.At(backendtest.Extent(backend.Float32, 3), 0), SrcStrides: []int{1}, DstStrides: []int{1}}, "buffer of float64, want float32"},
		{backend.Copy{Shape: make([]int, backend.MaxDims+1), Src: ok, Dst: ok, SrcStrides: make([]int, backend.MaxDims+1), DstStrides: make([]int, backend.MaxDims+1)}, "at most"},
	} {
		if err := c.k.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.k, err, c.want)
		}
	}
	// A zero destination stride on an axis of one element repeats nothing.
	if err := (backend.Copy{Shape: []int{1, 2}, Src: ok, Dst: ok, SrcStrides: []int{0, 1}, DstStrides: []int{0, 1}}).Check(); err != nil {
		t.Error(err)
	}
}

// TestChecks checks every other kernel with exact operands, then one short.
func TestChecks(t *testing.T) {
	f, i := backend.Float32, backend.Int32
	type kase struct {
		name    string
		dts     []backend.DType
		extents [][2]int
		names   []string
		build   func(ops []backend.Operand) backend.Kernel
	}
	for _, c := range []kase{
		{"map", []backend.DType{f, f}, [][2]int{{0, 6}, {0, 6}}, []string{"map source", "map destination"},
			func(o []backend.Operand) backend.Kernel {
				return backend.Map{Op: backend.Exp, N: 7, Src: o[0], Dst: o[1]}
			}},
		{"zip", []backend.DType{f, f, f}, [][2]int{{0, 6}, {0, 6}, {0, 6}}, []string{"zip A", "zip B", "zip destination"},
			func(o []backend.Operand) backend.Kernel {
				return backend.Zip{Op: backend.Pow, N: 7, A: o[0], B: o[1], Dst: o[2]}
			}},
		{"zip scalars", []backend.DType{f, f, f}, [][2]int{{0, 0}, {0, 0}, {0, 6}}, []string{"zip A", "zip B", "zip destination"},
			func(o []backend.Operand) backend.Kernel {
				return backend.Zip{Op: backend.Ne, N: 7, A: o[0], B: o[1], Dst: o[2], AScalar: true, BScalar: true}
			}},
		{"reduce", []backend.DType{f, f}, [][2]int{{0, 3*5*7 - 1}, {0, 3*7 - 1}}, []string{"reduce source", "reduce destination"},
			func(o []backend.Operand) backend.Kernel {
				return backend.Reduce{Op: backend.Sum, Outer: 3, Mid: 5, Inner: 7, Src: o[0], Dst: o[1]}
			}},
		{"softmax", []backend.DType{f, f}, [][2]int{{0, 104}, {0, 104}}, []string{"softmax source", "softmax destination"},
			func(o []backend.Operand) backend.Kernel {
				return backend.Softmax{Outer: 3, Axis: 5, Inner: 7, Src: o[0], Dst: o[1]}
			}},
		{"softmax-grad", []backend.DType{f, f, f}, [][2]int{{0, 104}, {0, 104}, {0, 104}}, []string{"softmax-grad Y", "softmax-grad DY", "softmax-grad DX"},
			func(o []backend.Operand) backend.Kernel {
				return backend.SoftmaxGrad{Log: true, Outer: 3, Axis: 5, Inner: 7, Y: o[0], DY: o[1], DX: o[2]}
			}},
		{"check-product", []backend.DType{f, f, i}, [][2]int{{0, 3*5 - 1}, {0, 3*7 - 1}, {0, 0}}, []string{"check-product A", "check-product B", "check-product flag"},
			func(o []backend.Operand) backend.Kernel {
				return backend.CheckProduct{RA: 3, CA: 5, CB: 7, A: o[0], B: o[1], Flag: o[2]}
			}},
		{"gather-rows", []backend.DType{i, f, f}, [][2]int{{0, 3}, {0, 4}, {0, 19}}, []string{"gather-rows indices", "gather-rows source", "gather-rows destination"},
			func(o []backend.Operand) backend.Kernel {
				return backend.GatherRows{N: 4, Width: 5, Rows: o[0], Src: o[1], Dst: o[2]}
			}},
		{"scatter-rows", []backend.DType{i, f, f}, [][2]int{{0, 3}, {0, 19}, {0, 4}}, []string{"scatter-rows indices", "scatter-rows source", "scatter-rows destination"},
			func(o []backend.Operand) backend.Kernel {
				return backend.ScatterRows{N: 4, Width: 5, Rows: o[0], Src: o[1], Dst: o[2]}
			}},
	} {
		exact(t, c.name, c.dts, c.extents, c.names, c.build)
	}
	// Fill, CheckFinite's source and QF take any type.
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Int32} {
		b := backend.At(backendtest.Extent(dt, 12), 0)
		flag := backend.At(backendtest.Extent(i, 1), 0)
		for _, k := range []backend.Kernel{backend.Fill{N: 12, Dst: b}, backend.CheckFinite{N: 12, Src: b, Flag: flag}, backend.QF{M: 4, N: 3, A: b}} {
			if err := k.Check(); err != nil {
				t.Errorf("%s of %v: %v", backend.Name(k), dt, err)
			}
		}
		for _, k := range []backend.Kernel{backend.Fill{N: 13, Dst: b}, backend.CheckFinite{N: 13, Src: b, Flag: flag}, backend.QF{M: 13, N: 1, A: b}} {
			if err := k.Check(); err == nil {
				t.Errorf("%s of 13 elements of %v: no error", backend.Name(k), dt)
			}
		}
	}
	f12, flag := backend.At(backendtest.Extent(f, 12), 0), backend.At(backendtest.Extent(i, 1), 0)
	for _, k := range []backend.Kernel{
		backend.CheckFinite{N: 3, Src: f12, Flag: f12},
		backend.GatherRows{N: 2, Width: 3, Rows: f12, Src: f12, Dst: f12},
		backend.ScatterRows{N: 2, Width: 3, Rows: f12, Src: f12, Dst: f12},
		backend.CheckProduct{RA: 2, CA: 3, CB: 3, A: f12, B: f12, Flag: f12},
		backend.CheckProduct{RA: -1, CA: -2, CB: -3, A: f12, B: f12, Flag: flag},
		backend.Map{Op: 0, N: 3, Src: f12, Dst: f12},
		backend.Map{Op: 255, N: 3, Src: f12, Dst: f12},
		backend.Zip{Op: 255, N: 3, A: f12, B: f12, Dst: f12},
		backend.Reduce{Op: 255, Outer: 1, Mid: 1, Inner: 1, Src: f12, Dst: f12},
		backend.Reduce{Op: backend.Sum, Outer: 1, Mid: 0, Inner: 1, Src: f12, Dst: f12},
		backend.Softmax{Outer: 1, Axis: 1, Inner: 0, Src: f12, Dst: f12},
		backend.SoftmaxGrad{Outer: 0, Axis: 1, Inner: 1, Y: f12, DY: f12, DX: f12},
		backend.Gemm{M: 1, N: 1, K: -1, A: f12, B: f12, C: f12, LDA: 1, LDB: 1, LDC: 1},
		backend.QF{M: 2, N: 3, A: f12},
		backend.QF{M: 2, N: 0, A: f12},
	} {
		if err := k.Check(); err == nil {
			t.Errorf("%+v: no error", k)
		}
	}
}

// TestKernelNames checks the names Name derives from the kernels' types,
// acronyms among them.
func TestKernelNames(t *testing.T) {
	for k, want := range map[backend.Kernel]string{backend.Gemm{}: "gemm", backend.QF{}: "qf", backend.SGDStep{}: "sgd-step",
		backend.SoftmaxCrossEntropyGrad{}: "softmax-cross-entropy-grad", backend.CheckFinite{}: "check-finite"} {
		if got := backend.Name(k); got != want {
			t.Errorf("Name(%T) = %q, want %q", k, got, want)
		}
	}
}

// TestMapOperands checks that MapOperands rewrites every Operand field of
// a copy and leaves the other fields and the kernel itself alone.
func TestMapOperands(t *testing.T) {
	k := backend.Gemm{M: 2, A: backend.At(backendtest.Extent(backend.Float32, 9), 1), C: backend.At(backendtest.Extent(backend.Float32, 9), 3)}
	got := backend.MapOperands(k, func(op backend.Operand) backend.Operand { op.Off += 10; return op }).(backend.Gemm)
	if got.M != 2 || got.A.Off != 11 || got.B.Off != 10 || got.C.Off != 13 || k.A.Off != 1 {
		t.Errorf("MapOperands gave %+v from %+v", got, k)
	}
}

// TestOperands checks that Operands lists each Operand field of a kernel,
// in their order.
func TestOperands(t *testing.T) {
	bufs := make([]backend.Operand, 3)
	for i := range bufs {
		bufs[i] = backend.At(backendtest.Extent(backend.Float32, 1), i+1)
	}
	for _, c := range []struct {
		k    backend.Kernel
		want []backend.Operand
	}{
		{backend.Gemm{A: bufs[0], B: bufs[1], C: bufs[2]}, bufs},
		{backend.Map{Src: bufs[0], Dst: bufs[1]}, bufs[:2]},
		{backend.Zip{A: bufs[0], B: bufs[1], Dst: bufs[2]}, bufs},
		{backend.Reduce{Src: bufs[0], Dst: bufs[1]}, bufs[:2]},
		{backend.Softmax{Src: bufs[0], Dst: bufs[1]}, bufs[:2]},
		{backend.SoftmaxGrad{Y: bufs[0], DY: bufs[1], DX: bufs[2]}, bufs},
		{backend.Copy{Src: bufs[0], Dst: bufs[1]}, bufs[:2]},
		{backend.Fill{Dst: bufs[0]}, bufs[:1]},
		{backend.CheckFinite{Src: bufs[0], Flag: bufs[1]}, bufs[:2]},
		{backend.CheckProduct{A: bufs[0], B: bufs[1], Flag: bufs[2]}, bufs},
		{backend.GatherRows{Rows: bufs[0], Src: bufs[1], Dst: bufs[2]}, bufs},
		{backend.ScatterRows{Rows: bufs[0], Src: bufs[1], Dst: bufs[2]}, bufs},
		{backend.DropoutMask{Dst: bufs[0], Step: bufs[1]}, bufs[:2]},
		{backend.QF{A: bufs[0]}, bufs[:1]},
	} {
		if got := fmt.Sprint(backend.Operands(c.k)); got != fmt.Sprint(c.want) {
			t.Errorf("%s: operands %s, want %s", backend.Name(c.k), got, fmt.Sprint(c.want))
		}
	}
}

// TestCopyOverlap checks that Check refuses a destination view that reaches
// one element from two index tuples, with Add (a lost update on a device)
// and without (a race over which write lands), and accepts its legal
// neighbours: views that only look alike, and overlapping sources.
func TestCopyOverlap(t *testing.T) {
	src, ok := backend.At(backendtest.Extent(backend.Float32, 1000), 0), backend.At(backendtest.Extent(backend.Float32, 2000), 500)
	for _, c := range []struct {
		name       string
		shape      []int
		ss, ds     []int
		want       string // "" for legal
		collisions bool   // refused for a collision found by visiting the view
	}{
		{"zero stride", []int{4, 3}, []int{3, 1}, []int{1, 0}, "destination stride 0 on axis 1 of 3 elements", false},
		{"repeated stride", []int{2, 2}, []int{2, 1}, []int{1, 1}, "destination view overlaps itself: indices [0 1] and [1 0]", true},
		{"repeated negative stride", []int{3, 2}, []int{2, 1}, []int{-1, 1}, "destination view overlaps itself", true},
		{"strides that collide", []int{4, 4}, []int{4, 1}, []int{3, 2}, "indices [0 3] and [2 0]", true},
		{"collision behind an axis of one", []int{2, 1, 5}, []int{5, 5, 1}, []int{4, 0, 1}, "indices [0 4] and [1 0]", true},
		{"long rows into short ones", []int{3, 300}, []int{300, 1}, []int{299, 1}, "overlaps itself", true},
		// Legal: a one-to-one view, whatever its strides' order and signs.
		{"contiguous", []int{4, 3}, []int{3, 1}, []int{3, 1}, "", false},
		{"transposed", []int{4, 3}, []int{3, 1}, []int{1, 4}, "", false},
		{"reversed", []int{4, 3}, []int{3, 1}, []int{-3, -1}, "", false},
		{"interleaved without collisions", []int{3, 2}, []int{2, 1}, []int{2, 3}, "", false},
		{"padded rows", []int{3, 5}, []int{5, 1}, []int{8, 1}, "", false},
		{"zero stride on an axis of one", []int{1, 6}, []int{6, 1}, []int{0, 1}, "", false},
		{"empty axis", []int{0, 6}, []int{6, 1}, []int{0, 0}, "", false},
		// Legal: the source may repeat elements (a broadcast); only writes race.
		{"broadcast source", []int{4, 3}, []int{0, 1}, []int{3, 1}, "", false},
		{"source with colliding strides", []int{3, 4}, []int{2, 3}, []int{4, 1}, "", false},
	} {
		for _, add := range []bool{false, true} {
			k := backend.Copy{Shape: c.shape, Src: src, Dst: ok, SrcStrides: c.ss, DstStrides: c.ds, Add: add}
			err := k.Check()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s, add %v: %v", c.name, add, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "backend: copy:")):
				t.Errorf("%s, add %v: %v, want an error containing %q", c.name, add, err, c.want)
			case c.want != "" && add && !strings.Contains(err.Error(), "Add"):
				t.Errorf("%s, add %v: %v, want the error to name the Add", c.name, add, err)
			}
		}
	}
	// A large view that the sorted strides cannot prove one-to-one is
	// visited: strides 2 and 3 over (1024, 2) never collide (odd against
	// even offsets), over (1024, 3) they do.
	big := backend.At(backendtest.Extent(backend.Float32, 3*2048), 0)
	if err := (backend.Copy{Shape: []int{1024, 2}, Src: big, Dst: big, SrcStrides: []int{2, 1}, DstStrides: []int{2, 3}}).Check(); err != nil {
		t.Errorf("shape (1024, 2), strides (2, 3): %v", err)
	}
	if err := (backend.Copy{Shape: []int{1024, 3}, Src: big, Dst: big, SrcStrides: []int{3, 1}, DstStrides: []int{2, 3}}).Check(); err == nil || !strings.Contains(err.Error(), "indices [0 2] and [3 0]") {
		t.Errorf("shape (1024, 3), strides (2, 3): %v, want a collision of (0, 2) and (3, 0)", err)
	}
}

// TestZipScalarDestination checks that Check refuses a Zip whose
// destination holds its own scalar operand (every thread reads the scalar
// while one overwrites it) and accepts the legal neighbours: a destination
// that is a full-size operand (each thread reads and writes its own
// element), a scalar just outside the destination, a scalar in another
// buffer, and one element, where the scalar is the whole operand.
func TestZipScalarDestination(t *testing.T) {
	f := backend.Float32
	b, other := backendtest.Extent(f, 20), backendtest.Extent(f, 21)
	for _, c := range []struct {
		name             string
		n                int
		a, bb, dst       backend.Operand
		aScalar, bScalar bool
		want             string
	}{
		{"dst is scalar A", 7, backend.At(b, 3), backend.At(b, 10), backend.At(b, 3), true, false, "zip: destination holds the scalar operand A (element 0 of 7)"},
		{"dst is scalar B", 7, backend.At(b, 10), backend.At(b, 3), backend.At(b, 3), false, true, "zip: destination holds the scalar operand B (element 0 of 7)"},
		{"scalar A inside dst", 7, backend.At(b, 9), backend.At(other, 0), backend.At(b, 3), true, false, "scalar operand A (element 6 of 7)"},
		{"both scalars, B inside dst", 7, backend.At(other, 0), backend.At(b, 5), backend.At(b, 3), true, true, "scalar operand B"},
		{"full-size A in place", 7, backend.At(b, 3), backend.At(b, 10), backend.At(b, 3), false, true, ""},
		{"full-size B in place", 7, backend.At(b, 10), backend.At(b, 3), backend.At(b, 3), true, false, ""},
		{"both full-size in place", 7, backend.At(b, 3), backend.At(b, 3), backend.At(b, 3), false, false, ""},
		{"scalar just past dst", 7, backend.At(b, 10), backend.At(b, 0), backend.At(b, 3), true, false, ""},
		{"scalar just before dst", 7, backend.At(b, 2), backend.At(b, 0), backend.At(b, 3), true, false, ""},
		{"scalar in another buffer", 7, backend.At(other, 3), backend.At(b, 0), backend.At(b, 3), true, false, ""},
		{"one element in place", 1, backend.At(b, 3), backend.At(b, 3), backend.At(b, 3), true, true, ""},
	} {
		err := (backend.Zip{Op: backend.Mul, N: c.n, A: c.a, B: c.bb, Dst: c.dst, AScalar: c.aScalar, BScalar: c.bScalar}).Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
