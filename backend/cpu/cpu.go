// Package cpu is the backend that runs orthonet's compiled programs on the
// host: each kernel's CPU implementation (its Host method, in package
// backend): matrix products through the BLAS chosen at run time (BLAS says
// which: OpenBLAS where it is installed, pure-Go gonum otherwise),
// everything else as Go loops, large loops split across the machine's cores.
package cpu

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/linalg"
)

// BLASEnv names the environment variable that chooses the BLAS of every
// product on the host (this backend's, the optimizers', Gorgonia's tape
// machine's under package training) when UseBLAS was not called: "auto" or
// unset (the first of libopenblas.so.0, libopenblas.so, libblas.so.3 with
// liblapack.so.3 that loads, pure Go where none does), "openblas", "gonum",
// or a CBLAS library's path.
const BLASEnv = linalg.BLASEnv

// UseBLAS chooses the BLAS as BLASEnv does, overriding it; it must come
// before the first product. A library that does not load is not an error:
// the products run in pure Go and BLAS says why.
func UseBLAS(name string) error { return linalg.UseBLAS(name) }

// BLAS says which BLAS computes the host's products, and why: "OpenBLAS
// (libopenblas.so.0, loaded at run time)", or "gonum (pure Go): " and the
// reason no library was used. Its first call makes the choice.
func BLAS() string { return linalg.Backend() }

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
	return transfer(dst, off, src, true)
}

// CopyOut copies len(dst) elements of src from element off into dst.
func (b *Backend) CopyOut(dst any, src backend.Buffer, off int) error {
	return transfer(src, off, dst, false)
}

// transfer copies the host slice s into buf from element off (in), or
// len(s) elements of buf from element off into s.
func transfer(buf backend.Buffer, off int, s any, in bool) error {
	h, err := own(buf)
	if err != nil {
		return err
	}
	switch s := s.(type) {
	case []float32:
		return copyHost(h, off, s, backend.Float32, in)
	case []float64:
		return copyHost(h, off, s, backend.Float64, in)
	case []int32:
		return copyHost(h, off, s, backend.Int32, in)
	}
	what := "out into"
	if in {
		what = "in"
	}
	return fmt.Errorf("cpu: copying %s a %T, want []float32, []float64 or []int32", what, s)
}

func copyHost[E float32 | float64 | int32](h *buffer, off int, s []E, want backend.DType, in bool) error {
	dir := "out of"
	if in {
		dir = "into"
	}
	data, ok := h.data.([]E)
	if !ok {
		return fmt.Errorf("cpu: copying %v %s a buffer of %v", want, dir, h.dt)
	}
	if off < 0 || off+len(s) > len(data) {
		return fmt.Errorf("cpu: copying %d elements at %d %s a buffer of %d", len(s), off, dir, len(data))
	}
	if in {
		copy(data[off:], s)
	} else {
		copy(s, data[off:])
	}
	return nil
}
