package main

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
	"github.com/orthonet/orthonet/training"
)

// The CNN's defaults (-model cnn), chosen by the Fashion-MNIST runs that
// docs/results.md lists.
const (
	defaultCNNChannels = 64
	defaultCNNDepth    = 2
	defaultCNNLR       = 0.3    // -lr with -optim rsdm or rgd
	defaultCNNOther    = "adam" // -other
	defaultCNNAdamLR   = 0.003  // -lr-other with -other adam
	defaultRNNOther    = defaultCNNOther
	defaultRNNAdamLR   = defaultCNNAdamLR
)

// cnnR is RSDM's r for a CNN when -r is not given: the rows of its
// smallest kernel (the first, channels x 9 input channels, stepped as its
// larger side), at most 300.
func cnnR(c config) int {
	in := 1
	if c.dataset == "cifar10" {
		in = 3
	}
	return min(300, max(c.channels, 9*in))
}

// defaultRNNHidden is the RNN's hidden size when -hidden is not given
// (-model rnn): the side of its recurrent weight on O(n), small enough to
// keep an epoch on the CPU short.
const defaultRNNHidden = 128

// rnnR is RSDM's r for an RNN when -r is not given: the rows of its
// recurrent weight (-hidden), at most RSDM's default of 300. With r equal
// to the side, each step moves in the whole of O(n), the rows in a random
// order.
func rnnR(c config) int { return min(300, c.hidden) }

// network is a model built on one graph for a fixed batch: its input
// buffer, its logits, and its parameters.
type network struct {
	ffn    *models.FFN
	vit    *models.ViT
	cnn    *models.CNN
	rnn    *models.RNN
	xb     []float32 // the input node's backing array
	x      *G.Node   // the input node
	images bool      // x takes whole images (buildNetFrom)
	logits *G.Node
	c      config
	set    *data.Set
}

// buildNet builds the configured model on g for batches of b images of set.
func buildNet(c config, g *G.ExprGraph, b int, set *data.Set, train bool, rng *rand.Rand) (*network, error) {
	return buildNetFrom(c, g, b, set, train, rng, false)
}

// buildNetFrom builds the model as buildNet does; with images set, its
// input node x takes b whole images (b, C, H, W), which the graph
// flattens (the FFN and the RNN) or cuts into patches (the ViT,
// models.Patches): the form train export writes.
func buildNetFrom(c config, g *G.ExprGraph, b int, set *data.Set, train bool, rng *rand.Rand, images bool) (*network, error) {
	n := &network{c: c, set: set, images: images}
	var x *G.Node
	var err error
	switch c.model {
	case "ffn":
		d := set.Dim()
		if x, err = n.input(g, b, b, d); err != nil {
			return nil, err
		}
		if n.ffn, err = models.NewFFN(g, ffnConfig(c, set), tensor.Float32, rng); err != nil {
			return nil, err
		}
		n.logits, err = n.ffn.Forward(x)
	case "vit":
		cfg := vitConfig(c, set)
		if set.H != set.W {
			return nil, fmt.Errorf("the ViT needs square images, got %dx%d", set.H, set.W)
		}
		if x, err = n.input(g, b, b, cfg.Tokens(), cfg.PatchDim()); err != nil {
			return nil, err
		}
		if n.vit, err = models.NewViT(g, cfg, tensor.Float32, rng); err != nil {
			return nil, err
		}
		n.logits, err = n.vit.Forward(x, train)
	case "cnn":
		// The CNN takes whole images, so both forms of the input are one.
		n.images = true
		if x, err = n.input(g, b, b, set.C, set.H, set.W); err != nil {
			return nil, err
		}
		if n.cnn, err = models.NewCNN(g, cnnConfig(c, set), tensor.Float32, rng); err != nil {
			return nil, err
		}
		n.logits, err = n.cnn.Forward(x)
	case "rnn":
		if x, err = n.input(g, b, b, set.Dim()); err != nil {
			return nil, err
		}
		if n.rnn, err = models.NewRNN(g, rnnConfig(c, set), tensor.Float32, rng); err != nil {
			return nil, err
		}
		n.logits, err = n.rnn.Forward(x)
	default:
		return nil, fmt.Errorf("unknown model %q", c.model)
	}
	if err != nil {
		return nil, err
	}
	return n, nil
}

// ffnConfig, vitConfig, cnnConfig and rnnConfig size the model of c for
// images of set's shape and classes: what buildNetFrom builds and
// memory.go's estimate counts.
func ffnConfig(c config, set *data.Set) models.FFNConfig {
	return models.FFNConfig{In: set.Dim(), Hidden: c.hidden, Classes: set.Classes, Depth: c.depth, Bias: true}
}

func vitConfig(c config, set *data.Set) models.ViTConfig {
	return models.ViTConfig{Image: set.H, Patch: c.patch, Channels: set.C, Dim: c.dim, Depth: c.depth, Heads: c.heads, MLP: c.mlp, Classes: set.Classes, Dropout: c.dropout}
}

func cnnConfig(c config, set *data.Set) models.CNNConfig {
	return models.CNNConfig{InChannels: set.C, Height: set.H, Width: set.W, Channels: c.channels, Depth: c.depth, Classes: set.Classes, Bias: true}
}

