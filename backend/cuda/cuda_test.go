//go:build cgo

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// onGPU reports whether the tests run on a real GPU (ORTHONET_CUDA_GPU=1,
// as scripts/gpu_check.sh sets it) instead of the host model.
func onGPU() bool { return os.Getenv("ORTHONET_CUDA_GPU") == "1" }

// TestMain runs the tests on the host model of the device unless a GPU is
// asked for.
func TestMain(m *testing.M) {
	if !onGPU() {
		os.Setenv(cuda.StandInEnv, "1")
	}
	os.Exit(m.Run())
}

// start returns a backend on device 0 with o, closed when the test ends.
func start(t *testing.T, o cuda.Options) *cuda.Backend {
	t.Helper()
	b, err := cuda.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b.(*cuda.Backend)
}

// configure sets the host model for one test and restores its default
// after it (on a GPU it skips the test: the model's settings are the point).
func configure(t *testing.T, edit func(*standin.Config)) {
	t.Helper()
	if onGPU() {
		t.Skip("a setting of the host model")
	}
	cuda.Pretend(t, edit)
}

// TestKernelsAgreeWithCPU runs every kernel through backend/cuda and
// compares it with the CPU backend: on the host model once in each order
// of blocks and threads (forward, reverse, seeded random), and once with
// grids of two blocks so that every grid-stride loop repeats.
func TestKernelsAgreeWithCPU(t *testing.T) {
	if onGPU() {
		for _, g := range []int{0, 2} {
			b := start(t, cuda.Options{MaxGrid: g})
			t.Log(b.Name())
			backendtest.Compare(t, b)
		}
		return
	}
	for _, c := range []struct {
		order   standin.Order
		maxGrid int
	}{{standin.Forward, 0}, {standin.Reverse, 0}, {standin.Random, 0}, {standin.Rotate, 2}} {
		t.Run(fmt.Sprintf("order=%d,maxgrid=%d", c.order, c.maxGrid), func(t *testing.T) {
			configure(t, func(m *standin.Config) { m.Order = c.order })
			b := start(t, cuda.Options{MaxGrid: c.maxGrid})
			backendtest.Compare(t, b)
		})
	}
}

