//go:build gpu

package cuda

// #include <stdlib.h>
// #include "driver.h"
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/cudak"
	"gorgonia.org/cu/nvrtc"
)

// Options configure a Backend.
type Options struct {
	// Device is the ordinal of the GPU to use.
	Device int
	// Profile times every kernel on the device with CUDA events (see
	// KernelTimes); it adds two event records to each.
	Profile bool
}

// Backend runs kernels on one GPU, in order, on one stream. It is not safe
// for concurrent use.
type Backend struct {
	dev    C.CUdevice
	ctx    C.CUcontext
	stream C.CUstream
	blas   C.cublasHandle_t
	solver unsafe.Pointer // cuSOLVER's dense handle, made at the first Q factor
	name   string
	mod    C.CUmodule
	funcs  map[string]C.CUfunction

	fault     C.CUdeviceptr         // the row kernels' four fault words
	faultHost hostMem               // their copy, read at every CopyOut and Sync
	stage     [stageSlots]stageSlot // pinned buffers that CopyIn goes up through
	big       stageSlot             // the one for copies over maxStaged bytes
	next      int
	out       hostMem // pinned buffer that CopyOut comes down through
	scratch   []C.CUdeviceptr
	cmem      []unsafe.Pointer // kernel names and argument structs
	live      int              // bytes in buffers not yet freed
	closed    bool

	faulted error // the first fault a wait met; every later one reports it

	profile bool
	timed   []timed // each prepared kernel's events and time, when profiling
	pending []int   // the timed kernels run since the last wait
	span    time.Duration
}

// timed is a prepared kernel's timing: events around its last run and the
// device time of all its runs.
type timed struct {
	label      string
	start, end C.CUevent
	count      int
	total      time.Duration
}

// stageSlots is how many pinned buffers CopyIn cycles through. A slot is
// reused only after the copy out of it has run, so the ring must outlast the
// copies of a few steps (inputs, step sizes, each RSDM weight's rows), or
// CopyIn would wait for the kernels queued before an earlier copy.
const stageSlots = 32

// maxStaged bounds the copies that go through the ring (so that its slots
// stay small); a larger one goes through one buffer of its own, waiting for
// the previous large copy.
const maxStaged = 1 << 20

// stageSlot is a pinned buffer and the event recorded after the last copy
// out of it, which the next use waits for.
type stageSlot struct {
	mem  hostMem
	done C.CUevent
}

var _ backend.Backend = (*Backend)(nil)

// Built reports whether this binary has the CUDA backend (build tag gpu).
const Built = true

// ErrNotBuilt is the error of a binary without the CUDA backend; this one
// has it.
var ErrNotBuilt = errors.New("cuda: this binary was built without CUDA support")

// Probe returns GPU 0 as the driver describes it, or why there is none (no
// driver, no device).
func Probe() (Device, error) {
	var count, major, minor, driver C.int
	var mem C.size_t
	name := make([]C.char, 256)
	if err := result("probing device 0", C.on_probe(0, &count, &major, &minor, &name[0], C.int(len(name)), &mem, &driver)); err != nil {
		return Device{}, err
	}
	return Device{Name: C.GoString(&name[0]), Count: int(count), Major: int(major), Minor: int(minor), TotalMemory: int64(mem), DriverVersion: int(driver)}, nil
}

