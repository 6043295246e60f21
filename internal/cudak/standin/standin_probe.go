//go:build cgo

package standin

// The small C and Go helpers the package's tests call (cgo is not allowed
// in _test.go files): a session on the model's device, and the driver
// calls the tests make, with their CUresult.

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../cuapi.h"
#define PROBE_DECLARE(lib, name, ret, params) ret name params;
ON_API(PROBE_DECLARE)
void standin_enable_test_kernels(int on);
CUresult standin_test_fail(CUstream s, CUresult r);
static CUresult probe_launch_params(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, CUstream s, void *args) {
  void *params[1] = {args};
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, NULL);
}
static CUresult probe_launch_extra(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared, CUstream s, void *args, size_t size) {
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, NULL, extra);
}
static void probe_peek(unsigned long long p, void *out, size_t n) { memcpy(out, (const void *)(uintptr_t)p, n); }
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// cuResult is a CUresult.
type cuResult int

func (r cuResult) String() string {
	var s *C.char
	if C.cuGetErrorName(C.CUresult(r), &s) != 0 || s == nil {
		return fmt.Sprintf("CUresult %d", int(r))
	}
	return C.GoString(s)
}

func (r cuResult) err(what string) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %v", what, r)
}

// probe is a session on device 0: its primary context and a stream. Each
// of its calls makes the context current on its OS thread first, as
// backend/cuda does inside each C call.
type probe struct {
	dev    C.CUdevice
	ctx    C.CUcontext
	stream C.CUstream
}

// newProbe configures the model with c and opens a session.
func newProbe(c Config) (*probe, error) {
	if err := Configure(c); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := &probe{}
	if err := cuResult(C.cuInit(0)).err("cuInit"); err != nil {
		return nil, err
	}
	if err := cuResult(C.cuDeviceGet(&p.dev, 0)).err("cuDeviceGet"); err != nil {
		return nil, err
	}
	if err := cuResult(C.cuDevicePrimaryCtxRetain(&p.ctx, p.dev)).err("cuDevicePrimaryCtxRetain"); err != nil {
		return nil, err
	}
	if err := cuResult(C.cuCtxSetCurrent(p.ctx)).err("cuCtxSetCurrent"); err != nil {
		p.close()
		return nil, err
	}
	if err := cuResult(C.cuStreamCreate(&p.stream, C.CU_STREAM_NON_BLOCKING)).err("cuStreamCreate"); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// close destroys the stream and releases the context.
func (p *probe) close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.cuCtxSetCurrent(p.ctx)
	if p.stream != nil {
		if err := cuResult(C.cuStreamDestroy_v2(p.stream)).err("cuStreamDestroy"); err != nil {
			return err
		}
	}
	return cuResult(C.cuDevicePrimaryCtxRelease_v2(p.dev)).err("cuDevicePrimaryCtxRelease")
}

// on runs call with the context current on the calling OS thread.
func (p *probe) on(call func() C.CUresult) cuResult {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := C.cuCtxSetCurrent(p.ctx); r != 0 {
		return cuResult(r)
	}
	return cuResult(call())
}

func (p *probe) alloc(n int) (uint64, cuResult) {
	var d C.CUdeviceptr
	r := p.on(func() C.CUresult { return C.cuMemAlloc_v2(&d, C.size_t(n)) })
	return uint64(d), r
}

func (p *probe) free(d uint64) cuResult {
	return p.on(func() C.CUresult { return C.cuMemFree_v2(C.CUdeviceptr(d)) })
}

// hostAlloc returns n bytes of pinned memory.
func (p *probe) hostAlloc(n int) ([]byte, cuResult) {
	var h unsafe.Pointer
	r := p.on(func() C.CUresult { return C.cuMemHostAlloc(&h, C.size_t(n), 0) })
	if r != 0 {
		return nil, r
	}
	return unsafe.Slice((*byte)(h), n), 0
}

func (p *probe) hostFree(b []byte) cuResult {
	return p.on(func() C.CUresult { return C.cuMemFreeHost(unsafe.Pointer(&b[0])) })
}

func (p *probe) htod(d uint64, src []byte) cuResult {
	return p.on(func() C.CUresult {
		return C.cuMemcpyHtoDAsync_v2(C.CUdeviceptr(d), unsafe.Pointer(&src[0]), C.size_t(len(src)), p.stream)
	})
}

func (p *probe) dtoh(dst []byte, d uint64) cuResult {
	return p.on(func() C.CUresult {
		return C.cuMemcpyDtoHAsync_v2(unsafe.Pointer(&dst[0]), C.CUdeviceptr(d), C.size_t(len(dst)), p.stream)
	})
}

func (p *probe) memset(d uint64, v byte, n int) cuResult {
	return p.on(func() C.CUresult { return C.cuMemsetD8Async(C.CUdeviceptr(d), C.uchar(v), C.size_t(n), p.stream) })
}

func (p *probe) sync() cuResult {
	return p.on(func() C.CUresult { return C.cuStreamSynchronize(p.stream) })
}

func (p *probe) memInfo() (free, total uint64, r cuResult) {
	var f, t C.size_t
	r = p.on(func() C.CUresult { return C.cuMemGetInfo_v2(&f, &t) })
	return uint64(f), uint64(t), r
}