// rnnConfig reads one row of the image a step, all its channels
// (models.RNNConfig).
func rnnConfig(c config, set *data.Set) models.RNNConfig {
	return models.RNNConfig{In: set.C * set.W, Hidden: c.hidden, Steps: set.H, Classes: set.Classes, Channels: set.C}
}

// input returns the input node of a batch of b examples, of shape (or
// whole images, with n.images), and sets n's x and xb.
func (n *network) input(g *G.ExprGraph, b int, shape ...int) (*G.Node, error) {
	if n.images {
		shape = []int{b, n.set.C, n.set.H, n.set.W}
	}
	n.xb = make([]float32, tensor.Shape(shape).TotalSize())
	n.x = G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(n.xb))))
	switch {
	case !n.images || n.c.model == "cnn":
		return n.x, nil
	case n.c.model == "vit":
		return models.Patches(n.x, n.c.patch)
	}
	return G.Reshape(n.x, tensor.Shape{b, n.set.Dim()})
}

// fill writes count images (row-major, Dim values each) into the input,
// zero-padding the rest of the batch.
func (n *network) fill(images []float32, count int) {
	d := n.set.Dim()
	if n.vit == nil || n.images {
		copy(n.xb, images[:count*d])
		clear(n.xb[count*d:])
		return
	}
	for i := 0; i < count; i++ {
		models.Patchify(n.xb[i*d:(i+1)*d], images[i*d:(i+1)*d], n.set.C, n.set.H, n.c.patch)
	}
	clear(n.xb[count*d:])
}

// masks returns the dropout mask nodes of a ViT training graph.
func (n *network) masks() []*G.Node {
	if n.vit == nil {
		return nil
	}
	return n.vit.Drop.Masks()
}

// Params returns the parameters, the orthogonal weights marked.
func (n *network) Params() []param.Param {
	switch {
	case n.ffn != nil:
		return n.ffn.Params()
	case n.cnn != nil:
		return n.cnn.Params()
	case n.rnn != nil:
		return n.rnn.Params()
	}
	return n.vit.Params()
}

// Nodes returns the parameter nodes.
func (n *network) Nodes() G.Nodes { return param.Nodes(n.Params()) }

// Constrained returns the nodes of the weights on the Stiefel manifold.
func (n *network) Constrained() G.Nodes { return param.Nodes(param.Constrained(n.Params())) }

// buildModel builds the training graph of the configured network for one
// rank's rows of a batch, with its labels and loss, and the evaluation
// graph of its own for batches of evalBatch test images, as a
// training.Model.
func buildModel(c config, train, test *data.Set) (training.Model, error) {
	if test.N == 0 {
		return training.Model{}, fmt.Errorf("the test set is empty")
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x747261696e))
	g := G.NewGraph()
	b := c.shard() // each rank's rows of the global batch
	net, err := buildNet(c, g, b, train, true, rng)
	if err != nil { // a model the flags cannot build (-depth 50): a usage error
		return training.Model{}, &usageError{err}
	}
	yb := make([]float32, b*train.Classes)
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(b, train.Classes), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(b, train.Classes), tensor.WithBacking(yb))))
	loss, err := nn.CrossEntropy(net.logits, y)
	if err != nil {
		return training.Model{}, err
	}
	if _, err = G.Grad(loss, net.Nodes()...); err != nil {
		return training.Model{}, fmt.Errorf("building gradients: %w", err)
	}
	ev, err := buildNet(c, G.NewGraph(), evalBatch(c, test), test, false, rand.New(rand.NewPCG(0, 0)))
	if err != nil {
		return training.Model{}, err
	}
	m := net.model(c, y, yb)
	m.Loss = loss
	evm := ev.model(c, nil, nil)
	m.Eval = &evm
	return m, nil
}

// model returns the network as a training.Model with the labels y (nil
// for an evaluation network), whose backing array is yb. The ViT's input
// takes patches: a Feed cuts the batch's images into them, and with
// -engine tape fills the dropout masks from the batch's random source;
// with -engine program, the program draws the masks (Model.Dropout).
func (n *network) model(c config, y *G.Node, yb []float32) training.Model {
	m := training.Model{Logits: n.logits, Input: n.x, Labels: y, Params: n.Params()}
	if n.vit == nil || n.images {
		return m
	}
	if c.engine == "program" {
		for _, mask := range n.masks() {
			m.Dropout = append(m.Dropout, program.Dropout{Node: mask, P: n.vit.Drop.P})
		}
	}
	m.Input, m.Inputs = nil, []*G.Node{n.x}
	if y != nil {
		m.Inputs = append(m.Inputs, y)
	}
	m.Feed = func(b training.Batch, set func(*G.Node, any) error) error {
		n.fill(b.X, b.Size)
		if c.engine == "tape" && y != nil {
			n.vit.FillMasks(b.RNG)
		}
		if err := set(n.x, n.xb); err != nil || y == nil {
			return err
		}
		clear(yb)
		if err := nn.OneHot(yb[:b.Size*b.Classes], b.Labels[:b.Size], b.Classes); err != nil {
			return err
		}
		return set(y, yb)
	}
	return m
}

// evalBatch is how many test images one evaluation run takes.
func evalBatch(c config, test *data.Set) int {
	if c.model == "vit" {
		return min(100, test.N)
	}
	return min(500, test.N)
}