// New starts a backend on GPU o.Device: it makes the device's primary
// context current, creates a stream and a cuBLAS handle on it, and compiles
// the kernels for the device with NVRTC.
func New(o Options) (backend.Backend, error) {
	b := &Backend{funcs: map[string]C.CUfunction{}, profile: o.Profile}
	var major, minor C.int
	name := make([]C.char, 256)
	if err := result("starting device "+fmt.Sprint(o.Device), C.on_init(C.int(o.Device), &b.dev, &b.ctx, &b.stream, &b.blas, &major, &minor, &name[0], C.int(len(name)))); err != nil {
		return nil, err
	}
	b.name = fmt.Sprintf("cuda (device %d: %s, compute capability %d.%d)", o.Device, C.GoString(&name[0]), major, minor)
	ptx, err := cachedPTX(int(major), int(minor))
	if err == nil {
		err = b.load(ptx)
	}
	if err == nil {
		err = b.start()
	}
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

// CompilePTX compiles the kernels with NVRTC for compute capability
// major.minor and returns the PTX. It needs no GPU.
func CompilePTX(major, minor int) (string, error) {
	arch := fmt.Sprintf("compute_%d%d", major, minor)
	prog, err := nvrtc.CreateProgram(cudak.Source, "kernels.cu")
	if err != nil {
		return "", fmt.Errorf("cuda: NVRTC: %w", err)
	}
	defer prog.Destroy()
	opts := append([]string{"--gpu-architecture=" + arch}, cudak.CompileOptions...)
	if err := prog.Compile(opts...); err != nil {
		log, _ := prog.GetLog()
		return "", fmt.Errorf("cuda: compiling the kernels for %s: %w\n%s", arch, err, log)
	}
	ptx, err := prog.GetPTX()
	if err != nil {
		return "", fmt.Errorf("cuda: NVRTC: %w", err)
	}
	return strings.TrimRight(ptx, "\x00"), nil
}

// cachedPTX returns the kernels' PTX for compute capability major.minor
// from the user's cache folder (orthonet/ptx), compiling and caching it
// when it is not there: the file's name is the SHA-256 of the source, the
// options, the architecture and NVRTC's version, so that a change of any
// compiles afresh. A cache that cannot be read or written is skipped.
func cachedPTX(major, minor int) (string, error) {
	vmaj, vmin, _ := nvrtc.Version()
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00%d.%d\x00%d.%d", cudak.Source, cudak.CompileOptions, major, minor, vmaj, vmin)
	var path string
	if dir, err := os.UserCacheDir(); err == nil {
		path = filepath.Join(dir, "orthonet", "ptx", hex.EncodeToString(h.Sum(nil))+".ptx")
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b), nil
		}
	}
	ptx, err := CompilePTX(major, minor)
	if err != nil || path == "" {
		return ptx, err
	}
	if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
		if f, err := os.CreateTemp(filepath.Dir(path), ".ptx-*"); err == nil {
			_, werr := f.WriteString(ptx)
			if cerr := f.Close(); werr == nil && cerr == nil {
				_ = os.Rename(f.Name(), path)
			}
			_ = os.Remove(f.Name()) // gone already after a rename
		}
	}
	return ptx, nil
}

func (b *Backend) load(ptx string) error {
	s := C.CString(ptx)
	defer C.free(unsafe.Pointer(s))
	return result("loading the kernels (a driver older than NVRTC refuses its PTX)", C.on_load(b.ctx, s, &b.mod))
}

// start allocates the fault words and the pinned staging buffers.
func (b *Backend) start() error {
	if err := result("allocating the fault words", C.on_alloc(b.ctx, b.stream, 32, &b.fault)); err != nil {
		return err
	}
	var err error
	if b.faultHost, err = b.hostAlloc(32); err != nil {
		return err
	}
	for i := range b.stage {
		if err := result("creating an event", C.on_event(b.ctx, &b.stage[i].done)); err != nil {
			return err
		}
	}
	if err := result("creating an event", C.on_event(b.ctx, &b.big.done)); err != nil {
		return err
	}
	return nil
}

func (b *Backend) hostAlloc(bytes int) (hostMem, error) {
	var p unsafe.Pointer
	if err := result(fmt.Sprintf("allocating %d bytes of pinned host memory", bytes), C.on_host_alloc(b.ctx, C.size_t(bytes), &p)); err != nil {
		return hostMem{}, err
	}
	return hostMem{p: p, bytes: bytes}, nil
}

func (b *Backend) hostFree(m *hostMem) error {
	if m.p == nil {
		return nil
	}
	err := result("freeing pinned host memory", C.on_host_free(b.ctx, m.p))
	*m = hostMem{}
	return err
}

