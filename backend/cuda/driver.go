//go:build gpu

package cuda

// The driver and cuBLAS calls the backend makes, each one C call that makes
// the backend's context current first: a goroutine may move between OS
// threads between two calls, and a CUDA context is current per thread.
// gorgonia.org/cu's root package is not used here: its handles are opaque
// to other cgo packages and its init exits the process where cuInit fails
// (the old cuda build patches that out); its nvrtc package compiles the
// kernels.

// #cgo LDFLAGS: -lcuda -lcublas -lcusolver
// #include "driver.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// result turns a wrapper's return code into an error naming what failed.
func result(what string, r C.int) error {
	if r == 0 {
		return nil
	}
	if r >= 200000 {
		return fmt.Errorf("cuda: %s: cuSOLVER status %d", what, int(r)-200000)
	}
	if r >= 100000 {
		return fmt.Errorf("cuda: %s: cuBLAS status %d", what, int(r)-100000)
	}
	return fmt.Errorf("cuda: %s: %s (%d)", what, C.GoString(C.on_error_name(r)), int(r))
}

// hostMem is pinned host memory of the backend's context.
type hostMem struct {
	p     unsafe.Pointer
	bytes int
}

func (m hostMem) slice() []byte { return unsafe.Slice((*byte)(m.p), m.bytes) }
