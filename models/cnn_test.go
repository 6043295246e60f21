package models

import (
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/gradcheck"
	"github.com/orthonet/orthonet/param"
)

// TestCNN checks the CNN's shapes, markings and refusals, and its
// gradients against central differences.
func TestCNN(t *testing.T) {
	for _, c := range []struct {
		cfg    CNNConfig
		convs  []int // each kernel's shape's first two axes
		inputs int   // of the head
	}{
		{CNNConfig{InChannels: 1, Height: 28, Width: 28, Channels: 4, Depth: 2, Classes: 10, Bias: true}, []int{4, 1, 8, 4}, 8 * 7 * 7},
		{CNNConfig{InChannels: 3, Height: 32, Width: 32, Channels: 2, Depth: 3, Classes: 10}, []int{2, 3, 4, 2, 8, 4}, 8 * 4 * 4},
		// A 2 x 3 image pools once, then is one pixel high.
		{CNNConfig{InChannels: 1, Height: 2, Width: 3, Channels: 2, Depth: 2, Classes: 3}, []int{2, 1, 4, 2}, 4 * 1 * 1},
	} {
		g := G.NewGraph()
		m, err := NewCNN(g, c.cfg, tensor.Float32, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		for i, conv := range m.Convs {
			s := conv.W.Node.Shape()
			if s[0] != c.convs[2*i] || s[1] != c.convs[2*i+1] || s[2] != 3 || s[3] != 3 || !conv.W.Constrained() {
				t.Errorf("%+v: kernel %d of shape %v (constrained %v), want (%d, %d, 3, 3) on the manifold", c.cfg, i, s, conv.W.Constrained(), c.convs[2*i], c.convs[2*i+1])
			}
		}
		if s := m.Head.W.Node.Shape(); s[0] != c.inputs || m.Head.W.Constrained() {
			t.Errorf("%+v: head %v (constrained %v), want %d inputs, plain", c.cfg, s, m.Head.W.Constrained(), c.inputs)
		}
		if n := len(param.Constrained(m.Params())); n != c.cfg.Depth {
			t.Errorf("%+v: %d constrained parameters, want %d", c.cfg, n, c.cfg.Depth)
		}
		x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(5, c.cfg.InChannels, c.cfg.Height, c.cfg.Width), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
		out, err := m.Forward(x)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Shape().Eq(tensor.Shape{5, c.cfg.Classes}) {
			t.Errorf("%+v: logits of shape %v", c.cfg, out.Shape())
		}
	}
	for _, c := range []struct {
		cfg  CNNConfig
		want string
	}{
		{CNNConfig{InChannels: 1, Height: 28, Width: 28, Channels: 0, Depth: 2, Classes: 10}, "want positive sizes"},
		{CNNConfig{InChannels: 1, Height: 28, Width: 28, Channels: 64, Depth: 20, Classes: 10}, "at most 65536"},
	} {
		if _, err := NewCNN(G.NewGraph(), c.cfg, tensor.Float32, rand.New(rand.NewPCG(1, 1))); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one saying %q", c.cfg, err, c.want)
		}
	}

	// Gradients of a small CNN in float64 against central differences.
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(2, 2))
	m, err := NewCNN(g, CNNConfig{InChannels: 2, Height: 6, Width: 5, Channels: 2, Depth: 2, Classes: 3, Bias: true}, tensor.Float64, rng)
	if err != nil {
		t.Fatal(err)
	}
	x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(2, 2, 6, 5), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
	out, err := m.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	r := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("r"), G.WithInit(G.Gaussian(0, 1)))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, r))))
	if err := gradcheck.Check(g, loss, 1e-6, 1e-5, m.Nodes()...); err != nil {
		t.Error(err)
	}
}