// startSolver makes the cuSOLVER handle, once.
func (b *Backend) startSolver() error {
	if b.solver != nil {
		return nil
	}
	return result("starting cuSOLVER", C.on_solver(b.ctx, b.stream, &b.solver))
}

// Name says which device this is.
func (b *Backend) Name() string { return b.name }

type buffer struct {
	b  *Backend
	dt backend.DType
	n  int
	p  C.CUdeviceptr
}

func (h *buffer) DType() backend.DType { return h.dt }
func (h *buffer) Len() int             { return h.n }

func (b *Backend) own(buf backend.Buffer) (*buffer, error) {
	h, ok := buf.(*buffer)
	if !ok || h.b != b || h.p == 0 {
		return nil, fmt.Errorf("cuda: a %T is not a live buffer of this backend", buf)
	}
	return h, nil
}

// Alloc returns a zeroed buffer of device memory.
func (b *Backend) Alloc(dt backend.DType, n int) (backend.Buffer, error) {
	if n < 0 || dt < backend.Float32 || dt > backend.Int32 {
		return nil, fmt.Errorf("cuda: buffer of %d elements of %v", n, dt)
	}
	h := &buffer{b: b, dt: dt, n: n}
	bytes := max(n, 1) * dt.Size()
	if err := result(fmt.Sprintf("allocating %d bytes", bytes), C.on_alloc(b.ctx, b.stream, C.size_t(bytes), &h.p)); err != nil {
		return nil, err
	}
	b.live += bytes
	return h, nil
}

// Free releases a buffer's device memory.
func (b *Backend) Free(buf backend.Buffer) error {
	h, err := b.own(buf)
	if err != nil {
		return err
	}
	err = result("freeing a buffer", C.on_free(b.ctx, h.p))
	h.p = 0
	b.live -= max(h.n, 1) * h.dt.Size()
	return err
}

// Live returns the bytes of device memory in buffers not yet freed.
func (b *Backend) Live() int { return b.live }

// MemInfo returns the device's free and total memory in bytes.
func (b *Backend) MemInfo() (free, total int, err error) {
	var f, t C.size_t
	err = result("reading memory use", C.on_mem_info(b.ctx, &f, &t))
	return int(f), int(t), err
}

// hostBytes returns a Go slice's elements as bytes and their type.
func hostBytes(s any) ([]byte, backend.DType, error) {
	b, dt, err := cudak.HostBytes(s)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", "cuda", err)
	}
	return b, dt, nil
}

// span checks n elements of type dt at off in h and returns their address.
func span(h *buffer, off, n int, dt backend.DType) (C.CUdeviceptr, error) {
	if h.dt != dt {
		return 0, fmt.Errorf("cuda: %v data for a buffer of %v", dt, h.dt)
	}
	if off < 0 || off+n > h.n {
		return 0, fmt.Errorf("cuda: %d elements at %d of a buffer of %d", n, off, h.n)
	}
	return h.p + C.CUdeviceptr(off*dt.Size()), nil
}

// CopyIn copies src into dst from element off. The copy goes up
// asynchronously, through a pinned staging buffer: CopyIn returns once src
// may be reused.
func (b *Backend) CopyIn(dst backend.Buffer, off int, src any) error {
	h, err := b.own(dst)
	if err != nil {
		return err
	}
	s, dt, err := hostBytes(src)
	if err != nil {
		return err
	}
	p, err := span(h, off, len(s)/dt.Size(), dt)
	if err != nil || len(s) == 0 {
		return err
	}
	slot := &b.big // a large copy waits for the last one
	if len(s) <= maxStaged {
		slot = &b.stage[b.next]
		b.next = (b.next + 1) % len(b.stage)
	}
	if err := result("waiting for a staging buffer", C.on_event_sync(b.ctx, slot.done)); err != nil {
		return err
	}
	if slot.mem.bytes < len(s) {
		if err := b.hostFree(&slot.mem); err != nil {
			return err
		}
		if slot.mem, err = b.hostAlloc(max(len(s), 1<<16)); err != nil {
			return err
		}
	}
	copy(slot.mem.slice(), s)
	return result("copying to the device", C.on_htod(b.ctx, b.stream, slot.done, p, slot.mem.p, C.size_t(len(s))))
}

