//go:build cgo

package cuda

// The driver, cuBLAS, cuSOLVER and NVRTC calls the backend makes, each one
// C call (driver.c) through the function table that load.go fills at run
// time, which makes the backend's context current first: a goroutine may
// move between OS threads between two calls, and a CUDA context is current
// per thread. No CUDA header or library is needed to build it.

// #include "driver.h"
import "C"

import "unsafe"

// hostMem is pinned host memory of the backend's context.
type hostMem struct {
	p     unsafe.Pointer
	bytes int
}

func (m hostMem) slice() []byte { return unsafe.Slice((*byte)(m.p), m.bytes) }
