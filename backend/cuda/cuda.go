//go:build cgo

package cuda

// #include <stdlib.h>
// #include "driver.h"
import "C"

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/cudak"
)

// Backend runs kernels on one GPU, in order, on one stream. It is not safe
// for concurrent use.
type Backend struct {
	a       *api
	dev     C.CUdevice
	ctx     C.CUcontext
	stream  C.CUstream
	blas    C.cublasHandle_t
	solver  C.cusolverDnHandle_t // made at the first Q factor
	name    string
	mod     C.CUmodule
	funcs   map[string]C.CUfunction
	maxGrid int
	index64 bool

	fault     C.CUdeviceptr             // the row kernels' four fault words
	faultHost hostMem                   // their copy, read at every CopyOut and Sync
	stage     [stageSlots + 1]stageSlot // pinned buffers that CopyIn goes up through
	next      int
	out       hostMem // pinned buffer that CopyOut comes down through
	scratch   []C.CUdeviceptr
	cmem      []unsafe.Pointer // kernel names and argument structs
	live      int              // bytes in buffers not yet freed
	closed    bool

	faulted error // the first fault a wait met; every later one reports it

	// What the backend enqueued and waited for (Counts).
	launches, copiesIn, waits int

	// CopyOutAll's workspaces: each read's source, bytes and host slice.
	readSrc   []C.CUdeviceptr
	readBytes []C.size_t
	readDst   [][]byte

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
// stay small); a larger one goes through one buffer of its own (the slot
// after the ring), waiting for the previous large copy.
const maxStaged = 1 << 20

// stageSlot is a pinned buffer and the event recorded after the last copy
// out of it, which the next use waits for.
type stageSlot struct {
	mem  hostMem
	done C.CUevent
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Reader  = (*Backend)(nil)
	_ backend.Counter = (*Backend)(nil)
)

// Probe returns GPU 0 as the driver describes it, or why there is none
// (no driver library, no device).
func Probe() (Device, error) {
	o, err := systemOpener()
	if err != nil {
		return Device{}, err
	}
	a, err := loadDriver(newFinder(o))
	if err != nil {
		return Device{}, err
	}
	return probe(a, 0)
}

// New starts a backend on GPU o.Device: it loads the NVIDIA libraries (or,
// where ORTHONET_CUDA_STANDIN=1, the host model), makes the device's
// primary context current, creates a stream and a cuBLAS handle on it, and
// loads the kernels, compiled by NVRTC for the device (or read from the
// cache of an earlier start).
func New(o Options) (backend.Backend, error) {
	op, err := systemOpener()
	if err != nil {
		return nil, err
	}
	a, err := load(op)
	if err != nil {
		return nil, err
	}
	d, err := probe(a, o.Device)
	if err != nil {
		return nil, err
	}
	b := &Backend{a: a, funcs: map[string]C.CUfunction{}, profile: o.Profile, maxGrid: o.MaxGrid, index64: o.Index64}
	if err := a.result("starting device "+strconv.Itoa(o.Device), C.on_init(a.t, C.int(o.Device), &b.dev, &b.ctx, &b.stream, &b.blas)); err != nil {
		return nil, err
	}
	kind := "cuda"
	if a.model {
		kind = "cuda on the host model of the device (" + StandInEnv + "=1), not a GPU"
	}
	how, err := b.loadKernels(d.Major, d.Minor)
	b.name = fmt.Sprintf("%s: device %d: %s, compute capability %d.%d; %s; kernels %s", kind, o.Device, d.Name, d.Major, d.Minor, strings.Join(a.where, ", "), how)
	if err == nil {
		err = b.start()
	}
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

// probe describes device ordinal of a loaded driver.
func probe(a *api, ordinal int) (Device, error) {
	var count, major, minor, driver C.int
	var mem C.size_t
	name := make([]C.char, 256)
	if err := a.result("probing device "+strconv.Itoa(ordinal), C.on_probe(a.t, C.int(ordinal), &count, &major, &minor, &name[0], C.int(len(name)), &mem, &driver)); err != nil {
		return Device{}, fmt.Errorf("%w (driver CUDA %s)", err, cudaVersion(a.driver))
	}
	return Device{Name: C.GoString(&name[0]), Count: int(count), Major: int(major), Minor: int(minor),
		TotalMemory: int64(mem), DriverVersion: int(driver), HostModel: a.model}, nil
}

// supportedArchs returns the architectures NVRTC compiles for (75 for
// sm_75), lowest first.
func (a *api) supportedArchs() ([]int, error) {
	buf := make([]C.int, 256)
	var n C.int
	if err := a.result("listing NVRTC's architectures", C.on_supported_archs(a.t, &buf[0], C.int(len(buf)), &n)); err != nil {
		return nil, err
	}
	out := make([]int, n)
	for i := range out {
		out[i] = int(buf[i])
	}
	slices.Sort(out)
	return out, nil
}

// loadKernels compiles the kernels for the device and loads them, and says
// how. A CUBIN for the device's own architecture comes first: the driver
// loads it whatever its version, where it refuses PTX from an NVRTC newer
// than itself. PTX is the fallback, and the only way for a GPU newer than
// NVRTC: PTX of the newest architecture NVRTC knows, which the driver
// compiles for the device.
func (b *Backend) loadKernels(major, minor int) (string, error) {
	archs, err := b.a.supportedArchs()
	if err != nil {
		return "", err
	}
	dev := major*10 + minor
	var cubinErr error
	if slices.Contains(archs, dev) {
		img, err := cachedImage(b.a, dev, true)
		if err == nil {
			if err = b.load(img); err == nil {
				return fmt.Sprintf("CUBIN for sm_%d", dev), nil
			}
		}
		cubinErr = err
	}
	target := -1
	for _, a := range archs {
		if a <= dev {
			target = a
		}
	}
	if target < 0 {
		return "", fmt.Errorf("cuda: NVRTC %d.%d compiles for none of the architectures up to the device's sm_%d (it knows %v)", b.a.nvrtc[0], b.a.nvrtc[1], dev, archs)
	}
	ptx, err := cachedImage(b.a, target, false)
	if err == nil {
		err = b.load(ptx)
	}
	if err != nil {
		if cubinErr != nil {
			err = fmt.Errorf("%w; the CUBIN for sm_%d first: %v", err, dev, cubinErr)
		}
		return "", fmt.Errorf("%w (NVRTC %d.%d, driver CUDA %s: a driver older than NVRTC refuses its PTX)", err, b.a.nvrtc[0], b.a.nvrtc[1], cudaVersion(b.a.driver))
	}
	if target != dev {
		return fmt.Sprintf("PTX for compute_%d, compiled by the driver for sm_%d (NVRTC %d.%d does not know sm_%d)", target, dev, b.a.nvrtc[0], b.a.nvrtc[1], dev), nil
	}
	return fmt.Sprintf("PTX for compute_%d", target), nil
}

// compile compiles the kernels with NVRTC for architecture arch (90 for
// sm_90): a CUBIN, or PTX when cubin is false.
func compile(a *api, arch int, cubin bool) ([]byte, error) {
	target := fmt.Sprintf("compute_%d", arch)
	if cubin {
		target = fmt.Sprintf("sm_%d", arch)
	}
	opts := append([]string{"--gpu-architecture=" + target}, cudak.CompileOptions...)
	copts := make([]*C.char, len(opts))
	for i, o := range opts {
		copts[i] = C.CString(o)
		defer C.free(unsafe.Pointer(copts[i]))
	}
	src := C.CString(cudak.Source)
	defer C.free(unsafe.Pointer(src))
	var out, log *C.char
	var n C.size_t
	r := C.on_compile(a.t, src, &copts[0], C.int(len(copts)), C.int(cbool(cubin)), &out, &n, &log)
	defer C.free(unsafe.Pointer(out))
	defer C.free(unsafe.Pointer(log))
	if err := a.result(fmt.Sprintf("compiling the kernels for %s with NVRTC %d.%d", target, a.nvrtc[0], a.nvrtc[1]), r); err != nil {
		if log != nil {
			err = fmt.Errorf("%w\n%s", err, C.GoString(log))
		}
		return nil, err
	}
	img := C.GoBytes(unsafe.Pointer(out), C.int(n))
	if !cubin {
		img = bytes.TrimRight(img, "\x00")
	}
	return img, nil
}

// cachedImage returns the kernels compiled for arch from the user's cache
// folder (orthonet/kernels), compiling and caching them when they are not
// there: the file's name is the SHA-256 of the source, the options, the
// target, NVRTC's version and the driver's, so that a change of any
// compiles afresh. A cache that cannot be read or written is skipped.
func cachedImage(a *api, arch int, cubin bool) ([]byte, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00%d %v\x00nvrtc %d.%d\x00driver %d\x00model %v", cudak.Source, cudak.CompileOptions, arch, cubin, a.nvrtc[0], a.nvrtc[1], a.driver, a.model)
	ext := ".ptx"
	if cubin {
		ext = ".cubin"
	}
	var path string
	if dir, err := os.UserCacheDir(); err == nil {
		path = filepath.Join(dir, "orthonet", "kernels", hex.EncodeToString(h.Sum(nil))+ext)
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	img, err := compile(a, arch, cubin)
	if err != nil || path == "" {
		return img, err
	}
	if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
		if f, err := os.CreateTemp(filepath.Dir(path), ".kernels-*"); err == nil {
			_, werr := f.Write(img)
			if cerr := f.Close(); werr == nil && cerr == nil {
				_ = os.Rename(f.Name(), path)
			}
			_ = os.Remove(f.Name()) // gone already after a rename
		}
	}
	return img, nil
}

// load loads a compiled image (PTX text or CUBIN) as the backend's module.
func (b *Backend) load(img []byte) error {
	p := C.CBytes(append(slices.Clip(img), 0))
	defer C.free(p)
	return b.a.result("loading the kernels", C.on_load(b.a.t, b.ctx, p, &b.mod))
}

// start allocates the fault words and the pinned staging buffers.
func (b *Backend) start() error {
	if err := b.a.result("allocating the fault words", C.on_alloc(b.a.t, b.ctx, b.stream, 32, &b.fault)); err != nil {
		return err
	}
	var err error
	if b.faultHost, err = b.hostAlloc(32); err != nil {
		return err
	}
	for i := range b.stage {
		if err := b.a.result("creating an event", C.on_event(b.a.t, b.ctx, &b.stage[i].done)); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) hostAlloc(bytes int) (hostMem, error) {
	var p unsafe.Pointer
	if err := b.a.result(fmt.Sprintf("allocating %d bytes of pinned host memory", bytes), C.on_host_alloc(b.a.t, b.ctx, C.size_t(bytes), &p)); err != nil {
		return hostMem{}, err
	}
	return hostMem{p: p, bytes: bytes}, nil
}

func (b *Backend) hostFree(m *hostMem) error {
	if m.p == nil {
		return nil
	}
	err := b.a.result("freeing pinned host memory", C.on_host_free(b.a.t, b.ctx, m.p))
	*m = hostMem{}
	return err
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
	if err := b.a.result(fmt.Sprintf("allocating %d bytes", bytes), C.on_alloc(b.a.t, b.ctx, b.stream, C.size_t(bytes), &h.p)); err != nil {
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
	err = b.a.result("freeing a buffer", C.on_free(b.a.t, b.ctx, h.p))
	h.p = 0
	b.live -= max(h.n, 1) * h.dt.Size()
	return err
}

// Live returns the bytes of device memory in buffers not yet freed.
func (b *Backend) Live() int { return b.live }

// MemInfo returns the device's free and total memory in bytes.
func (b *Backend) MemInfo() (free, total int, err error) {
	var f, t C.size_t
	err = b.a.result("reading memory use", C.on_mem_info(b.a.t, b.ctx, &f, &t))
	return int(f), int(t), err
}

// hostCopy checks a copy between buf from element off and the host slice
// s, and returns s's bytes and the device address of their place in buf.
func (b *Backend) hostCopy(buf backend.Buffer, off int, s any) ([]byte, C.CUdeviceptr, error) {
	h, err := b.own(buf)
	if err != nil {
		return nil, 0, err
	}
	bytes, dt, err := cudak.HostBytes(s)
	if err != nil {
		return nil, 0, fmt.Errorf("cuda: %w", err)
	}
	if h.dt != dt {
		return nil, 0, fmt.Errorf("cuda: %v data for a buffer of %v", dt, h.dt)
	}
	if n := len(bytes) / dt.Size(); off < 0 || off+n > h.n {
		return nil, 0, fmt.Errorf("cuda: %d elements at %d of a buffer of %d", n, off, h.n)
	}
	return bytes, h.p + C.CUdeviceptr(off*dt.Size()), nil
}

// grow makes the pinned buffer m hold at least n bytes.
func (b *Backend) grow(m *hostMem, n int) error {
	if m.bytes >= n {
		return nil
	}
	if err := b.hostFree(m); err != nil {
		return err
	}
	var err error
	*m, err = b.hostAlloc(max(n, 1<<16))
	return err
}

// CopyIn copies src into dst from element off. The copy goes up
// asynchronously, through a pinned staging buffer: CopyIn returns once src
// may be reused.
func (b *Backend) CopyIn(dst backend.Buffer, off int, src any) error {
	s, p, err := b.hostCopy(dst, off, src)
	if err != nil || len(s) == 0 {
		return err
	}
	slot := &b.stage[stageSlots] // a large copy waits for the last one
	if len(s) <= maxStaged {
		slot = &b.stage[b.next]
		b.next = (b.next + 1) % stageSlots
	}
	if err := b.a.result("waiting for a staging buffer", C.on_event_sync(b.a.t, b.ctx, slot.done)); err != nil {
		return err
	}
	if err := b.grow(&slot.mem, len(s)); err != nil {
		return err
	}
	copy(slot.mem.slice(), s)
	b.copiesIn++
	return b.a.result("copying to the device", C.on_htod(b.a.t, b.ctx, b.stream, slot.done, p, slot.mem.p, C.size_t(len(s))))
}

// CopyOut copies len(dst) elements of src from element off into dst, after
// every Func run before it; a bad row index met since the last check is
// reported instead.
func (b *Backend) CopyOut(dst any, src backend.Buffer, off int) error {
	d, p, err := b.hostCopy(src, off, dst)
	if err != nil {
		return err
	}
	if err := b.grow(&b.out, len(d)); err != nil {
		return err
	}
	if err := b.wait("copying from the device", b.out.p, p, len(d)); err != nil {
		return err
	}
	copy(d, b.out.slice())
	return nil
}

// CopyOutAll makes the reads after every Func run before it, in one wait
// (backend.Reader): each is checked as CopyOut checks it, and a bad row
// index met since the last check is reported instead.
func (b *Backend) CopyOutAll(reads []backend.Read) error {
	b.readSrc, b.readBytes, b.readDst = b.readSrc[:0], b.readBytes[:0], b.readDst[:0]
	total := 0
	for _, r := range reads {
		d, p, err := b.hostCopy(r.Src, r.Off, r.Dst)
		if err != nil {
			clear(b.readDst)
			return err
		}
		b.readSrc, b.readBytes, b.readDst = append(b.readSrc, p), append(b.readBytes, C.size_t(len(d))), append(b.readDst, d)
		total += (len(d) + 7) &^ 7
	}
	if err := b.grow(&b.out, total); err != nil {
		return err
	}
	var src *C.CUdeviceptr
	var bytes *C.size_t
	if len(reads) > 0 {
		src, bytes = &b.readSrc[0], &b.readBytes[0]
	}
	err := b.waited("copying from the device", C.on_dtoh_many(b.a.t, b.ctx, b.stream, (*C.char)(b.out.p), src, bytes,
		C.int(len(reads)), b.faultHost.p, b.fault))
	if err == nil {
		out, off := b.out.slice(), 0
		for _, d := range b.readDst {
			copy(d, out[off:off+len(d)])
			off += (len(d) + 7) &^ 7
		}
	}
	clear(b.readDst) // no reference to the caller's memory is kept
	return err
}

// Sync waits for every Func run so far and reports a bad row index met
// since the last check.
func (b *Backend) Sync() error { return b.wait("synchronizing", nil, 0, 0) }

// wait copies n bytes at src into the pinned memory at dst after every
// Func run so far (none for n = 0), collects the kernels' times and
// reports a fault met since the last check.
func (b *Backend) wait(what string, dst unsafe.Pointer, src C.CUdeviceptr, n int) error {
	return b.waited(what, C.on_dtoh(b.a.t, b.ctx, b.stream, dst, src, C.size_t(n), b.faultHost.p, b.fault))
}

// waited completes a wait that returned r: it collects the kernels' times
// and reports a fault met since the last check.
func (b *Backend) waited(what string, r C.int) error {
	b.waits++
	if err := b.a.result(what, r); err != nil {
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
	if err := b.a.result("reading an event", C.on_elapsed(b.a.t, b.ctx, first, last, &ms)); err != nil {
		return err
	}
	b.span += time.Duration(float64(ms) * float64(time.Millisecond))
	for _, i := range b.pending {
		t := &b.timed[i]
		if err := b.a.result("reading an event", C.on_elapsed(b.a.t, b.ctx, t.start, t.end, &ms)); err != nil {
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
	at := map[string]int{} // a label's index in out (a pointer would go stale as out grows)
	var out []backend.KernelTime
	for _, t := range b.timed {
		if t.count == 0 {
			continue
		}
		i, ok := at[t.label]
		if !ok {
			i, at[t.label] = len(out), len(out)
			out = append(out, backend.KernelTime{Kernel: t.label})
		}
		out[i].Count += t.count
		out[i].Total += t.total
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out, b.span
}

// kernelLabel returns k's line in a profile: its name, and a product's
// sizes.
func kernelLabel(k backend.Kernel) string {
	if g, ok := k.(backend.Gemm); ok {
		return fmt.Sprintf("gemm %dx%dx%d batch %d", g.M, g.N, g.K, g.Batches())
	}
	return backend.Name(k)
}

// stepLabel returns the profile line of one step of a kernel of several
// (a QF's products, factorizations and solves each have their own).
func stepLabel(kernel string, s any) string {
	switch s := s.(type) {
	case cudak.Launch:
		return kernel + ": " + strings.TrimPrefix(s.Kernel, "on_")
	case cudak.Potrf:
		return fmt.Sprintf("%s: potrf %d", kernel, s.N)
	case cudak.Trsm:
		return fmt.Sprintf("%s: trsm %dx%d", kernel, s.M, s.N)
	case cudak.Gemm:
		return fmt.Sprintf("%s: gemm %dx%dx%d", kernel, s.M, s.N, s.K)
	}
	return fmt.Sprintf("%s: %T", kernel, s)
}

// timedFunc wraps f in the events of a new timed kernel, named label in
// the profile.
func (b *Backend) timedFunc(label string, f backend.Func) (backend.Func, error) {
	t := timed{label: label}
	if err := b.a.result("creating an event", C.on_timing_event(b.a.t, b.ctx, &t.start)); err != nil {
		return nil, err
	}
	if err := b.a.result("creating an event", C.on_timing_event(b.a.t, b.ctx, &t.end)); err != nil {
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
		if err := b.a.result("recording an event", C.on_record(b.a.t, b.ctx, b.stream, t.start)); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
		b.pending = append(b.pending, i)
		return b.a.result("recording an event", C.on_record(b.a.t, b.ctx, b.stream, t.end))
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
	// Wait for the device first, so that an asynchronous error is not lost,
	// and report a fault that no wait has met yet (one that a wait met was
	// reported by it).
	var errs []error
	if b.fault != 0 && b.faultHost.p != nil { // (a backend whose start failed has neither)
		err := b.a.result("synchronizing", C.on_dtoh(b.a.t, b.ctx, b.stream, nil, 0, 0, b.faultHost.p, b.fault))
		if err == nil && b.faulted == nil {
			err = b.checkFault()
		}
		errs = append(errs, err)
	}
	for _, p := range append(b.scratch, b.fault) {
		if p != 0 {
			errs = append(errs, b.a.result("freeing scratch memory", C.on_free(b.a.t, b.ctx, p)))
		}
	}
	for _, p := range b.cmem {
		C.free(p)
	}
	errs = append(errs, b.hostFree(&b.faultHost), b.hostFree(&b.out))
	var events []C.CUevent
	for i := range b.stage {
		errs = append(errs, b.hostFree(&b.stage[i].mem))
		events = append(events, b.stage[i].done)
	}
	for _, t := range b.timed {
		events = append(events, t.start, t.end)
	}
	for _, e := range events {
		if e != nil {
			errs = append(errs, b.a.result("destroying an event", C.on_event_destroy(b.a.t, b.ctx, e)))
		}
	}
	if b.mod != nil {
		errs = append(errs, b.a.result("unloading the kernels", C.on_unload(b.a.t, b.ctx, b.mod)))
	}
	if b.solver != nil {
		errs = append(errs, b.a.result("closing cuSOLVER", C.on_solver_close(b.a.t, b.ctx, b.solver)))
	}
	errs = append(errs, b.a.result("releasing the context", C.on_close(b.a.t, b.dev, b.ctx, b.stream, b.blas)))
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
	if err := b.a.result("allocating scratch memory", C.on_alloc(b.a.t, b.ctx, b.stream, C.size_t(max(n, 1)*dt.Size()), &p)); err != nil {
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
	if err := b.a.result("finding kernel "+name, C.on_function(b.a.t, b.ctx, b.mod, s, &f)); err != nil {
		return nil, err
	}
	b.funcs[name] = f
	return f, nil
}

// Prepare plans k (package cudak) and returns a Func that enqueues its
// launches and cuBLAS products on the backend's stream.
func (b *Backend) Prepare(k backend.Kernel) (backend.Func, error) {
	for _, op := range backend.Operands(k) {
		if op.Buf != nil {
			if _, err := b.own(op.Buf); err != nil {
				return nil, fmt.Errorf("cuda: %s: %w", backend.Name(k), err)
			}
		}
	}
	steps, err := cudak.Plan(b, k)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", backend.Name(k), err)
	}
	fns := make([]backend.Func, len(steps))
	for i, s := range steps {
		if fns[i], err = b.stepFunc(k, s); err != nil {
			return nil, err
		}
	}
	if len(fns) == 0 { // nothing to do (an empty copy, int32 data checked for finiteness)
		return backend.Sequence(nil), nil
	}
	return b.profiled(k, steps, fns)
}

// stepFunc returns a Func that enqueues step s of kernel k's plan.
func (b *Backend) stepFunc(k backend.Kernel, s cudak.Step) (backend.Func, error) {
	switch s := s.(type) {
	case cudak.Launch:
		return b.launchFunc(s)
	case cudak.Potrf:
		return b.potrfFunc(s)
	case cudak.Trsm:
		// B R^-1 in row-major terms is, column-major, (R^T)^-1 B^T: a
		// left solve with the lower R^T that R's buffer holds.
		return func() error {
			b.launches++
			return b.a.result("cuBLAS trsm", C.on_trsm(b.a.t, b.ctx, b.blas, cbool(s.F64), C.int(s.N), C.int(s.M), C.CUdeviceptr(s.A), C.CUdeviceptr(s.B)))
		}, nil
	case cudak.Gemm:
		return b.gemmFunc(k, s)
	default:
		return nil, fmt.Errorf("cuda: %s: unknown step %T", backend.Name(k), s)
	}
}

// launchFunc returns a Func that launches a kernel of the module, its
// arguments copied into C memory kept until Close.
func (b *Backend) launchFunc(s cudak.Launch) (backend.Func, error) {
	f, err := b.function(s.Kernel)
	if err != nil {
		return nil, err
	}
	args := C.malloc(C.size_t(8 * max(len(s.Args), 1)))
	b.cmem = append(b.cmem, args)
	copy(unsafe.Slice((*uint64)(args), len(s.Args)), s.Args)
	grid, what, nbytes := C.uint(s.Grid), "launching "+s.Kernel, C.size_t(8*len(s.Args))
	return func() error {
		b.launches++
		return b.a.result(what, C.on_launch(b.a.t, b.ctx, b.stream, f, grid, cudak.Threads, args, nbytes))
	}, nil
}

// potrfFunc returns a Func that runs cuSOLVER's Cholesky factorization,
// starting cuSOLVER and taking its workspace now.
func (b *Backend) potrfFunc(s cudak.Potrf) (backend.Func, error) {
	if b.solver == nil {
		if err := b.a.result("starting cuSOLVER", C.on_solver(b.a.t, b.ctx, b.stream, &b.solver)); err != nil {
			return nil, err
		}
	}
	f64, n := cbool(s.F64), C.int(s.N)
	var lwork C.int
	if err := b.a.result("sizing cuSOLVER's workspace", C.on_potrf_size(b.a.t, b.ctx, b.solver, f64, n, C.CUdeviceptr(s.A), &lwork)); err != nil {
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
	return func() error {
		b.launches++
		return b.a.result("cuSOLVER potrf", C.on_potrf(b.a.t, b.ctx, b.solver, f64, n, C.CUdeviceptr(s.A), C.CUdeviceptr(work), lwork, C.CUdeviceptr(s.Info)))
	}, nil
}

// gemmFunc returns a Func that runs cuBLAS's product of kernel k's plan,
// or an error for a size beyond cuBLAS's int.
func (b *Backend) gemmFunc(k backend.Kernel, s cudak.Gemm) (backend.Func, error) {
	for _, v := range []int{s.M, s.N, s.K, s.LDA, s.LDB, s.LDC, s.Batch} {
		if v > math.MaxInt32 {
			return nil, fmt.Errorf("cuda: %s: a size of %d is beyond cuBLAS's int", backend.Name(k), v)
		}
	}
	return func() error {
		b.launches++
		return b.a.result("cuBLAS gemm", C.on_gemm(b.a.t, b.ctx, b.blas, cbool(s.F64), cbool(s.TransA), cbool(s.TransB),
			C.int(s.M), C.int(s.N), C.int(s.K), C.double(s.Alpha), C.CUdeviceptr(s.A), C.int(s.LDA), C.longlong(s.StrideA),
			C.CUdeviceptr(s.B), C.int(s.LDB), C.longlong(s.StrideB), C.double(s.Beta), C.CUdeviceptr(s.C), C.int(s.LDC),
			C.longlong(s.StrideC), C.int(s.Batch)))
	}, nil
}

// profiled returns the Func of kernel k's steps fns, timed when the
// backend profiles: each step on its own line where there are several,
// else the kernel.
func (b *Backend) profiled(k backend.Kernel, steps []cudak.Step, fns []backend.Func) (backend.Func, error) {
	if b.profile && len(fns) > 1 { // each step timed on its own line
		for i, s := range steps {
			f, err := b.timedFunc(stepLabel(backend.Name(k), s), fns[i])
			if err != nil {
				return nil, err
			}
			fns[i] = f
		}
		return backend.Sequence(fns), nil
	}
	f := backend.Sequence(fns)
	if b.profile {
		return b.timedFunc(kernelLabel(k), f)
	}
	return f, nil
}

// Counts returns what the backend has enqueued and waited for since it
// started (backend.Counter): its kernel launches and cuBLAS and cuSOLVER
// calls, its copies to the device, and its waits for the device (CopyOut,
// CopyOutAll, Sync).
func (b *Backend) Counts() backend.Counts {
	return backend.Counts{Launches: b.launches, CopiesIn: b.copiesIn, Waits: b.waits}
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

// MaxGrid returns Options.MaxGrid, the planner's bound on a launch's blocks
// (0: its default).
func (b *Backend) MaxGrid() int { return b.maxGrid }

// Index64 returns Options.Index64: whether the planner keeps to 64-bit
// index arithmetic.
func (b *Backend) Index64() bool { return b.index64 }