// CopyOut copies len(dst) elements of src from element off into dst, after
// every Func run before it; a bad row index met since the last check is
// reported instead.
func (b *Backend) CopyOut(dst any, src backend.Buffer, off int) error {
	h, err := b.own(src)
	if err != nil {
		return err
	}
	d, dt, err := hostBytes(dst)
	if err != nil {
		return err
	}
	p, err := span(h, off, len(d)/dt.Size(), dt)
	if err != nil {
		return err
	}
	if b.out.bytes < len(d) {
		if err := b.hostFree(&b.out); err != nil {
			return err
		}
		if b.out, err = b.hostAlloc(max(len(d), 1<<16)); err != nil {
			return err
		}
	}
	if err := result("copying from the device", C.on_dtoh(b.ctx, b.stream, b.out.p, p, C.size_t(len(d)), b.faultHost.p, b.fault)); err != nil {
		return err
	}
	if err := b.collect(); err != nil {
		return err
	}
	if err := b.checkFault(); err != nil {
		return err
	}
	copy(d, b.out.slice())
	return nil
}

// Sync waits for every Func run so far and reports a bad row index met
// since the last check.
func (b *Backend) Sync() error {
	if err := result("synchronizing", C.on_dtoh(b.ctx, b.stream, nil, 0, 0, b.faultHost.p, b.fault)); err != nil {
		return err
	}
	if err := b.collect(); err != nil {
		return err
	}
	return b.checkFault()
}

// collect adds the device time of the kernels run since the last wait,
// which has finished them, and the span they covered.
func (b *Backend) collect() error {
	if len(b.pending) == 0 {
		return nil
	}
	var ms C.float
	first, last := b.timed[b.pending[0]].start, b.timed[b.pending[len(b.pending)-1]].end
	if err := result("reading an event", C.on_elapsed(b.ctx, first, last, &ms)); err != nil {
		return err
	}
	b.span += time.Duration(float64(ms) * float64(time.Millisecond))
	for _, i := range b.pending {
		t := &b.timed[i]
		if err := result("reading an event", C.on_elapsed(b.ctx, t.start, t.end, &ms)); err != nil {
			return err
		}
		t.count++
		t.total += time.Duration(float64(ms) * float64(time.Millisecond))
	}
	b.pending = b.pending[:0]
	return nil
}

