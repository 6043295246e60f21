//go:build gpu

package cuda_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak"
)

// gpu returns a backend on device 0, or skips the test where there is none
// (fails instead with ORTHONET_REQUIRE_GPU=1, as make cuda-test sets it).
func gpu(t *testing.T) *cuda.Backend {
	t.Helper()
	b, err := cuda.New(cuda.Options{})
	if err != nil {
		if os.Getenv("ORTHONET_REQUIRE_GPU") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b.(*cuda.Backend)
}

// TestKernelsCompile compiles the kernel source with NVRTC for several
// architectures (no GPU needed) and checks that the PTX has an entry for
// every kernel the source defines.
func TestKernelsCompile(t *testing.T) {
	names := regexp.MustCompile(`(?m)^KERNEL(?:_SYNC)?\((\w+),`).FindAllStringSubmatch(cudak.Source, -1)
	if len(names) == 0 {
		t.Fatal("found no KERNEL definitions in the source")
	}
	for _, cc := range [][2]int{{7, 5}, {8, 0}, {9, 0}} {
		ptx, err := cuda.CompilePTX(cc[0], cc[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !strings.Contains(ptx, ".entry "+n[1]+"(") {
				t.Errorf("compute_%d%d: no entry %s in the PTX", cc[0], cc[1], n[1])
			}
		}
	}
}

// TestKernelsAgreeWithCPU runs every kernel on the GPU and on the CPU
// backend from the same inputs.
func TestKernelsAgreeWithCPU(t *testing.T) {
	b := gpu(t)
	t.Log(b.Name())
	backendtest.Compare(t, b, backendtest.Options{})
}

// TestMemoryFlat runs a set of prepared kernels 1000 times and checks that
// the device's free memory does not move.
func TestMemoryFlat(t *testing.T) {
	b := gpu(t)
	const n = 1 << 16
	var bufs []backend.Buffer
	for range 4 {
		buf, err := b.Alloc(backend.Float32, n)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, buf)
	}
	kernels := []backend.Kernel{
		backend.Fill{N: n, Dst: backend.At(bufs[0], 0), Value: 0.5},
		backend.Gemm{M: 256, N: 256, K: 256, Alpha: 1, A: backend.At(bufs[0], 0), B: backend.At(bufs[1], 0), C: backend.At(bufs[2], 0), LDA: 256, LDB: 256, LDC: 256},
		backend.Attention{Seqs: 4, Tokens: 64, Heads: 4, D: 256, Scale: 0.125, Q: backend.At(bufs[0], 0), K: backend.At(bufs[1], 0), V: backend.At(bufs[2], 0), Out: backend.At(bufs[3], 0)},
		backend.LayerNormParamGrad{Rows: 128, D: 256, Eps: 1e-5, X: backend.At(bufs[0], 0), DY: backend.At(bufs[1], 0), DParams: backend.At(bufs[2], 0)},
	}
	var fns []backend.Func
	for _, k := range kernels {
		f, err := b.Prepare(k)
		if err != nil {
			t.Fatal(err)
		}
		fns = append(fns, f)
	}
	host := make([]float32, n)
	step := func() {
		if err := b.CopyIn(bufs[1], 0, host); err != nil {
			t.Fatal(err)
		}
		for _, f := range fns {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.CopyOut(host[:1], bufs[3], 0); err != nil {
			t.Fatal(err)
		}
	}
	step()
	free0, _, err := b.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		step()
	}
	free1, total, err := b.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("free device memory %d -> %d of %d bytes", free0, free1, total)
	if free1 != free0 {
		t.Errorf("free device memory moved from %d to %d bytes over 1000 runs", free0, free1)
	}
}

// TestRowFault checks that a bad row index fails the next Sync with its
// value, and every later one.
func TestRowFault(t *testing.T) {
	b := gpu(t)
	rows, _ := b.Alloc(backend.Int32, 2)
	src, _ := b.Alloc(backend.Float32, 12)
	dst, _ := b.Alloc(backend.Float32, 6)
	if err := b.CopyIn(rows, 0, []int32{1, 4}); err != nil {
		t.Fatal(err)
	}
	f, err := b.Prepare(backend.GatherRows{N: 2, Width: 3, Rows: backend.At(rows, 0), Src: backend.At(src, 0), Dst: backend.At(dst, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "row index 4 (entry 1") {
		t.Fatalf("Sync after a bad row: %v, want the row index 4 at entry 1", err)
	}
	if err := b.Sync(); err == nil {
		t.Fatal("a second Sync forgot the fault")
	}
}

// TestProfile checks that a profiling backend counts every run of every
// kernel and that their device time fits in the span it reports.
func TestProfile(t *testing.T) {
	if os.Getenv("ORTHONET_REQUIRE_GPU") == "" {
		b, err := cuda.New(cuda.Options{})
		if err != nil {
			t.Skip(err)
		}
		b.Close()
	}
	be, err := cuda.New(cuda.Options{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	a, _ := be.Alloc(backend.Float32, 512*512)
	c, _ := be.Alloc(backend.Float32, 512*512)
	fns := make([]backend.Func, 0, 2)
	for _, k := range []backend.Kernel{
		backend.Gemm{M: 512, N: 512, K: 512, Alpha: 1, A: backend.At(a, 0), B: backend.At(a, 0), C: backend.At(c, 0), LDA: 512, LDB: 512, LDC: 512},
		backend.Map{Op: backend.Tanh, N: 512 * 512, Src: backend.At(c, 0), Dst: backend.At(c, 0)},
	} {
		f, err := be.Prepare(k)
		if err != nil {
			t.Fatal(err)
		}
		fns = append(fns, f)
	}
	for range 10 {
		for _, f := range fns {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	kernels, span := be.(backend.Timer).KernelTimes()
	var busy time.Duration
	for _, k := range kernels {
		t.Logf("%s: %d runs, %v", k.Kernel, k.Count, k.Total)
		if k.Count != 10 || k.Total <= 0 {
			t.Errorf("%s: %d runs in %v, want 10 runs taking time", k.Kernel, k.Count, k.Total)
		}
		busy += k.Total
	}
	if len(kernels) != 2 || busy > span+span/100 {
		t.Errorf("%d kinds of kernel, busy %v in a span of %v", len(kernels), busy, span)
	}
}
