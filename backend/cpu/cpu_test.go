package cpu_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/backend/cpu"
)

func TestAlloc(t *testing.T) {
	b := cpu.New(cpu.Options{})
	defer b.Close()
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Int32} {
		buf, err := b.Alloc(dt, 5)
		if err != nil {
			t.Fatal(err)
		}
		if buf.DType() != dt || buf.Len() != 5 {
			t.Errorf("Alloc(%v, 5): a buffer of %d %v", dt, buf.Len(), buf.DType())
		}
		h, ok := buf.(backend.HostBuffer)
		if !ok {
			t.Fatalf("a %T is not a HostBuffer", buf)
		}
		if got := fmt.Sprint(h.Host()); got != "[0 0 0 0 0]" {
			t.Errorf("new %v buffer holds %s", dt, got)
		}
		if err := b.Free(buf); err != nil {
			t.Error(err)
		}
	}
	for _, c := range []struct {
		dt backend.DType
		n  int
	}{{backend.Float32, -1}, {0, 3}, {backend.DType(9), 3}} {
		if _, err := b.Alloc(c.dt, c.n); err == nil {
			t.Errorf("Alloc(%v, %d): no error", c.dt, c.n)
		}
	}
	if err := b.Free(backendtest.Extent(backend.Float32, 3)); err == nil {
		t.Error("freeing a buffer of another backend: no error")
	}
}

func TestCopyInOut(t *testing.T) {
	b := cpu.New(cpu.Options{})
	defer b.Close()
	f32, _ := b.Alloc(backend.Float32, 7)
	f64, _ := b.Alloc(backend.Float64, 7)
	i32, _ := b.Alloc(backend.Int32, 7)
	// Round trips at an offset: the rest of the buffer stays zero.
	for _, c := range []struct {
		buf     backend.Buffer
		in, out any
		want    string
	}{
		{f32, []float32{1.5, -2, 3}, make([]float32, 7), "[0 0 1.5 -2 3 0 0]"},
		{f64, []float64{1.5, -2, 3}, make([]float64, 7), "[0 0 1.5 -2 3 0 0]"},
		{i32, []int32{1, -2, 3}, make([]int32, 7), "[0 0 1 -2 3 0 0]"},
	} {
		if err := b.CopyIn(c.buf, 2, c.in); err != nil {
			t.Fatal(err)
		}
		if err := b.CopyOut(c.out, c.buf, 0); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(c.out); got != c.want {
			t.Errorf("%v: copied out %s, want %s", c.buf.DType(), got, c.want)
		}
		part := fmt.Sprint(c.in)
		switch out := c.out.(type) {
		case []float32:
			err := b.CopyOut(out[:3], c.buf, 2)
			part = fmt.Sprint(out[:3], err)
		case []float64:
			err := b.CopyOut(out[:3], c.buf, 2)
			part = fmt.Sprint(out[:3], err)
		case []int32:
			err := b.CopyOut(out[:3], c.buf, 2)
			part = fmt.Sprint(out[:3], err)
		}
		if want := fmt.Sprint(c.in, nil); part != want {
			t.Errorf("%v: elements 2 to 5 copied out as %s, want %s", c.buf.DType(), part, want)
		}
	}
	// Errors name the problem and change nothing.
	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"in: float64 into float32", func() error { return b.CopyIn(f32, 0, []float64{1}) }, "float64 into a buffer of float32"},
		{"in: int32 into float64", func() error { return b.CopyIn(f64, 0, []int32{1}) }, "int32 into a buffer of float64"},
		{"in: past the end", func() error { return b.CopyIn(f32, 5, []float32{1, 2, 3}) }, "3 elements at 5 into a buffer of 7"},
		{"in: negative offset", func() error { return b.CopyIn(f32, -1, []float32{1}) }, "at -1"},
		{"in: []int", func() error { return b.CopyIn(f32, 0, []int{1}) }, "[]int"},
		{"in: foreign buffer", func() error { return b.CopyIn(backendtest.Extent(backend.Float32, 7), 0, []float32{1}) }, "not a buffer of this backend"},
		{"out: float32 from float64", func() error { return b.CopyOut(make([]float32, 1), f64, 0) }, "float32 out of a buffer of float64"},
		{"out: past the end", func() error { return b.CopyOut(make([]float32, 3), f32, 5) }, "3 elements at 5 out of a buffer of 7"},
		{"out: offset past the end", func() error { return b.CopyOut(make([]float64, 1), f64, 8) }, "1 elements at 8 out of a buffer of 7"},
		{"out: negative offset", func() error { return b.CopyOut(make([]int32, 1), i32, -1) }, "at -1 out of a buffer of 7"},
		{"out: []int", func() error { return b.CopyOut(make([]int, 1), i32, 0) }, "[]int"},
		{"out: foreign buffer", func() error { return b.CopyOut(make([]float32, 1), backendtest.Extent(backend.Float32, 7), 0) }, "not a buffer of this backend"},
	} {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	out := []float32{5, 5, 5}
	if err := b.CopyOut(out, f32, 5); err == nil || fmt.Sprint(out) != "[5 5 5]" {
		t.Errorf("copying out past the end: %v, and the slice became %v", err, out)
	}
	for _, buf := range []backend.Buffer{f32, f64, i32} {
		if got := fmt.Sprint(buf.(backend.HostBuffer).Host()); !strings.HasPrefix(got, "[0 0 1") {
			t.Errorf("%v buffer after failed copies: %s", buf.DType(), got)
		}
	}
}

