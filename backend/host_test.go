package backend_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/backend/cpu"
)

// TestRunHost checks that RunHost over HostSlice buffers computes what a
// CPU backend of one thread computes, bit for bit (package fused's Do runs
// its kernels so), in float32 and float64, large enough that a backend of
// more threads would split the loops.
func TestRunHost(t *testing.T) {
	const rows, d = 300, 257 // 77100 elements: more than one grain
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	gamma, beta := x[:d], x[d:2*d]
	kernels := map[string]func(in []backend.Operand, out backend.Operand) backend.Kernel{
		"map-gelu": func(in []backend.Operand, out backend.Operand) backend.Kernel {
			return backend.Map{Op: backend.GELU, N: rows * d, Src: in[0], Dst: out}
		},
		"layer-norm": func(in []backend.Operand, out backend.Operand) backend.Kernel {
			return backend.LayerNorm{Rows: rows, D: d, Eps: 1e-5, X: in[0], Gamma: in[1], Beta: in[2], Y: out}
		},
		"gemm": func(in []backend.Operand, out backend.Operand) backend.Kernel {
			return backend.Gemm{TransB: true, M: rows, N: rows, K: d, Alpha: 1, A: in[0], B: in[0], C: out, LDA: d, LDB: d, LDC: rows}
		},
	}
	for name, build := range kernels {
		for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
			args := [][]float64{x, gamma, beta}
			n := max(rows*d, rows*rows)
			want, err := onCPU(dt, args, n, build)
			if err != nil {
				t.Fatalf("%s %v: cpu backend: %v", name, dt, err)
			}
			in := make([]backend.Operand, len(args))
			for i, a := range args {
				b, err := backend.HostSlice(typed(dt, a))
				if err != nil {
					t.Fatal(err)
				}
				in[i] = backend.At(b, 0)
			}
			res := typed(dt, make([]float64, n))
			out, err := backend.HostSlice(res)
			if err != nil {
				t.Fatal(err)
			}
			if err := backend.RunHost(build(in, backend.At(out, 0))); err != nil {
				t.Fatalf("%s %v: RunHost: %v", name, dt, err)
			}
			if got := float64s(res); !same(got, want) {
				t.Errorf("%s %v: RunHost differs from the CPU backend", name, dt)
			}
		}
	}
}

// onCPU runs build's kernel on a CPU backend of one thread over copies of
// args and returns its result of n elements, as float64.
func onCPU(dt backend.DType, args [][]float64, n int, build func([]backend.Operand, backend.Operand) backend.Kernel) ([]float64, error) {
	b := cpu.New(cpu.Options{Threads: 1})
	defer func() { _ = b.Close() }()
	in := make([]backend.Operand, len(args))
	for i, a := range args {
		buf, err := b.Alloc(dt, len(a))
		if err != nil {
			return nil, err
		}
		if err := b.CopyIn(buf, 0, typed(dt, a)); err != nil {
			return nil, err
		}
		in[i] = backend.At(buf, 0)
	}
	out, err := b.Alloc(dt, n)
	if err != nil {
		return nil, err
	}
	f, err := b.Prepare(build(in, backend.At(out, 0)))
	if err != nil {
		return nil, err
	}
	if err := f(); err != nil {
		return nil, err
	}
	res := typed(dt, make([]float64, n))
	if err := b.CopyOut(res, out, 0); err != nil {
		return nil, err
	}
	return float64s(res), nil
}

// typed returns a copy of a as a []float32 or []float64.
func typed(dt backend.DType, a []float64) any {
	if dt == backend.Float64 {
		return append([]float64(nil), a...)
	}
	s := make([]float32, len(a))
	for i, v := range a {
		s[i] = float32(v)
	}
	return s
}

func float64s(a any) []float64 {
	if s, ok := a.([]float64); ok {
		return s
	}
	s32 := a.([]float32)
	s := make([]float64, len(s32))
	for i, v := range s32 {
		s[i] = float64(v)
	}
	return s
}

// same reports whether a and b hold the same bits.
func same(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestRunHostRefuses checks what RunHost and HostSlice refuse: a slice of
// another type, a buffer that is not a host one, a kernel that fails its
// Check, and one with no CPU implementation.
func TestRunHostRefuses(t *testing.T) {
	if _, err := backend.HostSlice([]int64{1}); err == nil {
		t.Error("HostSlice took a []int64")
	}
	src, _ := backend.HostSlice(make([]float64, 4))
	if err := backend.RunHost(backend.Map{Op: backend.GELU, N: 4, Src: backend.At(src, 0), Dst: backend.At(backendtest.Extent(backend.Float64, 4), 0)}); err == nil || !strings.Contains(err.Error(), "not a host buffer") {
		t.Errorf("a buffer that is not a host one: error %v", err)
	}
	if err := backend.RunHost(backend.Map{Op: backend.GELU, N: 5, Src: backend.At(src, 0), Dst: backend.At(src, 0)}); err == nil {
		t.Error("a kernel past its buffers ran")
	}
	if err := backend.RunHost(checkedOnly{}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("a kernel with no CPU implementation: error %v, want ErrUnsupported", err)
	}
}

// checkedOnly is a kernel with no CPU implementation.
type checkedOnly struct{}

func (checkedOnly) Check() error { return nil }
