package models

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/param"
)

// CNNConfig sizes an orthogonal convolutional network for InChannels x
// Height x Width images: Depth blocks, block i Convs 3 x 3 convolutions
// (padding 1) to Channels 2^i channels, each followed by ReLU, then a 2 x 2
// max pooling (left out once the image is 1 pixel high or wide), then a
// plain linear layer from the last block's pixels to Classes.
type CNNConfig struct {
	InChannels, Height, Width int
	Channels, Depth, Classes  int
	// Convs is the convolutions of a block; 0 means 1.
	Convs int
	// Bias adds a bias to every convolution (the head always has one).
	Bias bool
}

// CNN is an orthogonal convolutional network: every convolution kernel on
// the Stiefel manifold in its flattened form (nn.Conv2d), the head plain.
type CNN struct {
	Cfg   CNNConfig
	Convs []*nn.Conv2d
	Head  *nn.Linear
	pool  []bool // whether convolution i ends its block with a pooling
}

// NewCNN builds a CNN on g with Haar-initialised kernels.
func NewCNN(g *G.ExprGraph, cfg CNNConfig, dt tensor.Dtype, rng *rand.Rand) (*CNN, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.Convs = max(cfg.Convs, 1)
	m := &CNN{Cfg: cfg}
	in, h, w := cfg.InChannels, cfg.Height, cfg.Width
	for i := 0; i < cfg.Depth; i++ {
		out := cfg.Channels << i
		for j := 0; j < cfg.Convs; j++ {
			name := fmt.Sprintf("conv%d", i+1)
			if cfg.Convs > 1 {
				name = fmt.Sprintf("conv%d_%d", i+1, j+1)
			}
			c, err := nn.NewConv2d(g, name, nn.Conv2dConfig{In: in, Out: out, Kernel: 3, Pad: 1, Bias: cfg.Bias, Orthogonal: true}, dt, rng)
			if err != nil {
				return nil, err
			}
			m.Convs = append(m.Convs, c)
			m.pool = append(m.pool, j == cfg.Convs-1 && h >= 2 && w >= 2)
			in = out
		}
		if h >= 2 && w >= 2 {
			h, w = h/2, w/2
		}
	}
	head, err := nn.NewLinear(g, "head", in*h*w, cfg.Classes, dt, true, rng)
	if err != nil {
		return nil, err
	}
	m.Head = head
	return m, nil
}

// maxCNNChannels is the most channels a CNN's last block may have.
const maxCNNChannels = 1 << 16

// check refuses a configuration NewCNN cannot build. The last block's
// channels, Channels 2^(Depth-1), are bounded without computing them, so
// that no shift overflows.
func (cfg CNNConfig) check() error {
	if cfg.InChannels < 1 || cfg.Height < 1 || cfg.Width < 1 || cfg.Channels < 1 || cfg.Depth < 1 || cfg.Classes < 2 {
		return fmt.Errorf("models: CNN %+v: want positive sizes, Depth >= 1 and Classes >= 2", cfg)
	}
	if cfg.Depth > 16 || cfg.Channels > maxCNNChannels>>(cfg.Depth-1) {
		last := fmt.Sprintf("%d", cfg.Channels<<min(cfg.Depth-1, 20))
		if cfg.Depth > 16 || cfg.Channels > 1<<40 {
			last = fmt.Sprintf("%d x 2^%d", cfg.Channels, cfg.Depth-1)
		}
		return fmt.Errorf("models: CNN of %d blocks from %d channels: the last block would have %s channels (at most %d)", cfg.Depth, cfg.Channels, last, maxCNNChannels)
	}
	if cfg.Convs < 0 || cfg.Convs > 8 {
		return fmt.Errorf("models: CNN of %d convolutions a block, want 1 to 8 (0: 1)", cfg.Convs)
	}
	return nil
}

// Forward returns the logits of a (batch, InChannels, Height, Width) input.
func (m *CNN) Forward(x *G.Node) (*G.Node, error) {
	h := x
	for i, c := range m.Convs {
		var err error
		if h, err = c.Forward(h); err != nil {
			return nil, err
		}
		if h, err = G.Rectify(h); err != nil {
			return nil, fmt.Errorf("models: %s: %w", c.W.Name(), err)
		}
		if m.pool[i] {
			if h, err = G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}); err != nil {
				return nil, fmt.Errorf("models: %s: %w", c.W.Name(), err)
			}
		}
	}
	s := h.Shape()
	flat, err := G.Reshape(h, tensor.Shape{s[0], s.TotalSize() / s[0]})
	if err != nil {
		return nil, fmt.Errorf("models: head: %w", err)
	}
	return m.Head.Forward(flat)
}

// Params returns every parameter, the kernels marked as points of the
// Stiefel manifold.
func (m *CNN) Params() []param.Param {
	var ps []param.Param
	for _, c := range m.Convs {
		ps = append(ps, c.Params()...)
	}
	return append(ps, m.Head.Params()...)
}

// Nodes returns every parameter node, in the order of Params.
func (m *CNN) Nodes() G.Nodes { return param.Nodes(m.Params()) }
