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

// buffer is host memory of one element type: a []float32, []float64 or
// []int32.
type buffer struct {
	dt   backend.DType
	n    int
	data any
}

func (b *buffer) DType() backend.DType { return b.dt }
func (b *buffer) Len() int             { return b.n }

// Host returns the buffer's elements.
func (b *buffer) Host() any { return b.data }

// Alloc returns a zeroed buffer.
func (b *Backend) Alloc(dt backend.DType, n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: buffer of %d elements", n)
	}
	buf := &buffer{dt: dt, n: n}
	switch dt {
	case backend.Float32:
		buf.data = make([]float32, n)
	case backend.Float64:
		buf.data = make([]float64, n)
	case backend.Int32:
		buf.data = make([]int32, n)
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
		return copyInto(h, off, s, backend.Float32)
	case []float64:
		return copyInto(h, off, s, backend.Float64)
	case []int32:
		return copyInto(h, off, s, backend.Int32)
	}
	return fmt.Errorf("cpu: copying in a %T, want []float32, []float64 or []int32", src)
}

func copyInto[E float32 | float64 | int32](h *buffer, off int, src []E, want backend.DType) error {
	dst, ok := h.data.([]E)
	if !ok {
		return fmt.Errorf("cpu: copying %v into a buffer of %v", want, h.dt)
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
		return copyOut(d, h, off, backend.Float32)
	case []float64:
		return copyOut(d, h, off, backend.Float64)
	case []int32:
		return copyOut(d, h, off, backend.Int32)
	}
	return fmt.Errorf("cpu: copying out into a %T, want []float32, []float64 or []int32", dst)
}

func copyOut[E float32 | float64 | int32](dst []E, h *buffer, off int, want backend.DType) error {
	src, ok := h.data.([]E)
	if !ok {
		return fmt.Errorf("cpu: copying %v out of a buffer of %v", want, h.dt)
	}
	if off < 0 || off+len(dst) > len(src) {
		return fmt.Errorf("cpu: copying %d elements at %d out of a buffer of %d", len(dst), off, len(src))
	}
	copy(dst, src[off:])
	return nil
}
