// Package cudak holds orthonet's CUDA kernels (kernels.cu, our own CUDA C++)
// and the planner that records a backend kernel's launches of them and its
// cuBLAS products: what the kernel's Device method (package backend, beside
// its CPU implementation) asks for. The CUDA backend (backend/cuda) runs the plans on a GPU,
// or on the host model of one (package cudak/standin, which compiles the
// same kernel source for the host), so that the kernels and the planning
// are tested without a GPU.
package cudak

import (
	_ "embed"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/orthonet/orthonet/backend"
)

// Source is the CUDA C++ source of the kernels, for NVRTC.
//
//go:embed kernels.cu
var Source string

// CompileOptions are the NVRTC options the kernels are built with, besides
// the architecture: no contraction of a*b+c into fused multiply-adds, so
// that the kernels round as the CPU backend does.
var CompileOptions = []string{"--fmad=false", "-std=c++17"}

// Threads is the block size of every launch (NT in kernels.cu).
const Threads = backend.DeviceThreads

// maxGrid bounds the blocks of a launch; the kernels stride over the rest.
// A Device with a method MaxGrid() int returning a positive number bounds
// them further (tests do, so that the grid-stride loops repeat).
const maxGrid = 4096

// Device is what the planner needs from a backend.
type Device interface {
	// Addr returns the device address of an operand's first element.
	Addr(op backend.Operand) (uint64, error)
	// Scratch returns zeroed device memory of n elements of dt that the
	// backend keeps until it closes.
	Scratch(dt backend.DType, n int) (uint64, error)
	// Fault returns the address of the backend's four fault words, where
	// the row kernels record the first bad row index (see Fault).
	Fault() uint64
}

// Step is a Launch or a Gemm.
type Step interface{ isStep() }

// Launch runs kernel Kernel on Grid blocks of Threads threads with Args,
// the 64-bit words of its argument struct.
type Launch struct {
	Kernel string
	Grid   int
	Args   []uint64
}

// Gemm is a strided batched matrix product as cuBLAS takes it: the fields
// of backend.DeviceGemm, but column-major, C = Alpha op(A) op(B) + Beta C,
// op(A) M x K and op(B) K x N, for Batch matrices (at least 1, and the
// strides 0 for one); with Beta = 0, C is not read.
type Gemm struct {
	F64 bool
	backend.DeviceGemm
}

// Potrf is cuSOLVER's Cholesky factorization of the symmetric N x N matrix
// at A in place (its lower triangle, column-major), which leaves in the
// row-major upper triangle the factor R with A = R^T R; it writes 0 to the
// Int32 element at Info, or the order of the first minor that is not
// positive.
type Potrf struct {
	F64     bool
	N       int
	A, Info uint64
}

// Trsm is cuBLAS's triangular solve that sets the row-major M x N matrix at
// B to B R^-1, R the row-major upper triangle of the N x N matrix at A.
type Trsm struct {
	F64  bool
	M, N int
	A, B uint64
}

func (Launch) isStep() {}
func (Gemm) isStep()   {}
func (Potrf) isStep()  {}
func (Trsm) isStep()   {}

// Fault is the meaning of a backend's fault words, which the first kernel
// to fail writes: Words[0] is 1 after a row kernel met an index outside the
// indexed matrix (then the index, its entry among the indices, and the
// matrix's number of rows), 2 after a Cholesky factorization met a pivot
// that is not positive (then the pivot's index and the order).
type Fault struct{ Words [4]uint64 }

// Err returns the error the fault words report, or nil when Words[0] is 0.
func (f Fault) Err() error {
	switch f.Words[0] {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("row index %d (entry %d of the indices) outside 0 to %d", int64(f.Words[1]), int64(f.Words[2]), int64(f.Words[3])-1)
	case 2:
		return fmt.Errorf("QR factorization failed: pivot %d of the %d x %d Gram matrix is not clear of zero (the matrix is rank deficient, too ill-conditioned for Cholesky QR, or not finite)", int64(f.Words[1]), int64(f.Words[2]), int64(f.Words[2]))
	}
	return fmt.Errorf("unknown fault %d", f.Words[0])
}

