package cudak

import (
	"math"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
)

// addresses is a Device that gives every operand a made-up address.
type addresses struct{ index64 bool }

func (addresses) Addr(op backend.Operand) (uint64, error)    { return 1<<40 + uint64(op.Off)*8, nil }
func (addresses) Scratch(backend.DType, int) (uint64, error) { return 1 << 41, nil }
func (addresses) Fault() uint64                              { return 1 << 42 }
func (a addresses) Index64() bool                            { return a.index64 }

// TestIndexWidth checks which instance the planner picks for the kernels
// that divide indices: the 32-bit one (_x32) while every index fits in 31
// bits, the 64-bit one for larger sizes, and always where the Device asks
// for 64-bit arithmetic.
func TestIndexWidth(t *testing.T) {
	const big = math.MaxInt32 + 1
	f32 := func(n int) backend.Operand { return backend.At(backendtest.Extent(backend.Float32, n), 0) }
	i32 := func(n int) backend.Operand { return backend.At(backendtest.Extent(backend.Int32, n), 0) }
	cases := []struct {
		name   string
		k      backend.Kernel
		x32    bool
		kernel string
	}{
		{"copy", backend.Copy{Shape: []int{3, 4}, Src: f32(12), Dst: f32(12), SrcStrides: []int{1, 3}, DstStrides: []int{4, 1}}, true, "on_copy"},
		{"copy of many", backend.Copy{Shape: []int{2, big / 2}, Src: f32(big), Dst: f32(big), SrcStrides: []int{1, 2}, DstStrides: []int{big / 2, 1}}, false, "on_copy"},
		// Few elements, but a stride that reaches past 2^31.
		{"copy with a long stride", backend.Copy{Shape: []int{2, 2}, Src: f32(big + 2), Dst: f32(4), SrcStrides: []int{big, 1}, DstStrides: []int{2, 1}}, false, "on_copy"},
		{"gather", backend.GatherRows{N: 3, Width: 5, Rows: i32(3), Src: f32(50), Dst: f32(15)}, true, "on_rows"},
		// Few rows gathered from a matrix of more than 2^31 elements.
		{"gather from a large matrix", backend.GatherRows{N: 3, Width: 1 << 16, Rows: i32(3), Src: f32(1 << 32), Dst: f32(3 << 16)}, false, "on_rows"},
		{"bias", backend.BiasAct{Rows: 4, N: 6, X: f32(24), Bias: f32(6), Y: f32(24)}, true, "on_bias_act"},
		{"reduce", backend.Reduce{Op: backend.Max, Outer: 2, Mid: 3, Inner: 5, Src: f32(30), Dst: f32(10)}, true, "on_reduce_mid"},
		{"softmax lanes", backend.Softmax{Outer: 2, Axis: 3, Inner: 5, Src: f32(30), Dst: f32(30)}, true, "on_softmax"},
		{"skew", backend.SkewStep{R: 4, B: f32(16), Y: backend.At(backendtest.Extent(backend.Float64, 16), 0), LR: backend.At(backendtest.Extent(backend.Float64, 1), 0)}, true, "on_skew"},
	}
	for _, c := range cases {
		for _, index64 := range []bool{false, true} {
			steps, err := Plan(addresses{index64}, c.k)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			want := c.kernel
			if c.x32 && !index64 {
				want += "_x32"
			}
			want += "_f32"
			if l, ok := steps[0].(Launch); !ok || l.Kernel != want {
				t.Errorf("%s (Index64 %v): launches %v, want %s", c.name, index64, steps[0], want)
			}
		}
	}
}
