package models

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/param"
)

// RNNConfig sizes an orthogonal recurrent network that reads an image row
// by row (the pixel-by-row task of expRNN, scoRNN and geotorch's examples):
// Steps = 28 rows of In = 28 pixels for MNIST and Fashion-MNIST, Steps = 32
// rows of In = 96 values (32 pixels x 3 channels, Channels = 3) for
// CIFAR-10.
type RNNConfig struct {
	// In is the values one step reads: a row of the image, every channel's.
	In int
	// Hidden is n, the side of the recurrent weight W on O(n) = St(n, n).
	Hidden int
	// Steps is T, the steps the network is unrolled for: the image's rows.
	Steps int
	// Classes is the number of logits.
	Classes int
	// Channels, where above 1, says that the input is channel-major
	// (Channels, Steps, In/Channels) images, as data.Set and the CNN hold
	// them: step t reads row t of channel 0, then row t of channel 1, and
	// so on (In values), so that a step sees all of a row's colours. 0 or
	// 1: the input is Steps rows of In values, row-major.
	Channels int
}

// RNN is the orthogonal recurrent network
//
//	h_t = tanh(x_t U + h_{t-1} W + b),  h_0 = 0,  logits = h_T V + c,
//
// with W Haar-random on O(Hidden) and marked param.OnStiefel, and U, b, V,
// c plain (initialised as PyTorch's nn.Linear, as scripts/torch_rnn.py
// does). The activation is tanh rather than expRNN's modReLU: modReLU is
// sign(z) relu(|z| + b), and Gorgonia v0.9.18 lists sign and abs among the
// unary ops it does not differentiate, while tanh is differentiated by
// Gorgonia and lowered by program.Compile on the CPU and CUDA backends.
type RNN struct {
	Cfg RNNConfig
	// Input is U (In x Hidden) and b; Recurrent is W (Hidden x Hidden, no
	// bias); Out is V (Hidden x Classes) and c.
	Input, Recurrent, Out *nn.Linear
}

// maxRNNSteps is the most steps an RNN takes: see (*RNN).steps.
const maxRNNSteps = 256

// NewRNN builds an RNN on g, drawing its initial weights from rng.
func NewRNN(g *G.ExprGraph, cfg RNNConfig, dt tensor.Dtype, rng *rand.Rand) (*RNN, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := &RNN{Cfg: cfg}
	var err error
	if m.Input, err = nn.NewLinear(g, "input", cfg.In, cfg.Hidden, dt, true, rng); err != nil {
		return nil, err
	}
	if m.Recurrent, err = nn.NewOrthoLinear(g, "recurrent", cfg.Hidden, cfg.Hidden, dt, false, rng); err != nil {
		return nil, err
	}
	if m.Out, err = nn.NewLinear(g, "out", cfg.Hidden, cfg.Classes, dt, true, rng); err != nil {
		return nil, err
	}
	return m, nil
}

// check refuses a configuration NewRNN cannot build.
func (cfg RNNConfig) check() error {
	if cfg.In < 1 || cfg.Hidden < 1 || cfg.Steps < 1 || cfg.Classes < 2 || cfg.Channels < 0 {
		return fmt.Errorf("models: RNN %+v: want positive sizes and Classes >= 2", cfg)
	}
	if cfg.Steps > maxRNNSteps {
		return fmt.Errorf("models: RNN of %d steps, at most %d (Gorgonia v0.9.18 tells slices apart by their bounds mod 256)", cfg.Steps, maxRNNSteps)
	}
	if cfg.Channels > 1 && cfg.In%cfg.Channels != 0 {
		return fmt.Errorf("models: RNN of %d channels reads %d values a step: want a multiple of the channels", cfg.Channels, cfg.In)
	}
	return nil
}

// Forward returns the (batch, Classes) logits of x, (batch, Steps*In):
// each row an image, read as RNNConfig says.
func (m *RNN) Forward(x *G.Node) (*G.Node, error) {
	steps, err := m.steps(x)
	if err != nil {
		return nil, err
	}
	var h *G.Node
	for t, xt := range steps {
		pre, err := m.Input.Forward(xt) // x_t U + b
		if err != nil {
			return nil, err
		}
		if h != nil {
			hw, err := G.Mul(h, m.Recurrent.W.Node)
			if err != nil {
				return nil, fmt.Errorf("models: RNN step %d: %w", t, err)
			}
			if pre, err = G.Add(pre, hw); err != nil {
				return nil, fmt.Errorf("models: RNN step %d: %w", t, err)
			}
		}
		if h, err = G.Tanh(pre); err != nil {
			return nil, fmt.Errorf("models: RNN step %d: %w", t, err)
		}
	}
	return m.Out.Forward(h)
}

// steps returns the Steps inputs x_t, (batch, In) each, of x: x is
// reordered step-major once, (Steps, batch, In), so that each step's rows
// are a leading slice (a view in a compiled program). Channel-major images
// are reordered by the same transpose, (batch, C, Steps, In/C) to
// (Steps, batch, C, In/C).
//
// Step t is the slice t of the first axis, not rows t*batch to
// (t+1)*batch of a matrix: Gorgonia v0.9.18 hashes a slice's bounds as
// bytes (sliceOp.WriteHash), and a graph returns the node it holds for an
// equal hash, so rows 256 to 272 would be rows 0 to 16 again. A step index
// stays below 256 (maxRNNSteps).
func (m *RNN) steps(x *G.Node) ([]*G.Node, error) {
	c := m.Cfg
	s := x.Shape()
	if x.Dims() != 2 || s[1] != c.Steps*c.In {
		return nil, fmt.Errorf("models: RNN input of shape %v, want (batch, %d): %d steps of %d values", s, c.Steps*c.In, c.Steps, c.In)
	}
	b, ch := s[0], max(c.Channels, 1)
	wrap := func(err error) error { return fmt.Errorf("models: RNN input: %w", err) }
	img, err := G.Reshape(x, tensor.Shape{b, ch, c.Steps, c.In / ch})
	if err != nil {
		return nil, wrap(err)
	}
	if img, err = G.Transpose(img, 2, 0, 1, 3); err != nil {
		return nil, wrap(err)
	}
	rows, err := G.Reshape(img, tensor.Shape{c.Steps, b, c.In})
	if err != nil {
		return nil, wrap(err)
	}
	xs := make([]*G.Node, c.Steps)
	for t := range xs {
		if xs[t], err = G.Slice(rows, G.S(t)); err != nil {
			return nil, wrap(err)
		}
		if xs[t].Dims() != 2 { // a batch of one loses its axis too
			if xs[t], err = G.Reshape(xs[t], tensor.Shape{b, c.In}); err != nil {
				return nil, wrap(err)
			}
		}
	}
	return xs, nil
}

// Params returns U, b, W, V and c, W marked as a point of the Stiefel
// manifold St(Hidden, Hidden) = O(Hidden).
func (m *RNN) Params() []param.Param {
	return append(append(m.Input.Params(), m.Recurrent.Params()...), m.Out.Params()...)
}

// Nodes returns every parameter node, in the order of Params.
func (m *RNN) Nodes() G.Nodes { return param.Nodes(m.Params()) }
