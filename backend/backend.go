// Package backend says what a device must provide to run orthonet's
// compiled programs: memory (Alloc, Free, copies in and out) and a catalog
// of kernels, each a plain struct describing one operation on buffers
// (GEMM, elementwise maps, reductions, softmax, strided copies, orthonet's
// fused layers, the row gathers, scatters and small factorizations that
// RSDM and RGD need, and Gorgonia's other ops: indexing along an axis and
// its scatter-add, comparisons with boolean results, sparsemax, YOLOv3's
// decoding, and the CTC loss, which runs on the CPU only: HostOnly).
//
// A program is built once: every kernel is handed to Prepare, which checks
// it and returns a Func that runs it; a training step then calls the Funcs
// in order. Prepare is where a backend refuses what it cannot do, so a
// program never fails half-way for want of a kernel. On a device backend a
// Func only enqueues its work; CopyOut and Sync wait for it.
//
// Each kernel type is defined once, here, in the file of its family
// (products.go, elementwise.go, copies.go, reductions.go, linalg.go,
// fused.go, step.go, random.go, norm.go, conv.go, pooling.go, convpool.go,
// ctc.go): its struct, its Check, its CPU implementation (Host, which
// backend/cpu runs) and its CUDA one (Device: the launches of
// internal/cudak's kernels.cu that backend/cuda runs) in one block, in the
// order of its kernels in kernels.cu's section for the file. The backends
// dispatch through these methods (HostKernel, DeviceKernel), not through
// lists of kernel types.
//
// Buffers hold float32, float64 or int32 elements. An Operand is a buffer
// and an element offset into it; the kernel's sizes say how many elements
// it covers. Matrices are row-major.
package backend

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// DType is the element type of a buffer.
type DType uint8

// The element types of buffers.
const (
	Float32 DType = iota + 1 // float32
	Float64                  // float64
	Int32                    // int32: indices, labels and flags
)

