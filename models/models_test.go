package models

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/gradcheck"
	"github.com/orthonet/orthonet/param"
)

// model is what the tests read of a built model of any family.
type model interface {
	Params() []param.Param
	Nodes() G.Nodes
}

// build builds the model cfg configures, an FFNConfig, CNNConfig,
// ViTConfig or RNNConfig, on g.
func build(g *G.ExprGraph, cfg any, dt tensor.Dtype, rng *rand.Rand) (model, error) {
	switch c := cfg.(type) {
	case FFNConfig:
		return NewFFN(g, c, dt, rng)
	case CNNConfig:
		return NewCNN(g, c, dt, rng)
	case ViTConfig:
		return NewViT(g, c, dt, rng)
	case RNNConfig:
		return NewRNN(g, c, dt, rng)
	}
	return nil, fmt.Errorf("no model for %T", cfg)
}

// forward returns m's logits of x, a ViT's in training mode where train.
func forward(m model, x *G.Node, train bool) (*G.Node, error) {
	if v, ok := m.(*ViT); ok {
		return v.Forward(x, train)
	}
	return m.(interface {
		Forward(*G.Node) (*G.Node, error)
	}).Forward(x)
}

// runTape runs g once on Gorgonia's tape machine.
func runTape(t *testing.T, g *G.ExprGraph) {
	t.Helper()
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
}

// TestRefusals checks that each family's builder refuses the
// configurations it cannot build, saying why.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		cfg  any
		want string
	}{
		{FFNConfig{In: 4, Hidden: 8, Classes: 3, Depth: 1}, "input 4 < hidden 8"},
		{CNNConfig{InChannels: 1, Height: 28, Width: 28, Channels: 0, Depth: 2, Classes: 10}, "want positive sizes"},
		{CNNConfig{InChannels: 1, Height: 28, Width: 28, Channels: 64, Depth: 20, Classes: 10}, "at most 65536"},
		{ViTConfig{Image: 10, Patch: 4, Channels: 1, Dim: 8, Depth: 1, Heads: 1, MLP: 4, Classes: 2}, "patch 4 does not divide image 10"},
		{RNNConfig{In: 28, Hidden: 0, Steps: 28, Classes: 10}, "want positive sizes"},
		{RNNConfig{In: 28, Hidden: 8, Steps: 28, Classes: 1}, "Classes >= 2"},
		{RNNConfig{In: 95, Hidden: 8, Steps: 32, Classes: 10, Channels: 3}, "multiple of the channels"},
		{RNNConfig{In: 2, Hidden: 4, Steps: 257, Classes: 3}, "at most 256"},
	} {
		if _, err := build(G.NewGraph(), c.cfg, tensor.Float32, rand.New(rand.NewPCG(1, 1))); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T %+v: error %v, want one saying %q", c.cfg, c.cfg, err, c.want)
		}
	}
}

// TestGradients checks the gradients of small float64 models, a CNN and
// an RNN of 2-channel images, against central differences.
func TestGradients(t *testing.T) {
	for _, c := range []struct {
		cfg   any
		input []int
	}{
		{CNNConfig{InChannels: 2, Height: 6, Width: 5, Channels: 2, Depth: 2, Classes: 3, Bias: true}, []int{2, 2, 6, 5}},
		{RNNConfig{In: 6, Hidden: 5, Steps: 4, Classes: 3, Channels: 2}, []int{2, 24}},
	} {
		g := G.NewGraph()
		m, err := build(g, c.cfg, tensor.Float64, rand.New(rand.NewPCG(2, 2)))
		if err != nil {
			t.Fatal(err)
		}
		x := G.NewTensor(g, tensor.Float64, len(c.input), G.WithShape(c.input...), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
		out, err := forward(m, x, false)
		if err != nil {
			t.Fatal(err)
		}
		r := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("r"), G.WithInit(G.Gaussian(0, 1)))
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, r))))
		if err := gradcheck.Check(g, loss, 1e-6, 1e-5, m.Nodes()...); err != nil {
			t.Errorf("%T: %v", c.cfg, err)
		}
	}
}

// TestFFN checks the FFN's markings and shapes, and that a copy sharing its
// parameters sees the original's weights.
func TestFFN(t *testing.T) {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(1, 1))
	m, err := NewFFN(g, FFNConfig{In: 12, Hidden: 8, Classes: 3, Depth: 3, Bias: true}, tensor.Float32, rng)
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, p := range m.Params() {
		if p.Constrained() {
			marked++
		}
	}
	if marked != 3 || len(param.Constrained(m.Params())) != 3 || len(m.Nodes()) != 8 {
		t.Errorf("%d marked weights, %d orthogonal, %d nodes; want 3, 3, 8", marked, len(param.Constrained(m.Params())), len(m.Nodes()))
	}
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(5, 12), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
	out, err := m.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Shape().Eq(tensor.Shape{5, 3}) {
		t.Errorf("logits shape %v, want (5, 3)", out.Shape())
	}

	// A shared copy sees updates to the original's tensors.
	g2 := G.NewGraph()
	s, err := NewFFN(g2, m.Cfg, tensor.Float32, rng)
	if err != nil {
		t.Fatal(err)
	}
	if err := Share(s.Nodes(), m.Nodes()); err != nil {
		t.Fatal(err)
	}
	w := m.Layers[0].W.Node.Value().Data().([]float32)
	w[0] = 42
	if s.Layers[0].W.Node.Value().Data().([]float32)[0] != 42 {
		t.Error("the shared network does not see the original's weights")
	}
}

// TestCNN checks the CNN's shapes and markings.
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
}
