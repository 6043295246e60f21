//go:build cgo

package cuda_test

import (
	"math"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// TestCopyOutAll reads buffers of each type, at offsets and of odd
// lengths, after the kernels that wrote them, in one wait (counted by the
// backend and, on the host model, by the model); a read it cannot make is
// refused before it waits, and a fault met by the kernels is reported.
func TestCopyOutAll(t *testing.T) {
	b := start(t, cuda.Options{})
	f32, _ := b.Alloc(backend.Float32, 7)
	f64, _ := b.Alloc(backend.Float64, 5)
	i32, _ := b.Alloc(backend.Int32, 3)
	for _, k := range []backend.Kernel{
		backend.Fill{N: 7, Dst: backend.At(f32, 0), Value: 1.5},
		backend.Fill{N: 5, Dst: backend.At(f64, 0), Value: -2.25},
		backend.Fill{N: 3, Dst: backend.At(i32, 0), Value: 9},
		backend.Fill{N: 1, Dst: backend.At(f64, 4), Value: 7},
	} {
		f, err := b.Prepare(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	a, c, d := make([]float32, 5), make([]float64, 3), make([]int32, 1)
	model, counts := standin.HostWaits(), b.Counts()
	if err := b.CopyOutAll([]backend.Read{{Dst: a, Src: f32, Off: 2}, {Dst: c, Src: f64, Off: 2}, {Dst: d, Src: i32}}); err != nil {
		t.Fatal(err)
	}
	if w := b.Counts().Sub(counts).Waits; w != 1 {
		t.Errorf("the backend counts %d waits, want 1", w)
	}
	if w := standin.HostWaits() - model; !onGPU() && w != 1 {
		t.Errorf("the host model counts %d waits, want 1", w)
	}
	for i, v := range a {
		if v != 1.5 {
			t.Errorf("float32 read: element %d is %v, want 1.5", i, v)
		}
	}
	if c[0] != -2.25 || c[1] != -2.25 || c[2] != 7 || d[0] != 9 {
		t.Errorf("float64 read %v, int32 read %v; want [-2.25 -2.25 7], [9]", c, d)
	}

	model = standin.HostWaits()
	for _, r := range [][]backend.Read{
		{{Dst: a, Src: f32, Off: 3}},          // past the end
		{{Dst: make([]float64, 1), Src: f32}}, // another type
	} {
		if err := b.CopyOutAll(r); err == nil {
			t.Errorf("CopyOutAll(%v) made an impossible read", r)
		}
	}
	if w := standin.HostWaits() - model; w != 0 {
		t.Errorf("refused reads waited %d times", w)
	}

	gatherBadRow(t, b)
	if err := b.CopyOutAll([]backend.Read{{Dst: d, Src: i32}}); err == nil || !strings.Contains(err.Error(), "row index 4") {
		t.Errorf("CopyOutAll after a bad row index: %v, want the row index 4", err)
	}
}

// TestAdamBiasCorrection steps Adam on the device from m = v = 0, w = 0,
// g = 1, lr = 1 and eps = 0 at many step counts t: w becomes
// -((1 - b1) / c1) / sqrt((1 - b2) / c2), which equals, bit for bit, that
// expression computed here with c = 1 - math.Pow(b, t) (as optim.Adam
// computes it) only if the device's bias corrections are math.Pow's.
func TestAdamBiasCorrection(t *testing.T) {
	b := start(t, cuda.Options{})
	const n = 1
	bufs := make([]backend.Buffer, 5)
	for i := range bufs {
		bufs[i], _ = b.Alloc(backend.Float64, 2)
	}
	w, g, m, v, hyper := bufs[0], bufs[1], bufs[2], bufs[3], bufs[4]
	var counts []float64
	for t := 1; t <= 300; t++ {
		counts = append(counts, float64(t))
	}
	counts = append(counts, 1000, 4095, 4096, 12345, 32767, 32768, 1e5+3, 1<<20+7, 1<<31-1, 1<<40+3, 1<<52+1)
	got := make([]float64, 1)
	for _, betas := range [][2]float64{{0.9, 0.999}, {0.5, 0.99999}, {0.123456789, 0.999999999}, {1e-3, 0.7}} {
		step, err := b.Prepare(backend.AdamStep{N: n, Beta1: betas[0], Beta2: betas[1], Eps: 0,
			W: backend.At(w, 0), G: backend.At(g, 0), M: backend.At(m, 0), V: backend.At(v, 0), Hyper: backend.At(hyper, 0)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			for _, x := range []struct {
				buf backend.Buffer
				v   []float64
			}{{w, []float64{0}}, {g, []float64{1}}, {m, []float64{0}}, {v, []float64{0}}, {hyper, []float64{1, c}}} {
				if err := b.CopyIn(x.buf, 0, x.v); err != nil {
					t.Fatal(err)
				}
			}
			if err := step(); err != nil {
				t.Fatal(err)
			}
			if err := b.CopyOut(got, w, 0); err != nil {
				t.Fatal(err)
			}
			c1, c2 := 1-math.Pow(betas[0], c), 1-math.Pow(betas[1], c)
			want := 0 - 1*((1-betas[0])/c1)/(math.Sqrt((1-betas[1])/c2)+0)
			if math.Float64bits(got[0]) != math.Float64bits(want) {
				t.Errorf("betas %v, t = %v: the device stepped to %v, math.Pow's bias corrections to %v", betas, c, got[0], want)
			}
		}
	}
}

// TestIndexWidthsAgree runs every kernel with 32-bit index arithmetic
// where the sizes allow (the default) and with 64-bit arithmetic
// throughout (Options.Index64): the outputs agree bit for bit.
func TestIndexWidthsAgree(t *testing.T) {
	if !onGPU() {
		configure(t, func(m *standin.Config) { m.Order = standin.Forward })
	}
	for _, g := range []int{0, 2} {
		narrow := start(t, cuda.Options{MaxGrid: g})
		wide := start(t, cuda.Options{MaxGrid: g, Index64: true})
		backendtest.Same(t, narrow, wide)
	}
}
