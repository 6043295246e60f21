package cpu_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/backend/cpu"
)

// prepare is b.Prepare(k), with a panic reported as a test error.
func prepare(t *testing.T, b backend.Backend, k backend.Kernel) (f backend.Func, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("Prepare(%#v) panicked: %v", k, r)
			f, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return b.Prepare(k)
}

// unknownKernel is a kernel no backend implements.
type unknownKernel struct{ Op backend.Operand }

func (unknownKernel) Check() error { return nil }

// tightKernel is a valid float32 kernel whose every operand has exactly
// the elements it needs, and the names its errors give the operands, in
// the order of the kernel's Operand fields.
type tightKernel struct {
	k     backend.Kernel
	names []string
}

func tightKernels(t *testing.T, b backend.Backend) []tightKernel {
	f := func(n int) backend.Operand {
		buf, err := b.Alloc(backend.Float32, n)
		if err != nil {
			t.Fatal(err)
		}
		return backend.At(buf, 0)
	}
	i32 := func(n int) backend.Operand {
		buf, err := b.Alloc(backend.Int32, n)
		if err != nil {
			t.Fatal(err)
		}
		return backend.At(buf, 0)
	}
	// The source of a (2, 3) Copy with strides (-1, 2): elements 0 to 5
	// from offset 1.
	csrc := f(6)
	csrc.Off = 1
	return []tightKernel{
		{backend.Gemm{M: 2, N: 3, K: 4, A: f(19), B: f(24), C: f(12), LDA: 5, LDB: 3, LDC: 3, Batch: 2, StrideA: 10, StrideB: 12, StrideC: 6},
			[]string{"gemm A", "gemm B", "gemm C"}},
		{backend.Gemm{TransA: true, TransB: true, M: 2, N: 3, K: 4, A: f(8), B: f(12), C: f(6), LDA: 2, LDB: 4, LDC: 3, Alpha: 1},
			[]string{"gemm A", "gemm B", "gemm C"}},
		{backend.Map{Op: backend.Exp, N: 5, Src: f(5), Dst: f(5)}, []string{"map source", "map destination"}},
		{backend.Zip{Op: backend.Add, N: 5, A: f(1), B: f(5), Dst: f(5), AScalar: true}, []string{"zip A", "zip B", "zip destination"}},
		{backend.Reduce{Op: backend.Max, Outer: 2, Mid: 3, Inner: 4, Src: f(24), Dst: f(8)}, []string{"reduce source", "reduce destination"}},
		{backend.Softmax{Outer: 2, Axis: 3, Inner: 4, Src: f(24), Dst: f(24)}, []string{"softmax source", "softmax destination"}},
		{backend.SoftmaxGrad{Outer: 2, Axis: 3, Inner: 4, Y: f(24), DY: f(24), DX: f(24)}, []string{"softmax-grad Y", "softmax-grad DY", "softmax-grad DX"}},
		{backend.Copy{Shape: []int{2, 3}, Src: csrc, Dst: f(6), SrcStrides: []int{-1, 2}, DstStrides: []int{3, 1}}, []string{"copy source", "copy destination"}},
		{backend.Copy{Shape: []int{2, 0}, Src: f(0), Dst: f(0), SrcStrides: []int{1, 1}, DstStrides: []int{1, 1}}, []string{"copy source", "copy destination"}},
		{backend.Fill{N: 4, Dst: f(4)}, []string{"fill"}},
		{backend.CheckFinite{N: 4, Src: f(4), Flag: i32(1)}, []string{"check-finite source", "check-finite flag"}},
		{backend.CheckProduct{RA: 3, CA: 2, CB: 4, A: f(6), B: f(12), Flag: i32(1)}, []string{"check-product A", "check-product B", "check-product flag"}},
		{backend.GatherRows{N: 2, Width: 3, Rows: i32(2), Src: f(3), Dst: f(6)}, []string{"gather-rows indices", "gather-rows source", "gather-rows destination"}},
		{backend.ScatterRows{N: 2, Width: 3, Rows: i32(2), Src: f(6), Dst: f(3)}, []string{"scatter-rows indices", "scatter-rows source", "scatter-rows destination"}},
		{backend.QF{M: 3, N: 2, A: f(6)}, []string{"qf"}},
		{backend.Take{Outer: 2, Axis: 3, Inner: 2, N: 4, Indices: i32(4), Src: f(12), Dst: f(16)}, []string{"take indices", "take source", "take destination"}},
		{backend.TakeGrad{Outer: 2, Axis: 3, Inner: 2, N: 4, Indices: i32(4), DY: f(16), DX: f(12)}, []string{"take-grad indices", "take-grad DY", "take-grad DX"}},
		{backend.Compare{Op: backend.Lt, N: 5, A: f(5), B: f(1), Dst: i32(5), BScalar: true}, []string{"compare A", "compare B", "compare destination"}},
		{backend.Sparsemax{Rows: 2, Cols: 3, Src: f(6), Dst: f(6)}, []string{"sparsemax source", "sparsemax destination"}},
		{backend.SparsemaxGrad{Rows: 2, Cols: 3, Y: f(6), DY: f(6), DX: f(6)}, []string{"sparsemax-grad Y", "sparsemax-grad DY", "sparsemax-grad DX"}},
		{backend.YOLODecode{Batch: 2, Boxes: 2, Attrs: 6, Grid: 2, Stride: 8, Anchors: f(4), Src: f(96), Dst: f(96)}, []string{"yolo-decode anchors", "yolo-decode source", "yolo-decode destination"}},
		{backend.CTCLoss{CTC: backend.CTC{Time: 4, Batch: 2, Labels: 3, Width: 2, Entries: 4}, LogProbs: f(24), Targets: i32(4), InputLengths: i32(2), TargetLengths: i32(2), Loss: f(1)},
			[]string{"ctc-loss log-probabilities", "ctc-loss targets", "ctc-loss input lengths", "ctc-loss target lengths", "ctc-loss loss"}},
		{backend.CTCLossGrad{CTC: backend.CTC{Time: 4, Batch: 2, Labels: 3, Entries: 3}, LogProbs: f(24), Targets: i32(3), InputLengths: i32(2), TargetLengths: i32(2), GradOut: f(1), DX: f(24)},
			[]string{"ctc-loss-grad log-probabilities", "ctc-loss-grad targets", "ctc-loss-grad input lengths", "ctc-loss-grad target lengths", "ctc-loss-grad gradient of the loss", "ctc-loss-grad DX"}},
	}
}