// Plan checks k and returns the steps that run it: its Device method's
// launches. A kernel without one is an error wrapping
// backend.ErrUnsupported.
func Plan(d Device, k backend.Kernel) ([]Step, error) {
	if err := k.Check(); err != nil {
		return nil, err
	}
	dk, ok := k.(backend.DeviceKernel)
	if h, hostOnly := k.(backend.HostOnly); !ok && hostOnly {
		return nil, fmt.Errorf("%w: %s: %s", backend.ErrUnsupported, backend.Name(k), h.NoDevice())
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", backend.ErrUnsupported, backend.Name(k))
	}
	p := planner{d: d}
	if g, ok := d.(interface{ MaxGrid() int }); ok {
		p.maxGrid = g.MaxGrid()
	}
	if w, ok := d.(interface{ Index64() bool }); ok {
		p.index64 = w.Index64()
	}
	// Int32 data is refused, as the CPU backend refuses it, unless the
	// kernel sets its element type itself (Fill, CheckFinite).
	dt, floatErr := backend.FloatType(k)
	if floatErr == nil {
		p.SetType(dt)
	}
	dk.Device(&p)
	if p.sfx == "" {
		return nil, fmt.Errorf("%w: %s of int32 data", backend.ErrUnsupported, backend.Name(k))
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.steps, nil
}

// planner records a kernel's steps: it is the backend.Planner of Device
// methods.
type planner struct {
	d       Device
	maxGrid int  // the Device's bound on a launch's blocks, or 0
	index64 bool // the Device asks for 64-bit index arithmetic throughout
	dt      backend.DType
	sfx     string
	steps   []Step
	err     error
}

var _ backend.Planner = (*planner)(nil)

// SetType sets the element type of the kernels launched after it.
func (p *planner) SetType(dt backend.DType) { p.dt, p.sfx = dt, suffix(dt) }

// words encodes kernel arguments as the words of an argument struct:
// integers and booleans as int64, floats as float64, operands and
// addresses as device addresses, and a struct (package backend's
// argument structs, kernel_args.go) or an array as its fields or elements
// in order.
func (p *planner) words(args ...any) []uint64 {
	w := make([]uint64, 0, len(args))
	for _, a := range args {
		switch v := a.(type) {
		case int:
			w = append(w, uint64(int64(v)))
		case bool:
			if v {
				w = append(w, 1)
			} else {
				w = append(w, 0)
			}
		case float64:
			w = append(w, math.Float64bits(v))
		case uint64:
			w = append(w, v)
		case backend.Operand:
			w = append(w, p.Addr(v))
		default:
			if r := reflect.ValueOf(a); r.Kind() == reflect.Struct || r.Kind() == reflect.Array {
				w = append(w, p.words(elements(r)...)...)
				continue
			}
			if p.err == nil {
				p.err = fmt.Errorf("cudak: kernel argument of type %T", a)
			}
		}
	}
	return w
}

// elements returns the fields of a struct, or the elements of an array,
// in order.
func elements(r reflect.Value) []any {
	n := r.Len
	if r.Kind() == reflect.Struct {
		n = r.NumField
	}
	e := make([]any, n())
	for i := range e {
		if r.Kind() == reflect.Struct {
			e[i] = r.Field(i).Interface()
		} else {
			e[i] = r.Index(i).Interface()
		}
	}
	return e
}

// Addr returns the device address of an operand, 0 for one without a
// buffer (an operand a kernel may go without).
func (p *planner) Addr(op backend.Operand) uint64 {
	if op.Buf == nil {
		return 0
	}
	addr, err := p.d.Addr(op)
	if err != nil && p.err == nil {
		p.err = err
	}
	return addr
}

// Launch adds a launch of name (with the element type's suffix) on grid
// blocks, at least 1 and at most maxGrid.
func (p *planner) Launch(name string, grid int, args ...any) {
	grid = max(1, min(grid, maxGrid))
	if p.maxGrid > 0 {
		grid = min(grid, p.maxGrid)
	}
	p.steps = append(p.steps, Launch{Kernel: name + p.sfx, Grid: grid, Args: p.words(args...)})
}

// Scratch returns device memory kept by the backend.
func (p *planner) Scratch(dt backend.DType, n int) uint64 {
	addr, err := p.d.Scratch(dt, n)
	if err != nil && p.err == nil {
		p.err = err
	}
	return addr
}

// Fault returns the address of the backend's fault words.
func (p *planner) Fault() uint64 { return p.d.Fault() }

// Index32 reports whether indices below the largest of extents may be
// computed in 32 bits (backend.Planner): unless the Device has a method
// Index64() bool that returns true (tests do, to run the kernels' 64-bit
// instances at small sizes), wherever every extent is at most 2^31 - 1.
func (p *planner) Index32(extents ...int) bool {
	if p.index64 {
		return false
	}
	for _, e := range extents {
		if e < 0 || e > math.MaxInt32 {
			return false
		}
	}
	return true
}

// suffix returns the suffix of the kernels' names for data of dt.
func suffix(dt backend.DType) string {
	switch dt {
	case backend.Float32:
		return "_f32"
	case backend.Float64:
		return "_f64"
	}
	return "_i32"
}

// Gemm adds the row-major product in cuBLAS's column-major terms: row-major
// C is column-major C^T = op(B)^T op(A)^T, so the operands and their
// transposes swap.
func (p *planner) Gemm(g backend.DeviceGemm) {
	batch, sa, sb, sc := max(g.Batch, 1), g.StrideA, g.StrideB, g.StrideC
	if batch == 1 {
		sa, sb, sc = 0, 0, 0
	}
	p.steps = append(p.steps, Gemm{F64: p.dt == backend.Float64, DeviceGemm: backend.DeviceGemm{
		TransA: g.TransB, TransB: g.TransA, M: g.N, N: g.M, K: g.K, Alpha: g.Alpha, Beta: g.Beta,
		A: g.B, B: g.A, C: g.C, LDA: g.LDB, LDB: g.LDA, LDC: g.LDC, StrideA: sb, StrideB: sa, StrideC: sc, Batch: batch,
	}})
}

// Potrf adds cuSOLVER's Cholesky factorization.
func (p *planner) Potrf(n int, a, info uint64) {
	p.steps = append(p.steps, Potrf{F64: p.dt == backend.Float64, N: n, A: a, Info: info})
}

// Trsm adds cuBLAS's triangular solve.
func (p *planner) Trsm(m, n int, a, b uint64) {
	p.steps = append(p.steps, Trsm{F64: p.dt == backend.Float64, M: m, N: n, A: a, B: b})
}

// HostBytes returns a Go slice of elements ([]float32, []float64 or []int32)
// as its bytes, and their type: what a device backend copies in and out.
func HostBytes(s any) ([]byte, backend.DType, error) {
	switch v := s.(type) {
	case []float32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)), backend.Float32, nil
	case []float64:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v)), backend.Float64, nil
	case []int32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)), backend.Int32, nil
	}
	return nil, 0, fmt.Errorf("a %T, want []float32, []float64 or []int32", s)
}
