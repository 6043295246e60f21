//go:build cgo

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// TestTakeGradBitExact checks that the gradient of Take (a scatter-add of
// many entries into few rows, with repeats across several chunks of a
// block) gives the CPU backend's result bit for bit on the host model of
// the device, in every order of its blocks and threads (on a GPU, in
// whatever order it runs them): its sums have a fixed order.
func TestTakeGradBitExact(t *testing.T) {
	const outer, axis, inner, n = 2, 300, 3, 1100
	rng := rand.New(rand.NewPCG(4, 4))
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(rng.IntN(axis / 10)) // many repeats, in the first tenth of the rows
	}
	dy := make([]float64, outer*n*inner)
	for i := range dy {
		dy[i] = rng.NormFloat64() * math.Exp(4*rng.NormFloat64()) // magnitudes apart: the order of the sums shows
	}
	run := func(b backend.Backend, dt backend.DType) []uint64 {
		ib, _ := b.Alloc(backend.Int32, n)
		yb, _ := b.Alloc(dt, len(dy))
		xb, _ := b.Alloc(dt, outer*axis*inner)
		defer func() { b.Free(ib); b.Free(yb); b.Free(xb) }()
		var y any = dy
		if dt == backend.Float32 {
			y32 := make([]float32, len(dy))
			for i, v := range dy {
				y32[i] = float32(v)
			}
			y = y32
		}
		if err := b.CopyIn(ib, 0, idx); err != nil {
			t.Fatal(err)
		}
		if err := b.CopyIn(yb, 0, y); err != nil {
			t.Fatal(err)
		}
		f, err := b.Prepare(backend.TakeGrad{Outer: outer, Axis: axis, Inner: inner, N: n, Indices: backend.At(ib, 0), DY: backend.At(yb, 0), DX: backend.At(xb, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if err := f(); err != nil {
			t.Fatal(err)
		}
		bits := make([]uint64, outer*axis*inner)
		if dt == backend.Float32 {
			x := make([]float32, len(bits))
			if err := b.CopyOut(x, xb, 0); err != nil {
				t.Fatal(err)
			}
			for i, v := range x {
				bits[i] = uint64(math.Float32bits(v))
			}
			return bits
		}
		x := make([]float64, len(bits))
		if err := b.CopyOut(x, xb, 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			bits[i] = math.Float64bits(v)
		}
		return bits
	}
	ref := cpu.New(cpu.Options{Threads: 3, Grain: 1})
	defer ref.Close()
	orders := []standin.Order{standin.Forward, standin.Reverse, standin.Random, standin.Rotate}
	if onGPU() {
		orders = orders[:1]
	}
	for _, dt := range []backend.DType{backend.Float64, backend.Float32} {
		want := run(ref, dt)
		for _, o := range orders {
			t.Run(fmt.Sprintf("%v/order=%d", dt, o), func(t *testing.T) {
				if !onGPU() {
					configure(t, func(m *standin.Config) { m.Order = o })
				}
				maxGrid := 0
				if o == standin.Rotate {
					maxGrid = 2 // the grid-stride loops repeat
				}
				b := start(t, cuda.Options{MaxGrid: maxGrid})
				for r := range 2 {
					if got := run(b, dt); !slices.Equal(got, want) {
						t.Errorf("run %d: the gradient differs in its bits from the CPU backend's", r)
					}
				}
			})
		}
	}
}