// operandFields returns the indices of k's Operand fields.
func operandFields(k backend.Kernel) []int {
	var fs []int
	ty := reflect.TypeOf(k)
	for i := 0; i < ty.NumField(); i++ {
		if ty.Field(i).Type == reflect.TypeFor[backend.Operand]() {
			fs = append(fs, i)
		}
	}
	return fs
}

// with returns k with its Operand field i replaced by op.
func with(k backend.Kernel, i int, op backend.Operand) backend.Kernel {
	v := reflect.New(reflect.TypeOf(k)).Elem()
	v.Set(reflect.ValueOf(k))
	v.Field(i).Set(reflect.ValueOf(op))
	return v.Interface().(backend.Kernel)
}

// operand returns k's Operand field i.
func operand(k backend.Kernel, i int) backend.Operand {
	return reflect.ValueOf(k).Field(i).Interface().(backend.Operand)
}

// TestPrepareRefuses changes one operand at a time of valid kernels and
// expects an error, never a panic.
func TestPrepareRefuses(t *testing.T) {
	b := cpu.New(cpu.Options{})
	defer b.Close()
	wantErr := func(t *testing.T, what string, k backend.Kernel, substr string) {
		t.Helper()
		if _, err := prepare(t, b, k); err == nil || !strings.Contains(err.Error(), substr) {
			t.Errorf("%s: error %v, want one containing %q", what, err, substr)
		}
	}
	for _, tk := range tightKernels(t, b) {
		t.Run(backend.Name(tk.k), func(t *testing.T) {
			if _, err := prepare(t, b, tk.k); err != nil {
				t.Fatalf("the kernel itself: %v", err)
			}
			fields := operandFields(tk.k)
			if len(fields) != len(tk.names) {
				t.Fatalf("%d operand fields, %d names", len(fields), len(tk.names))
			}
			floats := 0
			for _, i := range fields {
				if backend.DTypeOf(operand(tk.k, i)) == backend.Float32 {
					floats++
				}
			}
			for fi, i := range fields {
				op, name := operand(tk.k, i), tk.names[fi]
				short := op
				short.Off++
				wantErr(t, name+" one element short", with(tk.k, i, short), name)
				wantErr(t, name+" without a buffer", with(tk.k, i, backend.Operand{}), name)
				wantErr(t, name+" at a negative offset", with(tk.k, i, backend.At(op.Buf, -1)), name)
				wantErr(t, name+" of another backend", with(tk.k, i, backend.At(backendtest.Extent(op.Buf.DType(), op.Buf.Len()), op.Off)), "not a buffer of this backend")
				// Another type: refused where the kernel's types must
				// agree or be int32.
				other := backend.Float64
				if op.Buf.DType() != backend.Float32 {
					other = backend.Float32
				}
				ob, err := b.Alloc(other, op.Buf.Len())
				if err != nil {
					t.Fatal(err)
				}
				if op.Buf.DType() == backend.Int32 || floats > 1 {
					wantErr(t, name+" of "+other.String(), with(tk.k, i, backend.At(ob, op.Off)), "buffer of")
				} else if _, err := prepare(t, b, with(tk.k, i, backend.At(ob, op.Off))); err != nil {
					t.Errorf("%s of %v: %v", name, other, err)
				}
			}
			// Int32 data: Fill and CheckFinite take it, every other
			// kernel refuses it.
			k := tk.k
			for _, i := range fields {
				if op := operand(k, i); op.Buf.DType() == backend.Float32 {
					ib, err := b.Alloc(backend.Int32, op.Buf.Len())
					if err != nil {
						t.Fatal(err)
					}
					k = with(k, i, backend.At(ib, op.Off))
				}
			}
			f, err := prepare(t, b, k)
			switch k.(type) {
			case backend.Fill, backend.CheckFinite:
				if err != nil {
					t.Errorf("int32 data: %v", err)
				} else if err := f(); err != nil {
					t.Errorf("int32 data: running: %v", err)
				}
			default:
				if err == nil {
					t.Errorf("int32 data: no error")
				}
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		buf, _ := b.Alloc(backend.Float32, 4)
		f := backend.At(buf, 0)
		for _, k := range []backend.Kernel{
			backend.Map{Op: 0, N: 4, Src: f, Dst: f},
			backend.Map{Op: 200, N: 4, Src: f, Dst: f},
			backend.Zip{Op: 0, N: 4, A: f, B: f, Dst: f},
			backend.Zip{Op: 200, N: 4, A: f, B: f, Dst: f},
			backend.Reduce{Op: 0, Outer: 1, Mid: 2, Inner: 2, Src: f, Dst: f},
			backend.Reduce{Op: 3, Outer: 1, Mid: 2, Inner: 2, Src: f, Dst: f},
		} {
			wantErr(t, fmt.Sprintf("%#v", k), k, "unknown")
		}
		_, err := prepare(t, b, unknownKernel{f})
		if !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("a kernel of an unknown type: error %v, want ErrUnsupported", err)
		}
		wantErr(t, "an unknown kernel on a foreign buffer", unknownKernel{backend.At(backendtest.Extent(backend.Float32, 4), 0)}, "not a buffer of this backend")
	})
	t.Run("sizes", func(t *testing.T) {
		buf, _ := b.Alloc(backend.Float32, 64)
		flag, _ := b.Alloc(backend.Int32, 1)
		f := backend.At(buf, 0)
		for _, k := range []backend.Kernel{
			backend.Gemm{M: -1, N: 2, K: 2, A: f, B: f, C: f, LDA: 2, LDB: 2, LDC: 2},
			backend.Gemm{M: 2, N: 2, K: 3, A: f, B: f, C: f, LDA: 2, LDB: 2, LDC: 2},
			backend.Gemm{M: 2, N: 2, K: 2, A: f, B: f, C: f, LDA: 2, LDB: 2, LDC: 2, Batch: -1},
			backend.Map{Op: backend.Neg, N: -1, Src: f, Dst: f},
			backend.Zip{Op: backend.Add, N: -1, A: f, B: f, Dst: f, AScalar: true, BScalar: true},
			backend.Reduce{Op: backend.Sum, Outer: 0, Mid: 2, Inner: 2, Src: f, Dst: f},
			backend.Softmax{Outer: 1, Axis: 0, Inner: 2, Src: f, Dst: f},
			backend.SoftmaxGrad{Outer: 1, Axis: 2, Inner: -2, Y: f, DY: f, DX: f},
			backend.Copy{Shape: []int{2, 2}, Src: f, Dst: f, SrcStrides: []int{2, 1}, DstStrides: []int{0, 1}},
			backend.Copy{Shape: []int{2, 2}, Src: f, Dst: f, SrcStrides: []int{2, 1}, DstStrides: []int{1}},
			backend.Copy{Shape: []int{-2, 2}, Src: f, Dst: f, SrcStrides: []int{2, 1}, DstStrides: []int{2, 1}},
			backend.Copy{Shape: make([]int, backend.MaxDims+1), Src: f, Dst: f, SrcStrides: make([]int, backend.MaxDims+1), DstStrides: make([]int, backend.MaxDims+1)},
			backend.Fill{N: -1, Dst: f},
			backend.CheckProduct{RA: -1, CA: -1, CB: -1, A: f, B: f, Flag: backend.At(flag, 0)},
			backend.QF{M: 2, N: 3, A: f},
			backend.QF{M: 2, N: 0, A: f},
		} {
			if _, err := prepare(t, b, k); err == nil {
				t.Errorf("%#v: no error", k)
			}
		}
	})
}
