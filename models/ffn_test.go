package models

import (
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/param"
)

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
	if _, err := NewFFN(G.NewGraph(), FFNConfig{In: 4, Hidden: 8, Classes: 3, Depth: 1}, tensor.Float32, rng); err == nil || !strings.Contains(err.Error(), "input 4 < hidden 8") {
		t.Errorf("narrow input: error %v", err)
	}
}