// String returns the type's name: float32, float64 or int32.
func (d DType) String() string {
	if d >= Float32 && d <= Int32 {
		return [...]string{Float32: "float32", Float64: "float64", Int32: "int32"}[d]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size returns the bytes of one element.
func (d DType) Size() int {
	if d == Float64 {
		return 8
	}
	return 4
}

// Buffer is memory owned by a backend.
type Buffer interface {
	DType() DType
	Len() int
}

// Operand is a buffer and an element offset into it.
type Operand struct {
	Buf Buffer
	Off int
}

// At returns the operand of buf at element offset off.
func At(buf Buffer, off int) Operand { return Operand{Buf: buf, Off: off} }

// Func runs one prepared kernel.
type Func func() error

// Backend is a device that runs kernels on its own memory.
type Backend interface {
	// Name says which backend and device this is, for logs.
	Name() string
	// Alloc returns a zeroed buffer of n elements.
	Alloc(dt DType, n int) (Buffer, error)
	// Free releases a buffer; it must not be used afterwards.
	Free(Buffer) error
	// CopyIn copies src ([]float32, []float64 or []int32 of the buffer's
	// type) into dst starting at element off.
	CopyIn(dst Buffer, off int, src any) error
	// CopyOut copies len(dst) elements of src starting at element off into
	// dst, after every Func run before it has finished.
	CopyOut(dst any, src Buffer, off int) error
	// Prepare checks a kernel (one of this package's kernel types) against
	// its buffers and returns a Func that runs it. A kernel the backend
	// does not implement is an error wrapping ErrUnsupported.
	Prepare(k Kernel) (Func, error)
	// Sync waits until every Func run so far has finished.
	Sync() error
	// Close releases the backend's resources; its buffers must not be used
	// afterwards.
	Close() error
}

// HostBuffer is a buffer whose elements live in host memory (the CPU
// backend's): Host returns them as a []float32, []float64 or []int32 that
// aliases the buffer.
type HostBuffer interface {
	Buffer
	Host() any
}

// ErrUnsupported reports a kernel a backend does not implement.
var ErrUnsupported = errors.New("backend: kernel not supported")

// Kernel is one of the kernel types of this package: a struct whose
// Operand fields are the buffers it reads and writes (Operands) and whose
// other fields are its sizes and settings.
type Kernel interface {
	// Check reports an error naming the first operand whose buffer is too
	// short or of another element type than the kernel's.
	Check() error
}

var operandType = reflect.TypeFor[Operand]()

// Operands returns every Operand field of k, in their order: the operands
// it reads or writes.
func Operands(k Kernel) []Operand {
	v := reflect.Indirect(reflect.ValueOf(k))
	var ops []Operand
	for i := range v.NumField() {
		if f := v.Field(i); f.Type() == operandType && f.CanInterface() {
			ops = append(ops, f.Interface().(Operand))
		}
	}
	return ops
}

// MapOperands returns a copy of k whose every Operand field op is f(op).
func MapOperands(k Kernel, f func(Operand) Operand) Kernel {
	v := reflect.New(reflect.TypeOf(k)).Elem()
	v.Set(reflect.ValueOf(k))
	for i := range v.NumField() {
		if fv := v.Field(i); fv.Type() == operandType && fv.CanSet() {
			fv.Set(reflect.ValueOf(f(fv.Interface().(Operand))))
		}
	}
	return v.Interface().(Kernel)
}

// Name returns the name of k's kind, for errors and profiles: its type's
// name in lower case, with a hyphen between words (SoftmaxGrad:
// softmax-grad, SGDStep: sgd-step).
func Name(k Kernel) string {
	t := reflect.TypeOf(k)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	r := []rune(t.Name())
	var b strings.Builder
	for i, c := range r {
		// A word starts at a capital after a small letter, or at the last
		// capital of an acronym before a small letter (SGD|Step).
		if i > 0 && unicode.IsUpper(c) && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// DTypeOf returns the element type of op's buffer, or 0 when it has none.
func DTypeOf(op Operand) DType {
	if op.Buf == nil {
		return 0
	}
	return op.Buf.DType()
}

// CheckOperand reports an error unless op has n elements from its offset
// in a buffer of type dt (any type when dt is 0).
func CheckOperand(what string, op Operand, dt DType, n int) error {
	if op.Buf == nil {
		return fmt.Errorf("backend: %s: no buffer", what)
	}
	if dt != 0 && op.Buf.DType() != dt {
		return fmt.Errorf("backend: %s: buffer of %v, want %v", what, op.Buf.DType(), dt)
	}
	if op.Off < 0 || n < 0 || op.Off+n > op.Buf.Len() {
		return fmt.Errorf("backend: %s: elements %d to %d of a buffer of %d", what, op.Off, op.Off+n, op.Buf.Len())
	}
	return nil
}

// checkAll checks k's operands given as (name, Operand, elements) triples,
// of type dt (any when dt is 0); a DType among them sets the type of the
// operands after it.
func checkAll(k Kernel, dt DType, ops ...any) error {
	for i := 0; i+2 < len(ops); i += 3 {
		if t, ok := ops[i].(DType); ok {
			dt, i = t, i+1
		}
		what, op, n := ops[i].(string), ops[i+1].(Operand), ops[i+2].(int)
		if err := CheckOperand(Name(k)+" "+what, op, dt, n); err != nil {
			return err
		}
	}
	return nil
}

// checkFloatDst reports an error unless dst, k's destination, holds
// float32 or float64 elements.
func checkFloatDst(k Kernel, dst Operand) error {
	if dt := DTypeOf(dst); dt != Float32 && dt != Float64 {
		return fmt.Errorf("backend: %s: destination of %v", Name(k), dt)
	}
	return nil
}

// checkSized reports an error unless every size is at least 1, then
// checks k's operands as checkAll does.
func checkSized(k Kernel, sizes []int, dt DType, ops ...any) error {
	for _, s := range sizes {
		if s < 1 {
			return fmt.Errorf("backend: %s: sizes %v, want positive", Name(k), sizes)
		}
	}
	return checkAll(k, dt, ops...)
}

// Timer is a backend that can time its kernels on the device (the CUDA
// backend with profiling on): where a step's device time goes, and how much
// of the stream's span the kernels fill.
type Timer interface {
	// KernelTimes returns the device time of every kind of kernel run so
	// far, most first, and the span of the stream those runs covered from
	// the first kernel's start to the last one's end between waits.
	KernelTimes() (kernels []KernelTime, span time.Duration)
}

// KernelTime is the device time of one kind of kernel.
type KernelTime struct {
	Kernel string
	Count  int
	Total  time.Duration
}

// Sequence returns a Func that runs fns in order and stops at the first
// error: a no-op for none, the Func itself for one.
func Sequence(fns []Func) Func {
	switch len(fns) {
	case 0:
		return func() error { return nil }
	case 1:
		return fns[0]
	}
	return func() error {
		for _, f := range fns {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	}
}
