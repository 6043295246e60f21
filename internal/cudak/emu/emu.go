//go:build cgo

package emu

// #cgo CXXFLAGS: -std=c++20 -O1
// #cgo LDFLAGS: -lstdc++
// #include <stdlib.h>
// #include "emu_c.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/cudak"
)

// Backend runs kernels through the emulator. Its memory is C memory, so
// that addresses stay put.
type Backend struct {
	faulted error // the first fault a wait met; every later one reports it
	fault   *[4]uint64
	scratch []unsafe.Pointer
	cmem    []unsafe.Pointer // launch names and argument structs
	closed  bool
}

var _ backend.Backend = (*Backend)(nil)

// New returns an emulated device.
func New() *Backend {
	return &Backend{fault: (*[4]uint64)(C.calloc(4, 8))}
}

// Name returns "cuda emulator (host)".
func (b *Backend) Name() string { return "cuda emulator (host)" }

type buffer struct {
	dt backend.DType
	n  int
	p  unsafe.Pointer
}

func (h *buffer) DType() backend.DType { return h.dt }
func (h *buffer) Len() int             { return h.n }

// Alloc returns zeroed C memory.
func (b *Backend) Alloc(dt backend.DType, n int) (backend.Buffer, error) {
	if n < 0 || dt < backend.Float32 || dt > backend.Int32 {
		return nil, fmt.Errorf("emu: buffer of %d elements of %v", n, dt)
	}
	return &buffer{dt: dt, n: n, p: C.calloc(C.size_t(max(n, 1)), C.size_t(dt.Size()))}, nil
}

// Free releases a buffer.
func (b *Backend) Free(buf backend.Buffer) error {
	h, err := own(buf)
	if err != nil {
		return err
	}
	C.free(h.p)
	h.p = nil
	return nil
}

func own(buf backend.Buffer) (*buffer, error) {
	h, ok := buf.(*buffer)
	if !ok || h.p == nil {
		return nil, fmt.Errorf("emu: a %T is not a live buffer of this backend", buf)
	}
	return h, nil
}

// bytes returns n elements of h from off as bytes, after checking dt.
func bytes(h *buffer, off, n int, dt backend.DType) ([]byte, error) {
	if h.dt != dt {
		return nil, fmt.Errorf("emu: %v data for a buffer of %v", dt, h.dt)
	}
	if off < 0 || off+n > h.n {
		return nil, fmt.Errorf("emu: %d elements at %d of a buffer of %d", n, off, h.n)
	}
	return unsafe.Slice((*byte)(unsafe.Add(h.p, off*dt.Size())), n*dt.Size()), nil
}

// hostBytes returns a Go slice's elements as bytes and their type.
func hostBytes(s any) ([]byte, backend.DType, error) {
	b, dt, err := cudak.HostBytes(s)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", "emu", err)
	}
	return b, dt, nil
}

// CopyIn copies src into dst from element off.
func (b *Backend) CopyIn(dst backend.Buffer, off int, src any) error {
	h, err := own(dst)
	if err != nil {
		return err
	}
	s, dt, err := hostBytes(src)
	if err != nil {
		return err
	}
	d, err := bytes(h, off, len(s)/dt.Size(), dt)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// CopyOut copies elements of src from off into dst, reporting a fault of
// an earlier kernel first.
func (b *Backend) CopyOut(dst any, src backend.Buffer, off int) error {
	if err := b.Sync(); err != nil {
		return err
	}
	h, err := own(src)
	if err != nil {
		return err
	}
	d, dt, err := hostBytes(dst)
	if err != nil {
		return err
	}
	s, err := bytes(h, off, len(d)/dt.Size(), dt)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// Sync reports a fault a kernel met (a bad row index, a failed Q factor),
// and from then on every time.
func (b *Backend) Sync() error {
	if b.faulted != nil {
		return b.faulted
	}
	if err := (cudak.Fault{Words: *b.fault}).Err(); err != nil {
		// As on the GPU, the fault stays: later waits report it too.
		b.faulted = fmt.Errorf("emu: %w (the device's data since then is not to be trusted; close the backend)", err)
	}
	return b.faulted
}

// Close frees the backend's own memory; buffers stay the caller's to free.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	for _, p := range append(b.scratch, b.cmem...) {
		C.free(p)
	}
	C.free(unsafe.Pointer(b.fault))
	return nil
}

