// Package models builds the paper's orthogonal networks in Gorgonia.
package models

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/param"
)

// FFNConfig sizes an orthogonal feed-forward network. The paper's network
// (section 6) has In = 1024 (32 x 32 MNIST) or 1200 (20 x 20 x 3 CIFAR-10),
// Hidden = 1024, Depth = 5 and Classes = 10.
type FFNConfig struct {
	In, Hidden, Classes int
	// Depth is the number of Stiefel-constrained layers (In -> Hidden, then
	// Hidden -> Hidden); an unconstrained Hidden -> Classes layer follows.
	Depth int
	// Bias adds a bias to every layer.
	Bias bool
}

// FFN is ReLU(... ReLU(x W1 + b1) ...) W_out + b_out with W1 ... W_Depth
// column-orthonormal.
type FFN struct {
	Cfg    FFNConfig
	Layers []*nn.Linear
}

// NewFFN builds an FFN on g with Haar-initialised orthogonal layers.
func NewFFN(g *G.ExprGraph, cfg FFNConfig, dt tensor.Dtype, rng *rand.Rand) (*FFN, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := &FFN{Cfg: cfg}
	in := cfg.In
	for i := 0; i < cfg.Depth; i++ {
		l, err := nn.NewOrthoLinear(g, fmt.Sprintf("fc%d", i+1), in, cfg.Hidden, dt, cfg.Bias, rng)
		if err != nil {
			return nil, err
		}
		m.Layers = append(m.Layers, l)
		in = cfg.Hidden
	}
	out, err := nn.NewLinear(g, "out", cfg.Hidden, cfg.Classes, dt, cfg.Bias, rng)
	if err != nil {
		return nil, err
	}
	m.Layers = append(m.Layers, out)
	return m, nil
}

// check refuses a configuration NewFFN cannot build.
func (cfg FFNConfig) check() error {
	if cfg.Depth < 1 || cfg.Classes < 2 || cfg.In < 1 || cfg.Hidden < 1 {
		return fmt.Errorf("models: FFN %+v: want Depth >= 1, Classes >= 2 and positive sizes", cfg)
	}
	if cfg.In < cfg.Hidden {
		return fmt.Errorf("models: FFN input %d < hidden %d: the first orthogonal layer needs in >= out", cfg.In, cfg.Hidden)
	}
	return nil
}

// Forward returns the logits of a (batch, In) input.
func (m *FFN) Forward(x *G.Node) (*G.Node, error) {
	h := x
	for i, l := range m.Layers {
		act := fused.ReLU // each hidden layer's bias and ReLU are one fused op
		if i == len(m.Layers)-1 {
			act = fused.Identity
		}
		var err error
		if h, err = l.ForwardAct(h, act); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Params returns every parameter, the orthogonal layers' weights marked as
// points of the Stiefel manifold.
func (m *FFN) Params() []param.Param {
	var ps []param.Param
	for _, l := range m.Layers {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// Nodes returns every parameter node, in the order of Params.
func (m *FFN) Nodes() G.Nodes { return param.Nodes(m.Params()) }
