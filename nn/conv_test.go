package nn

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/param"
)

// TestConv2dGradient checks the layer's gradients (input, kernel, bias)
// against central differences, with and without bias, padding and stride.
func TestConv2dGradient(t *testing.T) {
	for _, cfg := range []Conv2dConfig{
		{In: 2, Out: 3, Kernel: 3, Pad: 1, Bias: true, Orthogonal: true},
		{In: 1, Out: 4, Kernel: 2, Stride: 2},
		{In: 3, Out: 2, Kernel: 3, Stride: 2, Pad: 1, Bias: true},
	} {
		g := G.NewGraph()
		rng := newRNG(3)
		c, err := NewConv2d(g, "c", cfg, tensor.Float64, rng)
		if err != nil {
			t.Fatal(err)
		}
		x := input(g, "x", rng, 2, cfg.In, 5, 6)
		y, err := c.Forward(x)
		if err != nil {
			t.Fatal(err)
		}
		want := []int{2, cfg.Out, c.OutSize(5), c.OutSize(6)}
		if !y.Shape().Eq(tensor.Shape(want)) {
			t.Fatalf("%+v: output shape %v, want %v", cfg, y.Shape(), want)
		}
		// A loss that weighs every output differently.
		r := input(g, "r", newRNG(4), want...)
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
		wrt := append(G.Nodes{x}, param.Nodes(c.Params())...)
		checkGrad(t, g, loss, wrt...)
	}
}

// TestConv2dOrthogonal checks that an orthogonal kernel starts on the
// Stiefel manifold in its flattened form, wide (orthonormal rows, the
// filters orthonormal) or tall (orthonormal columns), marked as such, and
// that a plain one is not marked.
func TestConv2dOrthogonal(t *testing.T) {
	for _, c := range []struct {
		in, out, k int
		wide       bool
	}{{3, 8, 3, true}, {1, 16, 3, false}, {2, 18, 3, false}} {
		g := G.NewGraph()
		conv, err := NewConv2d(g, "c", Conv2dConfig{In: c.in, Out: c.out, Kernel: c.k, Pad: 1, Orthogonal: true}, tensor.Float64, newRNG(1))
		if err != nil {
			t.Fatal(err)
		}
		p := conv.W
		if p.Manifold != manifold.Kind(manifold.StiefelKind{}) {
			t.Fatalf("kernel marked %v, want the Stiefel manifold", p.Manifold)
		}
		rows, cols, ok := manifold.MatrixOf(p.Node.Shape())
		if !ok || rows != c.out || cols != c.in*c.k*c.k || (rows < cols) != c.wide {
			t.Errorf("%v: matrix view %d x %d (%v), want %d x %d", p.Node.Shape(), rows, cols, ok, c.out, c.in*c.k*c.k)
		}
		if f, err := p.Feasibility(); err != nil || f > 1e-12 {
			t.Errorf("%v: starts %.3g from the manifold (%v)", p.Node.Shape(), f, err)
		}
		// The wide kernel's filters are orthonormal: rows of unit norm.
		if c.wide {
			w := p.Node.Value().Data().([]float64)
			var norm float64
			for _, v := range w[:cols] {
				norm += v * v
			}
			if norm < 1-1e-12 || norm > 1+1e-12 {
				t.Errorf("first filter's squared norm %v, want 1", norm)
			}
		}
	}
	g := G.NewGraph()
	plain, _ := NewConv2d(g, "p", Conv2dConfig{In: 2, Out: 4, Kernel: 3, Bias: true}, tensor.Float32, newRNG(1))
	for _, p := range plain.Params() {
		if p.Constrained() {
			t.Errorf("a plain convolution's %s is marked constrained", p.Name())
		}
	}
}

// TestConv2dRefuses checks the errors of bad settings and inputs.
func TestConv2dRefuses(t *testing.T) {
	g := G.NewGraph()
	for _, c := range []struct {
		cfg  Conv2dConfig
		want string
	}{
		{Conv2dConfig{In: 0, Out: 4, Kernel: 3}, "want positive channels"},
		{Conv2dConfig{In: 1, Out: 4, Kernel: 3, Pad: -1}, "padding >= 0"},
		{Conv2dConfig{In: 1, Out: 4, Kernel: 3, Stride: -2}, "stride"},
	} {
		if _, err := NewConv2d(g, "bad", c.cfg, tensor.Float64, newRNG(1)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one saying %q", c.cfg, err, c.want)
		}
	}
	conv, _ := NewConv2d(g, "c", Conv2dConfig{In: 2, Out: 4, Kernel: 5}, tensor.Float64, newRNG(1))
	for _, c := range []struct {
		shape []int
		want  string
	}{
		{[]int{2, 3, 8, 8}, "want (batch, 2, height, width)"},
		{[]int{2, 2, 3, 8}, "smaller than the 5 x 5 kernel"},
		{[]int{2, 16}, "want (batch, 2, height, width)"},
	} {
		x := G.NewTensor(g, tensor.Float64, len(c.shape), G.WithShape(c.shape...), G.WithInit(G.Zeroes()))
		if _, err := conv.Forward(x); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("input %v: error %v, want one saying %q", c.shape, err, c.want)
		}
	}
}
