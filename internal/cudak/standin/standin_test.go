//go:build cgo

package standin

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/cudak"
)

// CUresult values of cuapi.h.
const (
	rSuccess      cuResult = 0
	rInvalidValue cuResult = 1
	rNotInit      cuResult = 3
	rNoDevice     cuResult = 100
	rInvalidImage cuResult = 200
	rInvalidCtx   cuResult = 201
	rNoBinary     cuResult = 209
	rInvalidPTX   cuResult = 218
	rUnsupPTX     cuResult = 222
	rInvalidHdl   cuResult = 400
	rNotFound     cuResult = 500
	rNotReady     cuResult = 600
)

func open(t *testing.T, c Config) *probe {
	t.Helper()
	p, err := newProbe(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func want(t *testing.T, what string, got, want cuResult) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// sourceHash is model::fnv1a of the kernel source, as images carry it
// (model.h's offset basis, 1469598103934665603, is its own, not FNV's).
func sourceHash() string {
	h := uint64(1469598103934665603)
	for i := 0; i < len(cudak.Source); i++ {
		h = (h ^ uint64(cudak.Source[i])) * 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}

// TestOpen checks which names the model's dlopen finds under which
// configuration, and dlopen's message for the others.
func TestOpen(t *testing.T) {
	def := DefaultConfig()
	folder := def
	folder.Folder = "/opt/cuda/lib64"
	folder.BuiltinsInPath = false
	noDriver := def
	noDriver.Driver = 0
	cuda11 := def
	cuda11.NVRTC = Version{11, 8}
	driverFolder := def
	driverFolder.DriverFolder = "/usr/local/nvidia/lib64"
	stale := folder
	stale.StaleJitLink = "/usr/local/cuda/lib64"
	const jit, staleJit = "/opt/cuda/lib64/libnvJitLink.so.12", "/usr/local/cuda/lib64/libnvJitLink.so.12"
	for _, c := range []struct {
		name   string
		c      Config
		before []string // opened first, each found
		path   string
		lib    Lib
		ok     bool
		err    string // the error when not dlopen's for path itself
	}{
		{"driver", def, nil, "libcuda.so.1", LibCUDA, true, ""},
		{"driver by path", def, nil, "/usr/lib/libcuda.so.1", LibNone, false, ""},
		{"no driver", noDriver, nil, "libcuda.so.1", LibNone, false, ""},
		{"driver beside a folder", folder, nil, "libcuda.so.1", LibCUDA, true, ""},
		{"driver in its folder", driverFolder, nil, "/usr/local/nvidia/lib64/libcuda.so.1", LibCUDA, true, ""},
		{"driver by soname outside the loader's path", driverFolder, nil, "libcuda.so.1", LibNone, false, ""},
		{"driver in another folder", driverFolder, nil, "/usr/lib64/libcuda.so.1", LibNone, false, ""},
		{"nvJitLink in folder", folder, nil, jit, LibNone, true, ""},
		{"nvJitLink by soname with folder", folder, nil, "libnvJitLink.so.12", LibNone, false, ""},
		{"stale nvJitLink", stale, nil, staleJit, LibNone, true, ""},
		{"cusolver in folder without its nvJitLink", folder, nil, "/opt/cuda/lib64/libcusolver.so.11", LibNone, false,
			"libnvJitLink.so.12: cannot open shared object file: No such file or directory"},
		{"cusolver after a stale nvJitLink", stale, []string{staleJit}, "/opt/cuda/lib64/libcusolver.so.11", LibNone, false,
			"/opt/cuda/lib64/libcusolver.so.11: undefined symbol: __nvJitLinkCreate_12_0, version libnvJitLink.so.12"},
		{"cusolver after its nvJitLink then a stale one", stale, []string{jit, staleJit}, "/opt/cuda/lib64/libcusolver.so.11", LibCUSOLVER, true, ""},
		{"nvrtc", def, nil, "libnvrtc.so.12", LibNVRTC, true, ""},
		{"nvrtc of another major", def, nil, "libnvrtc.so.13", LibNone, false, ""},
		{"nvrtc 11", cuda11, nil, "libnvrtc.so.11.2", LibNVRTC, true, ""},
		{"nvrtc 11 by major", cuda11, nil, "libnvrtc.so.11", LibNone, false, ""},
		{"nvrtc by path without folder", def, nil, "/opt/cuda/lib64/libnvrtc.so.12", LibNone, false, ""},
		{"nvrtc in folder", folder, nil, "/opt/cuda/lib64/libnvrtc.so.12", LibNVRTC, true, ""},
		{"nvrtc by soname with folder", folder, nil, "libnvrtc.so.12", LibNone, false, ""},
		{"nvrtc in another folder", folder, nil, "/usr/lib/libnvrtc.so.12", LibNone, false, ""},
		{"builtins in path", def, nil, "libnvrtc-builtins.so.12.8", LibNone, true, ""},
		{"builtins of another minor", def, nil, "libnvrtc-builtins.so.12.6", LibNone, false, ""},
		{"builtins not in path", folder, nil, "libnvrtc-builtins.so.12.8", LibNone, false, ""},
		{"builtins in folder", folder, nil, "/opt/cuda/lib64/libnvrtc-builtins.so.12.8", LibNone, true, ""},
		{"cublas", def, nil, "libcublas.so.12", LibCUBLAS, true, ""},
		{"cublasLt", def, nil, "libcublasLt.so.12", LibNone, true, ""},
		{"cublas 13", def, nil, "libcublas.so.13", LibNone, false, ""},
		{"cusolver", def, nil, "libcusolver.so.11", LibCUSOLVER, true, ""},
		{"cusolver in folder", folder, []string{jit}, "/opt/cuda/lib64/libcusolver.so.11", LibCUSOLVER, true, ""},
		{"unknown", def, nil, "libfoo.so.1", LibNone, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Configure(c.c); err != nil {
				t.Fatal(err)
			}
			defer Configure(DefaultConfig())
			for _, p := range c.before {
				if _, err := Open(p); err != nil {
					t.Fatal(err)
				}
			}
			lib, err := Open(c.path)
			if c.ok != (err == nil) || lib != c.lib {
				t.Fatalf("Open(%q) = %d, %v; want %d, found %v", c.path, lib, err, c.lib, c.ok)
			}
			want := c.err
			if want == "" {
				want = c.path + ": cannot open shared object file: No such file or directory"
			}
			if err != nil && err.Error() != want {
				t.Fatalf("Open(%q): %q, want dlopen's message %q", c.path, err, want)
			}
		})
	}
}

// TestSym checks the model's dlsym: each function in its own library only.
func TestSym(t *testing.T) {
	for _, c := range []struct {
		lib   Lib
		name  string
		found bool
	}{
		{LibCUDA, "cuInit", true},
		{LibCUDA, "cuLaunchKernel", true},
		{LibCUDA, "cuMemAlloc", false}, // only the versioned name is exported
		{LibCUDA, "cuEventElapsedTime_v2", true},
		{LibCUDA, "cuEventElapsedTime", true}, // its older name, exported besides
		{LibCUDA, "nvrtcVersion", false},
		{LibNVRTC, "nvrtcCompileProgram", true},
		{LibCUBLAS, "cublasDgemmStridedBatched", true},
		{LibCUSOLVER, "cusolverDnDpotrf", true},
		{LibCUSOLVER, "cuInit", false},
		{LibNone, "cuInit", false},
	} {
		if got := Sym(c.lib, c.name) != nil; got != c.found {
			t.Errorf("Sym(%d, %q) found %v, want %v", c.lib, c.name, got, c.found)
		}
	}
	if Sym(LibCUDA, "cuEventElapsedTime") == Sym(LibCUDA, "cuEventElapsedTime_v2") {
		t.Error("cuEventElapsedTime and its _v2 are one function: a test cannot tell which a loader took")
	}
	lacks := DefaultConfig()
	lacks.Lacks = []string{"cuEventElapsedTime", "cublasSetMathMode"}
	if err := Configure(lacks); err != nil {
		t.Fatal(err)
	}
	defer Configure(DefaultConfig())
	for _, c := range []struct {
		lib   Lib
		name  string
		found bool
	}{{LibCUDA, "cuEventElapsedTime", false}, {LibCUDA, "cuEventElapsedTime_v2", true}, {LibCUBLAS, "cublasSetMathMode", false}} {
		if got := Sym(c.lib, c.name) != nil; got != c.found {
			t.Errorf("lacking %v: Sym(%d, %q) found %v, want %v", lacks.Lacks, c.lib, c.name, got, c.found)
		}
	}
}

// TestConfigure checks that a bad configuration is refused, that one is
// refused while a context is retained, and the driver before cuInit.
func TestConfigure(t *testing.T) {
	bad := DefaultConfig()
	bad.Order = 7
	if err := Configure(bad); err == nil {
		t.Fatal("Configure took order 7")
	}
	if err := Configure(DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if _, r := deviceCount(); r != rNotInit {
		t.Fatalf("cuDeviceGetCount before cuInit: %v, want CUDA_ERROR_NOT_INITIALIZED", r)
	}
	none := DefaultConfig()
	none.Devices = 0
	if err := Configure(none); err != nil {
		t.Fatal(err)
	}
	want(t, "cuInit without devices", initResult(), rNoDevice)
	p, err := newProbe(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := Configure(DefaultConfig()); err == nil {
		t.Error("Configure while a context is retained succeeded")
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if err := Configure(DefaultConfig()); err != nil {
		t.Fatalf("Configure after the release: %v", err)
	}
}

// TestInvalidContext checks that calls needing a context fail without one
// current on the calling thread.
func TestInvalidContext(t *testing.T) {
	p := open(t, DefaultConfig())
	for name, r := range p.noContextCalls() {
		if r != rInvalidCtx {
			t.Errorf("%s without a current context: %v, want CUDA_ERROR_INVALID_CONTEXT", name, r)
		}
	}
	d, r := p.alloc(8)
	want(t, "cuMemAlloc with the context current again", r, rSuccess)
	want(t, "cuMemFree", p.free(d), rSuccess)
}

// TestLazyStream checks that the stream runs its copies when the host
// waits, not when they are enqueued: a pinned source is read late, a
// pinned destination written late, pageable memory at once.
func TestLazyStream(t *testing.T) {
	p := open(t, DefaultConfig())
	const n = 64
	d, r := p.alloc(n)
	want(t, "cuMemAlloc", r, rSuccess)
	defer p.free(d)
	pin, r := p.hostAlloc(n)
	want(t, "cuMemHostAlloc", r, rSuccess)
	defer p.hostFree(pin)
	first, second := bytes.Repeat([]byte{1}, n), bytes.Repeat([]byte{2}, n)

	t.Run("pinned source read at the sync", func(t *testing.T) {
		copy(pin, first)
		want(t, "HtoD", p.htod(d, pin), rSuccess)
		copy(pin, second) // reused before the copy ran
		want(t, "sync", p.sync(), rSuccess)
		if got := peek(d, n); !bytes.Equal(got, second) {
			t.Fatalf("device holds %v, want the bytes the buffer held at the sync (%v)", got[:4], second[:4])
		}
	})
	t.Run("pageable source read at once", func(t *testing.T) {
		src := append([]byte{}, first...)
		want(t, "HtoD", p.htod(d, src), rSuccess)
		copy(src, second)
		want(t, "sync", p.sync(), rSuccess)
		if got := peek(d, n); !bytes.Equal(got, first) {
			t.Fatalf("device holds %v, want the bytes at the enqueue (%v)", got[:4], first[:4])
		}
	})
	t.Run("pinned destination written at the sync", func(t *testing.T) {
		for i := range pin {
			pin[i] = 0xFF
		}
		want(t, "memset", p.memset(d, 7, n), rSuccess)
		want(t, "DtoH", p.dtoh(pin, d), rSuccess)
		if !bytes.Equal(pin, bytes.Repeat([]byte{0xFF}, n)) {
			t.Fatalf("pinned destination changed before any wait: %v", pin[:4])
		}
		if got := peek(d, n); !bytes.Equal(got, first) {
			t.Fatalf("the memset ran before any wait: device holds %v", got[:4])
		}
		want(t, "sync", p.sync(), rSuccess)
		if !bytes.Equal(pin, bytes.Repeat([]byte{7}, n)) {
			t.Fatalf("pinned destination after the sync: %v, want 7s", pin[:4])
		}
	})
	t.Run("pageable destination waits", func(t *testing.T) {
		want(t, "memset", p.memset(d, 9, n), rSuccess)
		dst := make([]byte, n)
		want(t, "DtoH", p.dtoh(dst, d), rSuccess)
		if !bytes.Equal(dst, bytes.Repeat([]byte{9}, n)) {
			t.Fatalf("pageable DtoH read %v, want the memset's 9s", dst[:4])
		}
	})
	t.Run("ranges", func(t *testing.T) {
		want(t, "HtoD past the end", p.htod(d+1, first), rInvalidValue)
		want(t, "DtoH past the end", p.dtoh(make([]byte, n+1), d), rInvalidValue)
		want(t, "memset of no allocation", p.memset(d+n+512, 0, 1), rInvalidValue)
	})
}

// TestHostWaits checks what HostWaits counts: each call that waits for
// work not yet run (a stream sync, an event sync, a copy into pageable
// memory, a free), and no call that finds the work done or only enqueues
// (asynchronous copies to pinned memory, a full queue running itself).
func TestHostWaits(t *testing.T) {
	p := open(t, DefaultConfig())
	const n = 64
	d, r := p.alloc(n)
	want(t, "cuMemAlloc", r, rSuccess)
	pin, r := p.hostAlloc(n)
	want(t, "cuMemHostAlloc", r, rSuccess)
	defer p.hostFree(pin)
	e, r := p.eventCreate(0)
	want(t, "cuEventCreate", r, rSuccess)
	defer p.eventDestroy(e)
	for _, tc := range []struct {
		name  string
		calls func() cuResult
		waits uint64
	}{
		{"asynchronous copies", func() cuResult {
			if r := p.memset(d, 1, n); r != rSuccess {
				return r
			}
			if r := p.htod(d, pin); r != rSuccess {
				return r
			}
			return p.dtoh(pin, d)
		}, 0},
		{"a sync of pending work", p.sync, 1},
		{"a sync of nothing", p.sync, 0},
		{"pageable copy of pending work", func() cuResult {
			if r := p.memset(d, 2, n); r != rSuccess {
				return r
			}
			return p.dtoh(make([]byte, n), d)
		}, 1},
		{"event sync, pending and done", func() cuResult {
			if r := p.memset(d, 3, n); r != rSuccess {
				return r
			}
			if r := p.record(e); r != rSuccess {
				return r
			}
			if r := p.eventSync(e); r != rSuccess {
				return r
			}
			return p.eventSync(e)
		}, 1},
		{"a full queue runs itself", func() cuResult {
			for i := 0; i < 1100; i++ {
				if r := p.memset(d, byte(i), 1); r != rSuccess {
					return r
				}
			}
			return rSuccess
		}, 0},
		{"a free waits for the rest", func() cuResult { return p.free(d) }, 1},
	} {
		before := HostWaits()
		want(t, tc.name, tc.calls(), rSuccess)
		if got := HostWaits() - before; got != tc.waits {
			t.Errorf("%s: %d host waits, want %d", tc.name, got, tc.waits)
		}
	}
}

// TestQueueLimit checks that a stream runs its queue, without a wait, once
// it holds 1024 items.
func TestQueueLimit(t *testing.T) {
	p := open(t, DefaultConfig())
	d, r := p.alloc(1)
	want(t, "cuMemAlloc", r, rSuccess)
	defer p.free(d)
	for i := 1; i <= 1023; i++ {
		want(t, "memset", p.memset(d, byte(i%200), 1), rSuccess)
	}
	if v := peek(d, 1)[0]; v != 0xFF {
		t.Fatalf("a memset ran with 1023 items queued: %d", v)
	}
	want(t, "memset", p.memset(d, 201, 1), rSuccess)
	if v := peek(d, 1)[0]; v != 201 {
		t.Fatalf("1024 items queued and not run: the byte is %d, want 201", v)
	}
}

// TestStickyError checks that a failed stream item is returned by every
// later wait, that later work does not run, and that the context's reset
// forgets it.
func TestStickyError(t *testing.T) {
	p, err := newProbe(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	d, r := p.alloc(8)
	want(t, "cuMemAlloc", r, rSuccess)
	const launchFailed cuResult = 719
	want(t, "enqueue a failure", p.fail(launchFailed), rSuccess)
	want(t, "memset", p.memset(d, 3, 8), rSuccess)
	want(t, "sync", p.sync(), launchFailed)
	if v := peek(d, 1)[0]; v != 0xFF {
		t.Errorf("work after the failure ran (%d)", v)
	}
	want(t, "a second sync", p.sync(), launchFailed)
	e, _ := p.eventCreate(0)
	want(t, "record", p.record(e), rSuccess)
	want(t, "event sync", p.eventSync(e), launchFailed)
	want(t, "pageable DtoH", p.dtoh(make([]byte, 8), d), launchFailed)
	if err := p.close(); err != nil { // the last release resets the context, freeing d
		t.Fatal(err)
	}
	q := open(t, DefaultConfig())
	want(t, "sync in a fresh context", q.sync(), rSuccess)
}

// TestPoison checks that new and freed memory holds 0xFF bytes, that a
// freed block is no longer a device range, and the memory accounting.
func TestPoison(t *testing.T) {
	p := open(t, DefaultConfig())
	const n = 1000
	free0, total, r := p.memInfo()
	want(t, "cuMemGetInfo", r, rSuccess)
	if total != 16<<30 || free0 != total {
		t.Fatalf("cuMemGetInfo: %d free of %d, want all of 16 GiB", free0, total)
	}
	d, r := p.alloc(n)
	want(t, "cuMemAlloc", r, rSuccess)
	if d%256 != 0 {
		t.Errorf("allocation at %#x, not 256-byte aligned", d)
	}
	poison := bytes.Repeat([]byte{0xFF}, n)
	got := make([]byte, n)
	want(t, "DtoH", p.dtoh(got, d), rSuccess)
	if !bytes.Equal(got, poison) {
		t.Fatal("a new allocation does not hold 0xFF bytes")
	}
	if f, _, _ := p.memInfo(); f != free0-n {
		t.Errorf("free memory after allocating %d bytes: %d, want %d", n, f, free0-n)
	}
	pin, r := p.hostAlloc(n)
	want(t, "cuMemHostAlloc", r, rSuccess)
	if !bytes.Equal(pin, poison) {
		t.Fatal("new pinned memory does not hold 0xFF bytes")
	}
	want(t, "memset", p.memset(d, 0, n), rSuccess)
	want(t, "free", p.free(d), rSuccess) // waits for the memset
	if !bytes.Equal(peek(d, n), poison) {
		t.Fatal("freed memory does not hold 0xFF bytes")
	}
	want(t, "DtoH of freed memory", p.dtoh(got, d), rInvalidValue)
	want(t, "second free", p.free(d), rInvalidValue)
	want(t, "cuMemFreeHost", p.hostFree(pin), rSuccess)
	if f, _, _ := p.memInfo(); f != free0 {
		t.Errorf("free memory after the free: %d, want %d", f, free0)
	}
	_, r = p.alloc(0)
	want(t, "cuMemAlloc of 0 bytes", r, rInvalidValue)
	_, r = p.alloc(17 << 30)
	want(t, "cuMemAlloc of more than the device", r, 2)
}

// TestEvents checks that a recorded event is not complete before a wait,
// and is after, and the timing rules.
func TestEvents(t *testing.T) {
	p := open(t, DefaultConfig())
	a, r := p.eventCreate(0)
	want(t, "cuEventCreate", r, rSuccess)
	b, _ := p.eventCreate(0)
	nt, _ := p.eventCreate(2) // CU_EVENT_DISABLE_TIMING
	defer p.eventDestroy(a)
	defer p.eventDestroy(b)
	defer p.eventDestroy(nt)
	want(t, "synchronize a never recorded event", p.eventSync(b), rSuccess)
	want(t, "record", p.record(a), rSuccess)
	want(t, "record", p.record(b), rSuccess)
	_, r = p.elapsed(a, b)
	want(t, "elapsed time before a wait", r, rNotReady)
	want(t, "synchronize", p.eventSync(b), rSuccess)
	ms, r := p.elapsed(a, b)
	want(t, "elapsed time after the wait", r, rSuccess)
	if ms < 0 || math.IsNaN(float64(ms)) {
		t.Errorf("elapsed time %v", ms)
	}
	want(t, "record", p.record(nt), rSuccess)
	want(t, "synchronize", p.eventSync(nt), rSuccess)
	_, r = p.elapsed(a, nt)
	want(t, "elapsed time of a DISABLE_TIMING event", r, rInvalidHdl)
	e, _ := p.eventCreate(0)
	want(t, "destroy", p.eventDestroy(e), rSuccess)
	want(t, "record a destroyed event", p.record(e), rInvalidHdl)
}

// TestModuleRules checks which images cuModuleLoadData takes on a CUDA
// 12.8 driver (PTX ISA 8.7) with an sm_90 device.
func TestModuleRules(t *testing.T) {
	p := open(t, DefaultConfig())
	h := sourceHash()
	ptx := func(isa, arch, hash string) string {
		return "// orthonet host model of NVRTC 12.8\n.version " + isa + "\n.target sm_" + arch +
			"\n.address_size 64\n// source " + hash + "\n"
	}
	cubin := func(arch, cuda, hash string) string {
		return "\x7fELForthonet-cubin sm_" + arch + " cuda " + cuda + " source " + hash + "\n"
	}
	for _, c := range []struct {
		name, image string
		want        cuResult
	}{
		{"ptx", ptx("8.7", "90", h), rSuccess},
		{"older ptx for an older arch", ptx("7.8", "80", h), rSuccess},
		{"ptx too new for the driver", ptx("8.8", "90", h), rUnsupPTX},
		{"ptx for a newer arch", ptx("8.7", "100", h), rNoBinary},
		{"ptx of another source", ptx("8.7", "90", "0123456789abcdef"), rInvalidImage},
		{"ptx without a source", strings.Replace(ptx("8.7", "90", h), "// source", "// from", 1), rInvalidPTX},
		{"ptx of 32-bit addresses", strings.Replace(ptx("8.7", "90", h), "size 64", "size 32", 1), rInvalidPTX},
		{"garbage", "hello", rInvalidPTX},
		{"cubin", cubin("90", "12.8", h), rSuccess},
		{"cubin of another major", cubin("80", "12.8", h), rNoBinary},
		{"cubin of a newer minor", cubin("91", "12.8", h), rNoBinary},
		{"cubin of a newer CUDA", cubin("90", "13.0", h), rUnsupPTX},
		{"cubin of another source", cubin("90", "12.8", "fedcba9876543210"), rInvalidImage},
		{"malformed cubin", "\x7fELF something else\n", rInvalidImage},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, r := p.load([]byte(c.image))
			want(t, "cuModuleLoadData", r, c.want)
			if r != rSuccess {
				return
			}
			if _, r := p.function(m, "on_fill_f64"); r != rSuccess {
				t.Errorf("cuModuleGetFunction(on_fill_f64): %v", r)
			}
			if _, r := p.function(m, "on_no_such_kernel"); r != rNotFound {
				t.Errorf("cuModuleGetFunction of an unknown name: %v, want CUDA_ERROR_NOT_FOUND", r)
			}
			if _, r := p.function(m, "on_test_order"); r != rNotFound {
				t.Errorf("cuModuleGetFunction found a test kernel: %v", r)
			}
			want(t, "cuModuleUnload", p.unload(m), rSuccess)
			want(t, "cuModuleUnload twice", p.unload(m), rInvalidHdl)
		})
	}
}

// TestLaunchArguments checks cuLaunchKernel's refusals (argument sizes
// that do not fill the struct, shapes the kernels do not take) and a fill
// through both ways of passing arguments.
func TestLaunchArguments(t *testing.T) {
	p := open(t, DefaultConfig())
	mod, r := p.load([]byte("\x7fELForthonet-cubin sm_90 cuda 12.8 source " + sourceHash() + "\n"))
	want(t, "cuModuleLoadData", r, rSuccess)
	defer p.unload(mod)
	f, r := p.function(mod, "on_fill_f64") // FillArgs<double>{i64 n; double v; double *dst}: 24 bytes
	want(t, "cuModuleGetFunction", r, rSuccess)
	const n = 1000
	d, r := p.alloc(8 * n)
	want(t, "cuMemAlloc", r, rSuccess)
	defer p.free(d)
	args := []uint64{n, math.Float64bits(2.5), d}
	ok := shape{grid: [3]uint32{4, 1, 1}, block: [3]uint32{256, 1, 1}}
	for _, c := range []struct {
		name  string
		s     shape
		extra bool
		size  int
		want  cuResult
	}{
		{"extra of 16 bytes for 24", ok, true, 16, rInvalidValue},
		{"extra of 32 bytes for 24", ok, true, 32, rInvalidValue},
		{"no blocks", shape{grid: [3]uint32{0, 1, 1}, block: ok.block}, false, 0, rInvalidValue},
		{"2-D grid", shape{grid: [3]uint32{4, 2, 1}, block: ok.block}, false, 0, rInvalidValue},
		{"2-D block", shape{grid: ok.grid, block: [3]uint32{128, 2, 1}}, false, 0, rInvalidValue},
		{"block of 1025", shape{grid: ok.grid, block: [3]uint32{1025, 1, 1}}, false, 0, rInvalidValue},
		{"dynamic shared memory", shape{grid: ok.grid, block: ok.block, shared: 16}, false, 0, rInvalidValue},
		{"extra of 24 bytes", ok, true, 24, rSuccess},
		{"params", ok, false, 0, rSuccess},
	} {
		t.Run(c.name, func(t *testing.T) {
			want(t, "memset", p.memset(d, 0, 8*n), rSuccess)
			if c.extra {
				r = p.launchExtra(f, c.s, args, c.size)
			} else {
				r = p.launch(f, c.s, args)
			}
			want(t, "cuLaunchKernel", r, c.want)
			want(t, "sync", p.sync(), rSuccess)
			out := peek(d, 8*n)
			for i := 0; i < n; i++ {
				v := math.Float64frombits(binary.LittleEndian.Uint64(out[8*i:]))
				if w := map[bool]float64{true: 2.5, false: 0}[c.want == rSuccess]; v != w {
					t.Fatalf("element %d: %v, want %v", i, v, w)
				}
			}
		})
	}
	args[1] = math.Float64bits(-1)
	want(t, "launch", p.launch(f, ok, args), rSuccess)
	args[1] = math.Float64bits(3) // the launch copied its arguments: this change comes too late
	want(t, "sync", p.sync(), rSuccess)
	if v := math.Float64frombits(binary.LittleEndian.Uint64(peek(d, 8))); v != -1 {
		t.Fatalf("fill after changing the arguments: %v, want the launch-time -1", v)
	}
}

// reduceRows runs on_reduce_rows_f64 (a KERNEL_SYNC kernel: a block per
// row, a tree reduction at __syncthreads) with op on rows x cols values.
func reduceRows(t *testing.T, c Config, op int, x []float64, rows int) []float64 {
	t.Helper()
	p, err := newProbe(c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	}()
	mod, r := p.load([]byte("\x7fELForthonet-cubin sm_90 cuda 12.8 source " + sourceHash() + "\n"))
	want(t, "cuModuleLoadData", r, rSuccess)
	defer p.unload(mod)
	f, r := p.function(mod, "on_reduce_rows_f64")
	want(t, "cuModuleGetFunction", r, rSuccess)
	src, _ := p.alloc(8 * len(x))
	dst, _ := p.alloc(8 * rows)
	defer p.free(src)
	defer p.free(dst)
	b := make([]byte, 8*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	want(t, "HtoD", p.htod(src, b), rSuccess)
	args := []uint64{uint64(op), uint64(rows), uint64(len(x) / rows), 1, src, dst}
	var out []float64
	for range 3 { // under Rotate: forward, reverse, random
		want(t, "launch", p.launch(f, shape{grid: [3]uint32{uint32(rows), 1, 1}, block: [3]uint32{256, 1, 1}}, args), rSuccess)
		o := make([]byte, 8*rows)
		want(t, "DtoH", p.dtoh(o, dst), rSuccess)
		for i := range rows {
			out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(o[8*i:])))
		}
	}
	return out
}

// TestSyncKernelOrders checks that a KERNEL_SYNC kernel gives the right
// answer with its blocks and threads in every order.
func TestSyncKernelOrders(t *testing.T) {
	const rows, cols = 3, 1000
	x := make([]float64, rows*cols)
	sum, max := make([]float64, rows), make([]float64, rows)
	for i := range x {
		x[i] = float64((i*7919)%1013) - 300
		r := i / cols
		sum[r] += x[i]
		if i%cols == 0 || x[i] > max[r] {
			max[r] = x[i]
		}
	}
	for _, order := range []Order{Forward, Reverse, Random, Rotate} {
		for op, wantRows := range map[int][]float64{1: sum, 2: max} {
			t.Run(fmt.Sprintf("order %d op %d", order, op), func(t *testing.T) {
				c := DefaultConfig()
				c.Order = order
				c.Seed = 42
				got := reduceRows(t, c, op, x, rows)
				for i, v := range got {
					if v != wantRows[i%rows] {
						t.Fatalf("launch %d row %d: %v, want %v", i/rows, i%rows, v, wantRows[i%rows])
					}
				}
			})
		}
	}
}

// threadOrder returns, for each of launches launches of on_test_order on
// 2 blocks of 8 threads, the global thread indices in the order they ran.
func threadOrder(t *testing.T, c Config, launches int) [][]int64 {
	t.Helper()
	enableTestKernels(true)
	defer enableTestKernels(false)
	p, err := newProbe(c)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	mod, r := p.load([]byte("\x7fELForthonet-cubin sm_90 cuda 12.8 source " + sourceHash() + "\n"))
	want(t, "cuModuleLoadData", r, rSuccess)
	defer p.unload(mod)
	f, r := p.function(mod, "on_test_order")
	want(t, "cuModuleGetFunction", r, rSuccess)
	const n = 16
	d, _ := p.alloc(8 * (n + 1))
	defer p.free(d)
	var out [][]int64
	for range launches {
		want(t, "memset", p.memset(d, 0, 8*(n+1)), rSuccess)
		want(t, "launch", p.launch(f, shape{grid: [3]uint32{2, 1, 1}, block: [3]uint32{8, 1, 1}}, []uint64{d, d + 8}), rSuccess)
		want(t, "sync", p.sync(), rSuccess)
		b := peek(d+8, 8*n)
		o := make([]int64, n)
		for i := range o {
			o[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		out = append(out, o)
	}
	return out
}

// TestThreadOrders checks the orders blocks and threads run in: forward,
// reverse, a seeded random one, and the three in turn under Rotate.
func TestThreadOrders(t *testing.T) {
	fwd, rev := make([]int64, 16), make([]int64, 16)
	for i := range fwd {
		fwd[i], rev[i] = int64(i), int64(15-i)
	}
	cfg := func(o Order, seed uint64) Config {
		c := DefaultConfig()
		c.Order, c.Seed = o, seed
		return c
	}
	eq := func(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	if got := threadOrder(t, cfg(Forward, 1), 1)[0]; !eq(got, fwd) {
		t.Errorf("forward: %v", got)
	}
	if got := threadOrder(t, cfg(Reverse, 1), 1)[0]; !eq(got, rev) {
		t.Errorf("reverse: %v", got)
	}
	r1 := threadOrder(t, cfg(Random, 1), 2)
	r1again := threadOrder(t, cfg(Random, 1), 1)[0]
	r2 := threadOrder(t, cfg(Random, 2), 1)[0]
	if eq(r1[0], fwd) || eq(r1[0], rev) || eq(r1[0], r1[1]) || eq(r1[0], r2) {
		t.Errorf("random orders not random: seed 1 %v then %v, seed 2 %v", r1[0], r1[1], r2)
	}
	if !eq(r1[0], r1again) {
		t.Errorf("seed 1 gave %v, then %v", r1[0], r1again)
	}
	rot := threadOrder(t, cfg(Rotate, 1), 4)
	if !eq(rot[0], fwd) || !eq(rot[1], rev) || eq(rot[2], fwd) || eq(rot[2], rev) || !eq(rot[3], fwd) {
		t.Errorf("rotating orders: %v", rot)
	}
}

// TestSharedPoisonedPerBlock checks that every block's SHARED array starts
// as 0xFF bytes, though the block before wrote it.
func TestSharedPoisonedPerBlock(t *testing.T) {
	enableTestKernels(true)
	defer enableTestKernels(false)
	p := open(t, DefaultConfig())
	mod, r := p.load([]byte("\x7fELForthonet-cubin sm_90 cuda 12.8 source " + sourceHash() + "\n"))
	want(t, "cuModuleLoadData", r, rSuccess)
	defer p.unload(mod)
	f, r := p.function(mod, "on_test_shared")
	want(t, "cuModuleGetFunction", r, rSuccess)
	const blocks = 5
	d, _ := p.alloc(8 * blocks)
	defer p.free(d)
	for range 2 {
		want(t, "launch", p.launch(f, shape{grid: [3]uint32{blocks, 1, 1}, block: [3]uint32{32, 1, 1}}, []uint64{d}), rSuccess)
		want(t, "sync", p.sync(), rSuccess)
		for b := range blocks {
			if v := binary.LittleEndian.Uint64(peek(d+uint64(8*b), 8)); v != 1 {
				t.Fatalf("block %d's shared array did not start poisoned (%d)", b, v)
			}
		}
	}
}

const abortEnv = "STANDIN_TEST_ABORT_KERNEL"

// TestBarrierAborts checks, in a child process, that a divergent
// __syncthreads, and one in a kernel not defined KERNEL_SYNC, abort the
// process with a message naming the kernel, the line and the threads.
func TestBarrierAborts(t *testing.T) {
	if name := os.Getenv(abortEnv); name != "" {
		enableTestKernels(true)
		p := open(t, DefaultConfig())
		mod, r := p.load([]byte("\x7fELForthonet-cubin sm_90 cuda 12.8 source " + sourceHash() + "\n"))
		want(t, "cuModuleLoadData", r, rSuccess)
		f, r := p.function(mod, name)
		want(t, "cuModuleGetFunction", r, rSuccess)
		want(t, "launch", p.launch(f, shape{grid: [3]uint32{2, 1, 1}, block: [3]uint32{256, 1, 1}}, []uint64{10}), rSuccess)
		p.sync()
		t.Fatal("the launch returned")
	}
	for _, c := range []struct {
		kernel string
		msg    []string
	}{
		{"on_test_diverge", []string{"divergent barrier in kernel on_test_diverge", "10 of 256 threads at the __syncthreads of line", "246 threads finished"}},
		{"on_test_plain_sync", []string{"__syncthreads (line", "in kernel on_test_plain_sync, which is not defined KERNEL_SYNC"}},
	} {
		t.Run(c.kernel, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBarrierAborts$")
			cmd.Env = append(os.Environ(), abortEnv+"="+c.kernel)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the child did not abort:\n%s", out)
			}
			for _, m := range c.msg {
				if !strings.Contains(string(out), m) {
					t.Errorf("the child's output lacks %q:\n%s", m, out)
				}
			}
		})
	}
}
