//go:build cgo

package standin

// #cgo CXXFLAGS: -std=c++20 -O1
// // No -lstdc++: the go command links with g++ (the package has C++ files),
// // which adds libstdc++ itself, and an explicit one would defeat
// // -static-libstdc++ (scripts/gpu_check.sh pack).
// #include <stdlib.h>
// #include "standin_c.h"
import "C"

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"github.com/orthonet/orthonet/internal/cudak"
)

// Available reports whether the package was built with the model (cgo).
const Available = true

var (
	mu  sync.Mutex
	cur Config
	// jit holds the libnvJitLink copies opened since the last Configure,
	// by soname: the path opened, as the process's loader keeps them.
	jit map[string]string
)

func init() {
	src := C.CString(cudak.Source)
	C.standin_set_source(src, C.size_t(len(cudak.Source)))
	C.free(unsafe.Pointer(src))
	if err := Configure(DefaultConfig()); err != nil {
		panic(err) // the default configuration is valid and nothing is retained yet
	}
}

// Configure sets the process-wide model. It fails for a configuration that
// makes no sense, and while a primary context is still retained.
func Configure(c Config) error {
	if err := c.check(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	folder := C.CString(c.Folder)
	defer C.free(unsafe.Pointer(folder))
	builtins := 0
	if c.BuiltinsInPath {
		builtins = 1
	}
	if C.standin_configure(C.int(c.Driver), C.int(c.NVRTC.Major), C.int(c.NVRTC.Minor), C.int(c.CUBLAS),
		C.int(c.CUSOLVER), C.int(c.Devices), C.int(c.Major), C.int(c.Minor), C.longlong(c.Memory), folder,
		C.int(builtins), C.int(c.Order), C.uint64_t(c.Seed)) != 0 {
		return errors.New("standin: configure: a primary context is still retained (release it first)")
	}
	cur = c
	cur.Lacks = slices.Clone(c.Lacks)
	jit = map[string]string{}
	return nil
}

// Current returns the model's configuration.
func Current() Config {
	mu.Lock()
	defer mu.Unlock()
	c := cur
	c.Lacks = slices.Clone(cur.Lacks)
	return c
}

// Open is the model's dlopen: the library that path names under the
// current configuration, or dlopen's error when it is not found there.
func Open(path string) (Lib, error) {
	mu.Lock()
	defer mu.Unlock()
	lib, builtins, ok := resolve(cur, path)
	if !ok {
		return LibNone, openError(path)
	}
	if err := needs(cur, path, lib, jit); err != nil {
		return LibNone, err
	}
	if builtins {
		C.standin_mark_builtins()
	}
	if name := jitLinkName(cur); name != "" && filepath.Base(path) == name {
		if _, ok := jit[name]; !ok {
			jit[name] = path // the first copy opened stays, as with dlopen
		}
	}
	return lib, nil
}

// Sym is the model's dlsym: the C function of that name in library l, or
// nil when l has no such function.
func Sym(l Lib, name string) unsafe.Pointer {
	mu.Lock()
	lacks := slices.Contains(cur.Lacks, name)
	mu.Unlock()
	if l < LibCUDA || l > LibCUSOLVER || lacks {
		return nil
	}
	s := C.CString(name)
	defer C.free(unsafe.Pointer(s))
	return C.standin_sym(C.int(l), s)
}

// HostWaits returns how many calls into the model so far made the host
// wait for a stream's work that had not run yet (cuStreamSynchronize,
// cuEventSynchronize, a copy to pageable host memory, and the frees and
// unloads that wait for the device), in every context of the process. The
// model runs a stream's work only when the host waits for it, so the count
// is at least what a GPU would block on: tests difference it around the
// work they measure.
func HostWaits() uint64 { return uint64(C.standin_host_waits()) }