// TestStagingRing copies distinct data into many buffers with no wait in
// between, more copies than the staging ring has buffers, and reads every
// one back: a staging buffer reused before the stream has copied out of it
// would leave another copy's data behind.
func TestStagingRing(t *testing.T) {
	b := start(t, cuda.Options{})
	for _, n := range []int{1000, 300000} { // through the ring; through the large-copy buffer
		bufs := make([]backend.Buffer, 80)
		for i := range bufs {
			buf, err := b.Alloc(backend.Float32, n)
			if err != nil {
				t.Fatal(err)
			}
			bufs[i] = buf
			v := make([]float32, n)
			for j := range v {
				v[j] = float32(i*n + j)
			}
			if err := b.CopyIn(buf, 0, v); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]float32, n)
		for i, buf := range bufs {
			if err := b.CopyOut(got, buf, 0); err != nil {
				t.Fatal(err)
			}
			for j, v := range got {
				if v != float32(i*n+j) {
					t.Fatalf("%d-element copy %d: element %d is %v, want %v", n, i, j, v, float32(i*n+j))
				}
			}
			if err := b.Free(buf); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCopyOutWaits runs kernels and reads their result at once: CopyOut
// must wait for the kernels queued before it.
func TestCopyOutWaits(t *testing.T) {
	b := start(t, cuda.Options{})
	const n = 5000
	x, _ := b.Alloc(backend.Float64, n)
	y, _ := b.Alloc(backend.Float64, n)
	for round := range 3 {
		fill, err := b.Prepare(backend.Fill{N: n, Dst: backend.At(x, 0), Value: float64(round + 1)})
		if err != nil {
			t.Fatal(err)
		}
		sq, err := b.Prepare(backend.Map{Op: backend.Square, N: n, Src: backend.At(x, 0), Dst: backend.At(y, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if err := fill(); err != nil {
			t.Fatal(err)
		}
		if err := sq(); err != nil {
			t.Fatal(err)
		}
		got := make([]float64, n)
		if err := b.CopyOut(got, y, 0); err != nil {
			t.Fatal(err)
		}
		want := float64((round + 1) * (round + 1))
		for i, v := range got {
			if v != want {
				t.Fatalf("round %d: element %d is %v, want %v", round, i, v, want)
			}
		}
	}
}

// TestMemoryFlat runs a set of prepared kernels 200 times and checks that
// the device's free memory does not move.
func TestMemoryFlat(t *testing.T) {
	b := start(t, cuda.Options{})
	const n = 1 << 14
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
		backend.Gemm{M: 32, N: 32, K: 32, Alpha: 1, A: backend.At(bufs[0], 0), B: backend.At(bufs[1], 0), C: backend.At(bufs[2], 0), LDA: 32, LDB: 32, LDC: 32},
		backend.Attention{Seqs: 2, Tokens: 8, Heads: 2, D: 16, Scale: 0.25, Q: backend.At(bufs[0], 0), K: backend.At(bufs[1], 0), V: backend.At(bufs[2], 0), Out: backend.At(bufs[3], 0)},
		backend.LayerNormParamGrad{Rows: 16, D: 64, Eps: 1e-5, X: backend.At(bufs[0], 0), DY: backend.At(bufs[1], 0), DParams: backend.At(bufs[2], 0)},
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
	for range 200 {
		step()
	}
	free1, total, err := b.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("free device memory %d -> %d of %d bytes", free0, free1, total)
	if free1 != free0 {
		t.Errorf("free device memory moved from %d to %d bytes over 200 runs", free0, free1)
	}
}

// TestRowFault checks that a bad row index fails the next Sync with its
// value, and every later one.
func TestRowFault(t *testing.T) {
	b := start(t, cuda.Options{})
	gatherBadRow(t, b)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "row index 4 (entry 1") {
		t.Fatalf("Sync after a bad row: %v, want the row index 4 at entry 1", err)
	}
	if err := b.Sync(); err == nil {
		t.Fatal("a second Sync forgot the fault")
	}
}

// gatherBadRow runs on b, without waiting, a gather of rows 1 and 4 of a
// matrix of 4 rows: row index 4, entry 1 of the indices, is out of range.
func gatherBadRow(t *testing.T, b backend.Backend) {
	t.Helper()
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
}

// TestCloseReportsFault checks that Close reports a bad row index that no
// wait has met.
func TestCloseReportsFault(t *testing.T) {
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gatherBadRow(t, be)
	if err := be.Close(); err == nil || !strings.Contains(err.Error(), "row index 4 (entry 1") {
		t.Fatalf("Close after an unwaited bad row: %v, want the row index 4 at entry 1", err)
	}
}

// TestBadInput checks that the backend refuses what it cannot do with an
// error naming it, and leaves the device usable.
func TestBadInput(t *testing.T) {
	b := start(t, cuda.Options{})
	other := start(t, cuda.Options{})
	f32, _ := b.Alloc(backend.Float32, 4)
	foreign, _ := other.Alloc(backend.Float32, 4)
	freed, _ := b.Alloc(backend.Float32, 4)
	if err := b.Free(freed); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"negative size", func() error { _, err := b.Alloc(backend.Float32, -1); return err }(), "buffer of -1 elements"},
		{"copy of another type", b.CopyIn(f32, 0, []float64{1}), "float64 data for a buffer of float32"},
		{"copy past the end", b.CopyIn(f32, 3, []float32{1, 2}), "2 elements at 3 of a buffer of 4"},
		{"copy out past the end", b.CopyOut(make([]float32, 5), f32, 0), "5 elements at 0 of a buffer of 4"},
		{"another backend's buffer", b.CopyIn(foreign, 0, []float32{1}), "not a live buffer of this backend"},
		{"a freed buffer", b.CopyIn(freed, 0, []float32{1}), "not a live buffer of this backend"},
		{"a freed buffer freed again", b.Free(freed), "not a live buffer of this backend"},
		{"a host type the device has not", b.CopyIn(f32, 0, []string{"x"}), "cuda:"},
		{"a kernel on another backend's buffer", func() error {
			_, err := b.Prepare(backend.Fill{N: 4, Dst: backend.At(foreign, 0), Value: 1})
			return err
		}(), "not a live buffer of this backend"},
	}
	for _, tc := range cases {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	if err := b.CopyIn(f32, 0, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if err := b.CopyOut(got, f32, 0); err != nil || got[3] != 4 {
		t.Errorf("after the refusals: %v, %v", got, err)
	}
	if err := b.Free(f32); err != nil || b.Live() != 0 {
		t.Errorf("after freeing every buffer: %v, %d bytes live", err, b.Live())
	}
}

// TestQFFault checks that the Q factor of a rank-deficient matrix fails the
// next Sync, naming the factorization and the first column that depends on
// those before it, and every later one: on the one-block path (few
// columns) and on cuSOLVER's (more; with more columns than a block has
// threads, and a second dependent column far after the first).
func TestQFFault(t *testing.T) {
	for _, c := range []struct{ m, n, dup, of, late int }{
		{4, 3, 2, 0, -1},
		{40, 34, 33, 0, -1},
		{320, 300, 1, 0, 299},
	} {
		b := start(t, cuda.Options{})
		m, n := c.m, c.n
		a, err := b.Alloc(backend.Float64, m*n)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, m*n)
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		for i := range m {
			for j := range n {
				v[i*n+j] = rng.NormFloat64()
			}
			v[i*n+c.dup] = 2 * v[i*n+c.of] // a column twice an earlier one
			if c.late >= 0 {
				// Columns all but dependent (a relative 3e-8 off): their
				// pivots, positive, fail the check rather than cuSOLVER.
				v[i*n+c.dup] += 3e-8 * v[i*n+c.of] * float64(i%3)
				v[i*n+c.late] = v[i*n+3] * (1 + 3e-8*float64(i%2))
			}
		}
		if err := b.CopyIn(a, 0, v); err != nil {
			t.Fatal(err)
		}
		f, err := b.Prepare(backend.QF{M: m, N: n, A: backend.At(a, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if err := f(); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("QR factorization failed: pivot %d of the %d x %d", c.dup, n, n)
		if err := b.Sync(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%d x %d: Sync after the Q factor of a rank-deficient matrix: %v, want %q", m, n, err, want)
		}
		if err := b.Sync(); err == nil {
			t.Fatalf("%d x %d: a second Sync forgot the fault", m, n)
		}
	}
}

// TestProfile checks that a profiling backend counts every run of every
// kernel, summed by kind over the kernels prepared of it, and that their
// device time fits in the span it reports, also when a kernel runs twice
// between two waits (its events are recorded again).
func TestProfile(t *testing.T) {
	be := start(t, cuda.Options{Profile: true})
	const n = 64
	a, _ := be.Alloc(backend.Float32, n*n)
	c, _ := be.Alloc(backend.Float32, n*n)
	// Each kind is prepared twice, interleaved, so that a kind's times are
	// summed over several prepared kernels while the table of kinds grows.
	gemm := backend.Gemm{M: n, N: n, K: n, Alpha: 1, A: backend.At(a, 0), B: backend.At(a, 0), C: backend.At(c, 0), LDA: n, LDB: n, LDC: n}
	tanh := backend.Map{Op: backend.Tanh, N: n * n, Src: backend.At(c, 0), Dst: backend.At(c, 0)}
	fns := make([]backend.Func, 0, 4)
	for _, k := range []backend.Kernel{gemm, tanh, gemm, tanh} {
		f, err := be.Prepare(k)
		if err != nil {
			t.Fatal(err)
		}
		fns = append(fns, f)
	}
	for i := range 10 {
		for range 1 + i%2 {
			for _, f := range fns {
				if err := f(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	kernels := profile(t, be)
	for _, k := range kernels {
		if k.Count != 30 || k.Total <= 0 {
			t.Errorf("%s: %d runs in %v, want 30 runs taking time", k.Kernel, k.Count, k.Total)
		}
	}
	if len(kernels) != 2 {
		t.Errorf("%d kinds of kernel, want 2", len(kernels))
	}
}

// profile returns be's kernel times, each logged, and reports an error
// unless their device time fits in the span the profile covers.
func profile(t *testing.T, be *cuda.Backend) []backend.KernelTime {
	t.Helper()
	kernels, span := be.KernelTimes()
	var busy time.Duration
	for _, k := range kernels {
		t.Logf("%s: %d runs, %v", k.Kernel, k.Count, k.Total)
		busy += k.Total
	}
	if busy > span+span/100 {
		t.Errorf("busy %v in a span of %v", busy, span)
	}
	return kernels
}

// TestProfileSteps checks that a profile times each step of a kernel of
// several on its own line (a Q factor's products, Cholesky factorizations
// and solves), each counted once a pass, inside the span it reports.
func TestProfileSteps(t *testing.T) {
	be := start(t, cuda.Options{Profile: true})
	const n, runs = 40, 3 // beyond the columns one block factors
	a, _ := be.Alloc(backend.Float64, n*n)
	v := make([]float64, n*n)
	for i := range n {
		v[i*n+i] = 2
		v[i*n+(i+1)%n] = 1
	}
	if err := be.CopyIn(a, 0, v); err != nil {
		t.Fatal(err)
	}
	f, err := be.Prepare(backend.QF{M: n, N: n, A: backend.At(a, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for range runs {
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for _, k := range profile(t, be) {
		seen[k.Kernel] = k.Count
	}
	for _, want := range []string{"qf: gemm 40x40x40", "qf: potrf 40", "qf: trsm 40x40"} {
		if seen[want] != 2*runs { // Cholesky QR twice
			t.Errorf("profile line %q counted %d times, want %d (lines %v)", want, seen[want], 2*runs, seen)
		}
	}
}
