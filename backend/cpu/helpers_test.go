package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// num is the element type of the float kernels under test.
type num interface{ float32 | float64 }

// floats runs a test's instances for float32 and float64 as subtests.
func floats(t *testing.T, f32, f64 func(*testing.T)) {
	t.Run("float32", f32)
	t.Run("float64", f64)
}

// dtypeOf returns the backend type of T.
func dtypeOf[T num]() backend.DType {
	var z T
	if _, ok := any(z).(float32); ok {
		return backend.Float32
	}
	return backend.Float64
}

// eps returns the machine epsilon of T.
func eps[T num]() float64 {
	if dtypeOf[T]() == backend.Float32 {
		return 0x1p-23
	}
	return 0x1p-52
}

// round returns v rounded to T, in float64.
func round[T num](v float64) float64 { return float64(T(v)) }

// backendNames name the backends of backends.
var backendNames = []string{"threads1", "default", "threads3"}

// backends returns a backend on one thread, the default backend, and one
// that splits every loop into as many pieces as it can across three
// goroutines.
func backends(t testing.TB) []*cpu.Backend {
	bs := []*cpu.Backend{cpu.New(cpu.Options{Threads: 1}), cpu.New(cpu.Options{}), cpu.New(cpu.Options{Threads: 3, Grain: 1})}
	t.Cleanup(func() {
		for _, b := range bs {
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return bs
}

// onEach runs fn on each backend of backends, each in a subtest, and
// checks that the outputs fn returns are bit-identical across them: the
// kernels split their loops over independent outputs, so no summation
// order depends on the thread count.
func onEach[T num](t *testing.T, fn func(t *testing.T, b *cpu.Backend) []T) {
	t.Helper()
	onEachBits(t, true, fn)
}

// onEachBits is onEach, comparing bits only when bits is set.
func onEachBits[T num](t *testing.T, bits bool, fn func(t *testing.T, b *cpu.Backend) []T) {
	t.Helper()
	var outs [][]T
	for i, b := range backends(t) {
		t.Run(backendNames[i], func(t *testing.T) {
			outs = append(outs, fn(t, b))
		})
	}
	for i := 1; bits && i < len(outs); i++ {
		sameBits(t, backendNames[i], outs[0], outs[i])
	}
}

// sameBits reports an error where a and b, the outputs on one thread and
// on the backend named name, differ in any bit.
func sameBits[T num](t *testing.T, name string, a, b []T) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d outputs on one thread, %d on %s", len(a), len(b), name)
	}
	for i := range a {
		if math.Float64bits(float64(a[i])) != math.Float64bits(float64(b[i])) {
			t.Errorf("output %d is %v on one thread, %v on %s", i, a[i], b[i], name)
			return
		}
	}
}

// load returns a new buffer of b holding v.
func load[T num | int32](t testing.TB, b backend.Backend, v []T) backend.Buffer {
	t.Helper()
	var dt backend.DType
	switch any(v).(type) {
	case []float32:
		dt = backend.Float32
	case []float64:
		dt = backend.Float64
	default:
		dt = backend.Int32
	}
	buf, err := b.Alloc(dt, len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CopyIn(buf, 0, v); err != nil {
		t.Fatal(err)
	}
	return buf
}

// read returns the elements of buf.
func read[T num | int32](t testing.TB, b backend.Backend, buf backend.Buffer) []T {
	t.Helper()
	v := make([]T, buf.Len())
	if err := b.CopyOut(v, buf, 0); err != nil {
		t.Fatal(err)
	}
	return v
}

// run prepares k on b and runs it once; both must succeed.
func run(t testing.TB, b backend.Backend, k backend.Kernel) {
	t.Helper()
	f, err := b.Prepare(k)
	if err != nil {
		t.Fatalf("preparing %s: %v", backend.Name(k), err)
	}
	if err := f(); err != nil {
		t.Fatalf("running %s: %v", backend.Name(k), err)
	}
}

// allocFree fails t where running a prepared kernel of ks on b allocates.
func allocFree(t *testing.T, b backend.Backend, ks []backend.Kernel) {
	t.Helper()
	for _, k := range ks {
		f, err := b.Prepare(k)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per run", backend.Name(k), n)
		}
	}
}

// uniformOp returns a new buffer of b holding n values of dt ("float32"
// or "float64") uniform in [-1, 1).
func uniformOp(t testing.TB, b backend.Backend, r *rand.Rand, dt string, n int) backend.Operand {
	t.Helper()
	if dt == "float32" {
		return backend.At(load(t, b, uniform[float32](r, n, -1, 1)), 0)
	}
	return backend.At(load(t, b, uniform[float64](r, n, -1, 1)), 0)
}

// rng returns a generator seeded from seed.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// uniform returns n values of T uniform in [lo, hi).
func uniform[T num](r *rand.Rand, n int, lo, hi float64) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T(lo + (hi-lo)*r.Float64())
	}
	return v
}

// wide converts v to float64.
func wide[T num](v []T) []float64 {
	w := make([]float64, len(v))
	for i, x := range v {
		w[i] = float64(x)
	}
	return w
}

// near reports an error at the first index where got is farther than
// tol[i] from want (already rounded to T); a NaN matches a NaN and an
// infinity the same infinity. A nil tol means exact equality.
func near[T num](t *testing.T, what string, got []T, want, tol []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i, g := range got {
		g, w := float64(g), want[i]
		var e float64
		if tol != nil {
			e = tol[i]
		}
		if g == w || g != g && w != w || math.Abs(g-w) <= e {
			continue
		}
		if bad == 0 {
			t.Errorf("%s: element %d is %v, want %v (tolerance %.3g)", what, i, g, w, e)
		}
		bad++
	}
	if bad > 1 {
		t.Errorf("%s: %d elements wrong in all", what, bad)
	}
}

// relTol returns tolerances c*eps(T)*|want[i]|.
func relTol[T num](want []float64, c float64) []float64 {
	tol := make([]float64, len(want))
	for i, w := range want {
		tol[i] = c * eps[T]() * math.Abs(w)
	}
	return tol
}