// KernelTimes returns the device time of each kind of kernel run so far,
// most first, and the span of the stream they covered (backend.Timer); it
// waits for the device first. Without Options.Profile it returns nothing.
func (b *Backend) KernelTimes() ([]backend.KernelTime, time.Duration) {
	if err := b.Sync(); err != nil {
		return nil, 0
	}
	by := map[string]*backend.KernelTime{}
	var out []backend.KernelTime
	for _, t := range b.timed {
		if t.count == 0 {
			continue
		}
		k := by[t.label]
		if k == nil {
			out = append(out, backend.KernelTime{Kernel: t.label})
			k = &out[len(out)-1]
			by[t.label] = k
		}
		k.Count += t.count
		k.Total += t.total
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out, b.span
}

// label names a kernel in the profile: its name, with a product's sizes.
func label(k backend.Kernel) string {
	if g, ok := k.(backend.Gemm); ok {
		return fmt.Sprintf("gemm %dx%dx%d batch %d", g.M, g.N, g.K, g.Batches())
	}
	return k.Name()
}

// timedFunc wraps f in the events of a new timed kernel.
func (b *Backend) timedFunc(k backend.Kernel, f backend.Func) (backend.Func, error) {
	t := timed{label: label(k)}
	if err := result("creating an event", C.on_timing_event(b.ctx, &t.start)); err != nil {
		return nil, err
	}
	if err := result("creating an event", C.on_timing_event(b.ctx, &t.end)); err != nil {
		return nil, err
	}
	i := len(b.timed)
	b.timed = append(b.timed, t)
	return func() error {
		if slices.Contains(b.pending, i) { // its events are about to be recorded again
			if err := b.Sync(); err != nil {
				return err
			}
		}
		t := &b.timed[i]
		if err := result("recording an event", C.on_record(b.ctx, b.stream, t.start)); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
		b.pending = append(b.pending, i)
		return result("recording an event", C.on_record(b.ctx, b.stream, t.end))
	}, nil
}

func (b *Backend) checkFault() error {
	if b.faulted != nil {
		return b.faulted
	}
	w := (*[4]uint64)(b.faultHost.p)
	f := cudak.Fault{Words: *w}
	if f.Words[0] == 0 {
		return nil
	}
	// A fault leaves device data damaged (a partial scatter, a weight the
	// step did not finish): every later wait reports it, until Close.
	b.faulted = fmt.Errorf("cuda: %w (the device's data since then is not to be trusted; close the backend)", f.Err())
	return b.faulted
}

// Close waits for the device and releases the backend's memory, kernels,
// stream and context; buffers not freed are freed with the context's
// memory only when the process ends.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	// Wait for the device first, so that an asynchronous error is not lost
	// (a fault was reported already, by the wait that met it).
	var errs []error
	if b.fault != 0 && b.faultHost.p != nil { // (a backend whose start failed has neither)
		errs = append(errs, result("synchronizing", C.on_dtoh(b.ctx, b.stream, nil, 0, 0, b.faultHost.p, b.fault)))
	}
	for _, p := range append(b.scratch, b.fault) {
		if p != 0 {
			errs = append(errs, result("freeing scratch memory", C.on_free(b.ctx, p)))
		}
	}
	errs = append(errs, b.hostFree(&b.faultHost), b.hostFree(&b.out))
	for i := range b.stage {
		errs = append(errs, b.hostFree(&b.stage[i].mem))
	}
	errs = append(errs, b.hostFree(&b.big.mem))
	for _, p := range b.cmem {
		C.free(p)
	}
	var events []C.CUevent
	for _, t := range b.timed {
		events = append(events, t.start, t.end)
	}
	for _, s := range b.stage {
		events = append(events, s.done)
	}
	events = append(events, b.big.done)
	for _, e := range events {
		if e != nil {
			errs = append(errs, result("destroying an event", C.on_event_destroy(b.ctx, e)))
		}
	}
	if b.mod != nil {
		errs = append(errs, result("unloading the kernels", C.on_unload(b.ctx, b.mod)))
	}
	if b.solver != nil {
		errs = append(errs, result("closing cuSOLVER", C.on_solver_close(b.ctx, b.solver)))
	}
	errs = append(errs, result("releasing the context", C.on_close(b.dev, b.ctx, b.stream, b.blas)))
	return errors.Join(errs...)
}

// Addr returns an operand's device address (cudak.Device).
func (b *Backend) Addr(op backend.Operand) (uint64, error) {
	h, err := b.own(op.Buf)
	if err != nil {
		return 0, err
	}
	return uint64(h.p) + uint64(op.Off*h.dt.Size()), nil
}

// Scratch returns zeroed device memory kept until Close (cudak.Device).
func (b *Backend) Scratch(dt backend.DType, n int) (uint64, error) {
	var p C.CUdeviceptr
	if err := result("allocating scratch memory", C.on_alloc(b.ctx, b.stream, C.size_t(max(n, 1)*dt.Size()), &p)); err != nil {
		return 0, err
	}
	b.scratch = append(b.scratch, p)
	return uint64(p), nil
}

// Fault returns the device address of the fault words (cudak.Device).
func (b *Backend) Fault() uint64 { return uint64(b.fault) }

func (b *Backend) function(name string) (C.CUfunction, error) {
	if f, ok := b.funcs[name]; ok {
		return f, nil
	}
	s := C.CString(name)
	defer C.free(unsafe.Pointer(s))
	var f C.CUfunction
	if err := result("finding kernel "+name, C.on_function(b.ctx, b.mod, s, &f)); err != nil {
		return nil, err
	}
	b.funcs[name] = f
	return f, nil
}