// Addr returns an operand's address.
func (b *Backend) Addr(op backend.Operand) (uint64, error) {
	h, err := own(op.Buf)
	if err != nil {
		return 0, err
	}
	return uint64(uintptr(h.p)) + uint64(op.Off*h.dt.Size()), nil
}

// Scratch returns zeroed memory kept until Close.
func (b *Backend) Scratch(dt backend.DType, n int) (uint64, error) {
	p := C.calloc(C.size_t(max(n, 1)), C.size_t(dt.Size()))
	b.scratch = append(b.scratch, p)
	return uint64(uintptr(p)), nil
}

// Fault returns the address of the fault words.
func (b *Backend) Fault() uint64 { return uint64(uintptr(unsafe.Pointer(b.fault))) }

// Prepare plans k and returns a Func that runs its steps.
func (b *Backend) Prepare(k backend.Kernel) (backend.Func, error) {
	for _, op := range k.Operands() {
		if op.Buf != nil {
			if _, err := own(op.Buf); err != nil {
				return nil, fmt.Errorf("emu: %s: %w", k.Name(), err)
			}
		}
	}
	steps, err := cudak.Plan(b, k)
	if err != nil {
		return nil, fmt.Errorf("emu: %s: %w", k.Name(), err)
	}
	fns := make([]backend.Func, len(steps))
	for i, s := range steps {
		switch s := s.(type) {
		case cudak.Launch:
			name := C.CString(s.Kernel)
			args := C.malloc(C.size_t(8 * max(len(s.Args), 1)))
			copy(unsafe.Slice((*uint64)(args), len(s.Args)), s.Args)
			b.cmem = append(b.cmem, unsafe.Pointer(name), args)
			grid, words := s.Grid, len(s.Args)
			fns[i] = func() error {
				switch C.emu_launch(name, C.int(grid), cudak.Threads, args, C.longlong(words)) {
				case 1:
					return fmt.Errorf("emu: no kernel %s", C.GoString(name))
				case 2:
					return fmt.Errorf("emu: %d argument words do not fill kernel %s's argument struct", words, C.GoString(name))
				}
				return nil
			}
		case cudak.Gemm:
			fns[i] = func() error {
				C.emu_gemm(cbool(s.F64), cbool(s.TransA), cbool(s.TransB), C.longlong(s.M), C.longlong(s.N), C.longlong(s.K),
					C.double(s.Alpha), C.ulonglong(s.A), C.longlong(s.LDA), C.longlong(s.StrideA), C.ulonglong(s.B), C.longlong(s.LDB), C.longlong(s.StrideB),
					C.double(s.Beta), C.ulonglong(s.C), C.longlong(s.LDC), C.longlong(s.StrideC), C.longlong(s.Batch))
				return nil
			}
		case cudak.Potrf:
			fns[i] = func() error {
				C.emu_potrf(cbool(s.F64), C.longlong(s.N), C.ulonglong(s.A), C.ulonglong(s.Info))
				return nil
			}
		case cudak.Trsm:
			// B R^-1 in row-major terms is, column-major, (R^T)^-1 B^T: a
			// left solve with the lower R^T that R's buffer holds.
			fns[i] = func() error {
				C.emu_trsm(cbool(s.F64), C.longlong(s.N), C.longlong(s.M), C.ulonglong(s.A), C.ulonglong(s.B))
				return nil
			}
		default:
			return nil, errors.New("emu: unknown step")
		}
	}
	return backend.Sequence(fns), nil
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}
