package backend

import "fmt"

// HostKernel is a kernel with its CPU implementation: the CPU backend's
// Prepare calls Host after Check.
type HostKernel interface {
	Kernel
	// Host returns a Func that runs the kernel on the host buffers of its
	// operands (HostBuffer), its loops split across p's threads.
	Host(p *Pool) (Func, error)
}

// DeviceKernel is a kernel with its CUDA implementation: the launches of
// the kernels of internal/cudak/kernels.cu (found there by the names it
// passes to Launch) and the cuBLAS and cuSOLVER calls that compute it.
type DeviceKernel interface {
	Kernel
	// Device adds the kernel's launches to p.
	Device(p Planner)
}

// defined is what every kernel of this package is: checked, with its CPU
// and its CUDA implementation.
type defined interface {
	HostKernel
	DeviceKernel
}

//go:generate go run ./gen

// DeviceThreads is the block size of every launch (NT in kernels.cu).
const DeviceThreads = 256

// Planner records the steps of a kernel on a CUDA device (package
// internal/cudak implements it). The element type of the kernels launched
// is the kernel's float type unless SetType changes it.
type Planner interface {
	// SetType sets the element type of the kernels launched after it.
	SetType(dt DType)
	// Launch adds a launch of the CUDA kernel name (with the element
	// type's suffix) on grid blocks (at least 1, at most 4096) of
	// DeviceThreads threads. args are the fields of its argument struct:
	// ints, bools, float64s, Operands (their device addresses; no buffer
	// is 0) and device addresses (uint64), or its Go struct (of
	// kernel_args.go, which gen writes with kernels.cu's struct
	// from one table), whose fields in order are those values.
	Launch(name string, grid int, args ...any)
	// Scratch returns the address of n elements of dt of device memory
	// that the backend keeps for this kernel, zero before its first run.
	Scratch(dt DType, n int) uint64
	// Addr returns the device address of an operand.
	Addr(op Operand) uint64
	// Fault returns the address of the backend's fault words, where
	// kernels record the first bad row index or failed factorization.
	Fault() uint64
	// Gemm adds a matrix product on device addresses (cuBLAS).
	Gemm(g DeviceGemm)
	// Potrf adds the Cholesky factorization of the N x N matrix at a in
	// place (cuSOLVER): R with A = R^T R in its row-major upper triangle;
	// the int32 at info gets 0 or the order of the first minor that is
	// not positive.
	Potrf(n int, a, info uint64)
	// Trsm adds B = B R^-1 for the row-major M x N matrix at b and the
	// upper triangle R of the N x N matrix at a (cuBLAS).
	Trsm(m, n int, a, b uint64)
	// Index32 reports whether a kernel whose indices (and signed offsets)
	// are all below the largest of extents may compute them in 32 bits:
	// every extent at most 2^31 - 1, unless the backend asks for 64-bit
	// arithmetic throughout (a test of both instances).
	Index32(extents ...int) bool
}

// indexed returns name, or its instance with 32-bit index arithmetic
// (name_x32, see kernels.cu) where p allows it for extents.
func indexed(p Planner, name string, extents ...int) string {
	if p.Index32(extents...) {
		return name + "_x32"
	}
	return name
}

// DeviceGemm is Gemm on device addresses: C = Alpha op(A) op(B) + Beta C,
// row-major, for Batch matrices (0 or 1: one, strides unused).
type DeviceGemm struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float64
	A, B, C                   uint64
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int
	Batch                     int
}

// elementwise adds a launch whose threads stride over n items; nothing
// when n is 0.
func elementwise(p Planner, name string, n int, args ...any) {
	if n > 0 {
		p.Launch(name, (n+DeviceThreads-1)/DeviceThreads, args...)
	}
}

// alongAxis adds a launch of a kernel along the middle axis of (outer,
// axis, inner) arrays: with inner 1 the axis is a row of consecutive
// elements, and name+"_rows" takes a block per row; otherwise name takes a
// thread per lane (o, in).
func alongAxis(p Planner, name string, outer, inner int, args ...any) {
	if inner == 1 {
		p.Launch(name+"_rows", outer, args...)
		return
	}
	elementwise(p, name, outer*inner, args...)
}

// FloatType returns the float type of k's data: that of its first float
// operand. Int32 data is an error wrapping ErrUnsupported.
func FloatType(k Kernel) (DType, error) {
	for _, op := range Operands(k) {
		if dt := DTypeOf(op); dt == Float32 || dt == Float64 {
			return dt, nil
		}
	}
	return 0, fmt.Errorf("%w: int32 data", ErrUnsupported)
}

// Float is the element type of the float kernels.
type Float interface{ float32 | float64 }

// hostData returns the elements of a host buffer from op's offset: the
// slice aliases the buffer.
func hostData[T Float | int32](op Operand) []T {
	return op.Buf.(HostBuffer).Host().([]T)[op.Off:]
}

// onFloats returns the instance of a host kernel for the float type of
// k's data.
func onFloats[K Kernel](p *Pool, k K, f32 func(*Pool, K) Func, f64 func(*Pool, K) Func) (Func, error) {
	dt, err := FloatType(k)
	if err != nil {
		return nil, err
	}
	if dt == Float64 {
		return f64(p, k), nil
	}
	return f32(p, k), nil
}