// Prepare plans k (package cudak) and returns a Func that enqueues its
// launches and cuBLAS products on the backend's stream.
func (b *Backend) Prepare(k backend.Kernel) (backend.Func, error) {
	for _, op := range k.Operands() {
		if op.Buf != nil {
			if _, err := b.own(op.Buf); err != nil {
				return nil, fmt.Errorf("cuda: %s: %w", k.Name(), err)
			}
		}
	}
	steps, err := cudak.Plan(b, k)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", k.Name(), err)
	}
	fns := make([]backend.Func, len(steps))
	for i, s := range steps {
		switch s := s.(type) {
		case cudak.Launch:
			f, err := b.function(s.Kernel)
			if err != nil {
				return nil, err
			}
			args := C.malloc(C.size_t(8 * max(len(s.Args), 1)))
			b.cmem = append(b.cmem, args)
			copy(unsafe.Slice((*uint64)(args), len(s.Args)), s.Args)
			grid, what := C.uint(s.Grid), "launching "+s.Kernel
			fns[i] = func() error {
				return result(what, C.on_launch(b.ctx, b.stream, f, grid, cudak.Threads, args))
			}
		case cudak.Potrf:
			if err := b.startSolver(); err != nil {
				return nil, err
			}
			f64, n := cbool(s.F64), C.int(s.N)
			var lwork C.int
			if err := result("sizing cuSOLVER's workspace", C.on_potrf_size(b.ctx, b.solver, f64, n, C.CUdeviceptr(s.A), &lwork)); err != nil {
				return nil, err
			}
			dt := backend.Float32
			if s.F64 {
				dt = backend.Float64
			}
			work, err := b.Scratch(dt, int(lwork))
			if err != nil {
				return nil, err
			}
			fns[i] = func() error {
				return result("cuSOLVER potrf", C.on_potrf(b.ctx, b.solver, f64, n, C.CUdeviceptr(s.A), C.CUdeviceptr(work), lwork, C.CUdeviceptr(s.Info)))
			}
		case cudak.Trsm:
			// B R^-1 in row-major terms is, column-major, (R^T)^-1 B^T: a
			// left solve with the lower R^T that R's buffer holds.
			fns[i] = func() error {
				return result("cuBLAS trsm", C.on_trsm(b.ctx, b.blas, cbool(s.F64), C.int(s.N), C.int(s.M), C.CUdeviceptr(s.A), C.CUdeviceptr(s.B)))
			}
		case cudak.Gemm:
			for _, v := range []int{s.M, s.N, s.K, s.LDA, s.LDB, s.LDC, s.Batch} {
				if v > math.MaxInt32 {
					return nil, fmt.Errorf("cuda: %s: a size of %d is beyond cuBLAS's int", k.Name(), v)
				}
			}
			fns[i] = func() error {
				return result("cuBLAS gemm", C.on_gemm(b.ctx, b.blas, cbool(s.F64), cbool(s.TransA), cbool(s.TransB),
					C.int(s.M), C.int(s.N), C.int(s.K), C.double(s.Alpha), C.CUdeviceptr(s.A), C.int(s.LDA), C.longlong(s.StrideA),
					C.CUdeviceptr(s.B), C.int(s.LDB), C.longlong(s.StrideB), C.double(s.Beta), C.CUdeviceptr(s.C), C.int(s.LDC),
					C.longlong(s.StrideC), C.int(s.Batch)))
			}
		default:
			return nil, fmt.Errorf("cuda: %s: unknown step %T", k.Name(), s)
		}
	}
	if len(fns) == 0 { // nothing to do (an empty copy, int32 data checked for finiteness)
		return backend.Sequence(nil), nil
	}
	f := backend.Sequence(fns)
	if b.profile {
		return b.timedFunc(k, f)
	}
	return f, nil
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}
