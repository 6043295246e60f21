// Package cpu is the backend that runs orthonet's compiled programs on the
// host: each kernel's CPU implementation (its Host method, in package
// backend): matrix products through gonum's BLAS interfaces (OpenBLAS in the
// openblas build, pure Go otherwise), everything else as Go loops, large
// loops split across the machine's cores.
package cpu

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
)

// Options configure a Backend.
type Options struct {
	// Threads is how many goroutines share a large elementwise kernel. Zero
	// selects runtime.GOMAXPROCS(0).
	Threads int
	// Grain is the fewest elements worth handing to another goroutine;
	// zero selects 32768.
	Grain int
}

// Backend runs kernels on the host: their CPU implementations (Host
// methods) on its buffers, which implement backend.HostBuffer. It is not
// safe for concurrent use.
type Backend struct {
	pool *backend.Pool
}

var _ backend.Backend = (*Backend)(nil)

// New returns a CPU backend.
func New(o Options) *Backend {
	return &Backend{pool: backend.NewPool(o.Threads, o.Grain)}
}

// Name returns "cpu" and the thread count.
func (b *Backend) Name() string { return fmt.Sprintf("cpu (%d threads)", b.pool.Threads()) }

// Close stops the backend's worker goroutines.
func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

// Sync returns at once: every Func has finished when it returns.
func (b *Backend) Sync() error { return nil }

// buffer is host memory of one element type.
type buffer struct {
	dt  backend.DType
	f32 []float32
	f64 []float64
	i32 []int32
}

func (b *buffer) DType() backend.DType { return b.dt }

func (b *buffer) Len() int {
	switch b.dt {
	case backend.Float32:
		return len(b.f32)
	case backend.Float64:
		return len(b.f64)
	}
	return len(b.i32)
}

// Host returns the buffer's elements.
func (b *buffer) Host() any {
	switch b.dt {
	case backend.Float32:
		return b.f32
	case backend.Float64:
		return b.f64
	}
	return b.i32
}

// Alloc returns a zeroed buffer.
func (b *Backend) Alloc(dt backend.DType, n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: buffer of %d elements", n)
	}
	buf := &buffer{dt: dt}
	switch dt {
	case backend.Float32:
		buf.f32 = make([]float32, n)
	case backend.Float64:
		buf.f64 = make([]float64, n)
	case backend.Int32:
		buf.i32 = make([]int32, n)
	default:
		return nil, fmt.Errorf("cpu: unknown element type %v", dt)
	}
	return buf, nil
}

// Free drops the buffer; the garbage collector reclaims it.
func (b *Backend) Free(buf backend.Buffer) error {
	if _, ok := buf.(*buffer); !ok {
		return fmt.Errorf("cpu: freeing a %T, not a buffer of this backend", buf)
	}
	return nil
}

func own(buf backend.Buffer) (*buffer, error) {
	h, ok := buf.(*buffer)
	if !ok {
		return nil, fmt.Errorf("cpu: a %T is not a buffer of this backend", buf)
	}
	return h, nil
}

// CopyIn copies src into dst from element off.
func (b *Backend) CopyIn(dst backend.Buffer, off int, src any) error {
	h, err := own(dst)
	if err != nil {
		return err
	}
	switch s := src.(type) {
	case []float32:
		return copyInto(h.f32, off, s, h.dt, backend.Float32)
	case []float64:
		return copyInto(h.f64, off, s, h.dt, backend.Float64)
	case []int32:
		return copyInto(h.i32, off, s, h.dt, backend.Int32)
	}
	return fmt.Errorf("cpu: copying in a %T, want []float32, []float64 or []int32", src)
}

func copyInto[E any](dst []E, off int, src []E, have, want backend.DType) error {
	if have != want {
		return fmt.Errorf("cpu: copying %v into a buffer of %v", want, have)
	}
	if off < 0 || off+len(src) > len(dst) {
		return fmt.Errorf("cpu: copying %d elements at %d into a buffer of %d", len(src), off, len(dst))
	}
	copy(dst[off:], src)
	return nil
}

// CopyOut copies len(dst) elements of src from element off into dst.
func (b *Backend) CopyOut(dst any, src backend.Buffer, off int) error {
	h, err := own(src)
	if err != nil {
		return err
	}
	switch d := dst.(type) {
	case []float32:
		return copyOut(d, h.f32, off, backend.Float32, h.dt)
	case []float64:
		return copyOut(d, h.f64, off, backend.Float64, h.dt)
	case []int32:
		return copyOut(d, h.i32, off, backend.Int32, h.dt)
	}
	return fmt.Errorf("cpu: copying out into a %T, want []float32, []float64 or []int32", dst)
}

func copyOut[E any](dst, src []E, off int, want, have backend.DType) error {
	if have != want {
		return fmt.Errorf("cpu: copying %v out of a buffer of %v", want, have)
	}
	if off < 0 || off+len(dst) > len(src) {
		return fmt.Errorf("cpu: copying %d elements at %d out of a buffer of %d", len(dst), off, len(src))
	}
	copy(dst, src[off:])
	return nil
}

// Host returns the elements of a CPU buffer from op's offset: the slice
// aliases the buffer.
func Host[T float32 | float64 | int32](op backend.Operand) []T {
	h := op.Buf.(*buffer)
	var out any
	switch h.dt {
	case backend.Float32:
		out = h.f32[op.Off:]
	case backend.Float64:
		out = h.f64[op.Off:]
	default:
		out = h.i32[op.Off:]
	}
	return out.([]T)
}