// peek reads n bytes at address a directly (device memory is host memory).
func peek(a uint64, n int) []byte {
	b := make([]byte, n)
	C.probe_peek(C.ulonglong(a), unsafe.Pointer(&b[0]), C.size_t(n))
	return b
}

func (p *probe) eventCreate(flags int) (C.CUevent, cuResult) {
	var e C.CUevent
	r := p.on(func() C.CUresult { return C.cuEventCreate(&e, C.uint(flags)) })
	return e, r
}

func (p *probe) record(e C.CUevent) cuResult {
	return p.on(func() C.CUresult { return C.cuEventRecord(e, p.stream) })
}

func (p *probe) eventSync(e C.CUevent) cuResult {
	return p.on(func() C.CUresult { return C.cuEventSynchronize(e) })
}

func (p *probe) elapsed(a, b C.CUevent) (float32, cuResult) {
	var ms C.float
	r := p.on(func() C.CUresult { return C.cuEventElapsedTime_v2(&ms, a, b) })
	return float32(ms), r
}

func (p *probe) eventDestroy(e C.CUevent) cuResult {
	return p.on(func() C.CUresult { return C.cuEventDestroy_v2(e) })
}

// load loads image (a NUL is appended).
func (p *probe) load(image []byte) (C.CUmodule, cuResult) {
	var m C.CUmodule
	buf := append(append([]byte{}, image...), 0)
	r := p.on(func() C.CUresult { return C.cuModuleLoadData(&m, unsafe.Pointer(&buf[0])) })
	return m, r
}

func (p *probe) unload(m C.CUmodule) cuResult {
	return p.on(func() C.CUresult { return C.cuModuleUnload(m) })
}

func (p *probe) function(m C.CUmodule, name string) (C.CUfunction, cuResult) {
	var f C.CUfunction
	s := C.CString(name)
	defer C.free(unsafe.Pointer(s))
	r := p.on(func() C.CUresult { return C.cuModuleGetFunction(&f, m, s) })
	return f, r
}

// shape is a launch's grid and block dimensions and dynamic shared memory.
type shape struct {
	grid, block [3]uint32
	shared      uint32
}

func (p *probe) launch(f C.CUfunction, s shape, args []uint64) cuResult {
	return p.on(func() C.CUresult {
		return C.probe_launch_params(f, C.uint(s.grid[0]), C.uint(s.grid[1]), C.uint(s.grid[2]),
			C.uint(s.block[0]), C.uint(s.block[1]), C.uint(s.block[2]), C.uint(s.shared), p.stream,
			unsafe.Pointer(&args[0]))
	})
}

// launchExtra passes args through extra, claiming size bytes.
func (p *probe) launchExtra(f C.CUfunction, s shape, args []uint64, size int) cuResult {
	return p.on(func() C.CUresult {
		return C.probe_launch_extra(f, C.uint(s.grid[0]), C.uint(s.grid[1]), C.uint(s.grid[2]),
			C.uint(s.block[0]), C.uint(s.block[1]), C.uint(s.block[2]), C.uint(s.shared), p.stream,
			unsafe.Pointer(&args[0]), C.size_t(size))
	})
}

func enableTestKernels(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.standin_enable_test_kernels(C.int(v))
}

// noContextCalls makes calls that need a context, each with valid
// arguments otherwise, and returns their results by name.
func (p *probe) noContextCalls() map[string]cuResult {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.cuCtxSetCurrent(nil)
	defer C.cuCtxSetCurrent(p.ctx)
	var d C.CUdeviceptr
	var s C.CUstream
	var e C.CUevent
	var m C.CUmodule
	var h unsafe.Pointer
	var f, t C.size_t
	img := []byte(".version 8.0\n\x00")
	return map[string]cuResult{
		"cuMemAlloc_v2":       cuResult(C.cuMemAlloc_v2(&d, 64)),
		"cuMemHostAlloc":      cuResult(C.cuMemHostAlloc(&h, 64, 0)),
		"cuMemGetInfo_v2":     cuResult(C.cuMemGetInfo_v2(&f, &t)),
		"cuStreamCreate":      cuResult(C.cuStreamCreate(&s, 0)),
		"cuStreamSynchronize": cuResult(C.cuStreamSynchronize(nil)),
		"cuEventCreate":       cuResult(C.cuEventCreate(&e, 0)),
		"cuModuleLoadData":    cuResult(C.cuModuleLoadData(&m, unsafe.Pointer(&img[0]))),
		"cuMemsetD8Async":     cuResult(C.cuMemsetD8Async(1<<20, 0, 1, nil)),
	}
}

// initResult is cuInit(0).
func initResult() cuResult { return cuResult(C.cuInit(0)) }

func deviceCount() (int, cuResult) {
	var n C.int
	r := cuResult(C.cuDeviceGetCount(&n))
	return int(n), r
}

// fail enqueues an item that fails with r.
func (p *probe) fail(r cuResult) cuResult {
	return p.on(func() C.CUresult { return C.standin_test_fail(p.stream, C.CUresult(r)) })
}