// TestHost checks that a CPU buffer is a backend.HostBuffer whose
// elements alias it.
func TestHost(t *testing.T) {
	b := cpu.New(cpu.Options{})
	defer b.Close()
	buf := load(t, b, []float64{1, 2, 3, 4})
	h := buf.(backend.HostBuffer).Host().([]float64)[1:]
	h[0] = 9
	if got := fmt.Sprint(read[float64](t, b, buf), len(h)); got != "[1 9 3 4] 3" {
		t.Errorf("after writing through Host: %s", got)
	}
}

// TestAllocsPerRun checks that running a prepared kernel allocates nothing,
// with its loops split across threads.
func TestAllocsPerRun(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 3, Grain: 1})
	defer b.Close()
	r := rng(5)
	f32 := func(n int) backend.Operand { return backend.At(load(t, b, uniform[float32](r, n, -1, 1)), 0) }
	f64 := func(n int) backend.Operand { return backend.At(load(t, b, uniform[float64](r, n, -1, 1)), 0) }
	flag := backend.At(load(t, b, []int32{0}), 0)
	rows := backend.At(load(t, b, []int32{3, 0, 2}), 0)
	allocFree(t, b, []backend.Kernel{
		backend.Gemm{M: 17, N: 9, K: 13, A: f32(17 * 13), B: f32(13 * 9), C: f32(17 * 9), LDA: 13, LDB: 9, LDC: 9, Alpha: 1, Batch: 2},
		backend.Gemm{TransA: true, M: 17, N: 9, K: 13, A: f64(17 * 13), B: f64(13 * 9), C: f64(17 * 9), LDA: 17, LDB: 9, LDC: 9, Alpha: 1, Beta: 1},
		backend.Gemm{M: 130, N: 128, K: 9, A: f32(130 * 9), B: f32(9 * 128), C: f32(130 * 128), LDA: 9, LDB: 128, LDC: 128, Alpha: 1},
		backend.Gemm{M: 3, N: 4, K: 0, A: f64(1), B: f64(4), C: f64(12), LDA: 1, LDB: 4, LDC: 4, Alpha: 1},
		backend.Map{Op: backend.Tanh, N: 257, Src: f32(257), Dst: f32(257)},
		backend.Map{Op: backend.Square, N: 257, Src: f64(257), Dst: f64(257)},
		backend.Zip{Op: backend.Mul, N: 257, A: f32(257), B: f32(257), Dst: f32(257)},
		backend.Zip{Op: backend.Max2, N: 257, A: f64(257), B: f64(1), Dst: f64(257), BScalar: true},
		backend.Reduce{Op: backend.Sum, Outer: 7, Mid: 65, Inner: 1, Src: f32(7 * 65), Dst: f32(7)},
		backend.Reduce{Op: backend.Max, Outer: 7, Mid: 5, Inner: 3, Src: f64(7 * 5 * 3), Dst: f64(21)},
		backend.Softmax{Log: true, Outer: 7, Axis: 9, Inner: 2, Src: f32(126), Dst: f32(126)},
		backend.SoftmaxGrad{Outer: 7, Axis: 9, Inner: 2, Y: f64(126), DY: f64(126), DX: f64(126)},
		backend.Copy{Shape: []int{2, 3, 4, 5}, Src: f32(120), Dst: f32(120), SrcStrides: []int{60, 20, 5, 1}, DstStrides: []int{1, 2, 30, 6}},
		backend.Copy{Shape: []int{7, 5}, Src: backend.At(f64(35).Buf, 34), Dst: f64(35), SrcStrides: []int{-5, -1}, DstStrides: []int{1, 7}, Add: true},
		backend.Fill{N: 65, Dst: f32(65), Value: 2},
		backend.CheckFinite{N: 65, Src: f64(65), Flag: flag},
		backend.CheckProduct{RA: 5, CA: 3, CB: 4, A: f32(15), B: f32(20), Flag: flag},
		backend.GatherRows{N: 3, Width: 5, Rows: rows, Src: f64(20), Dst: f64(15)},
		backend.ScatterRows{N: 3, Width: 5, Rows: rows, Src: f32(15), Dst: f32(20)},
		backend.QF{M: 9, N: 4, A: f32(36)},
		backend.QF{M: 6, N: 6, A: f64(36), GramBound: 10},
	})
}
