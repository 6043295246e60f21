// Copyright 2019 Gorgonia Authors. Changes copyright the orthonet authors.
//
// Licensed under the Apache License, Version 2.0 (the "License"); you may not
// use this file except in compliance with the License. A copy is in
// LICENSE.gorgonia beside this file, and at
// http://www.apache.org/licenses/LICENSE-2.0. Unless required by applicable
// law or agreed to in writing, software distributed under the License is
// distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
// KIND, either express or implied.
//
// The LSTM cell (lstm and its fwd) and the graph of the character model
// (buildModel) are adapted from gorgonia.org/gorgonia@v0.9.18's
// examples/charRNN/model.go. What changed: a batch of B sequences unrolled
// for a fixed T steps instead of one sentence at a time; the weights stored
// as the transposes of Gorgonia's, so that a batch multiplies them from the
// left (x W); the inputs' projections and biases computed for all T steps in
// one product per gate; the embedding applied to one-hot rows instead of
// slicing a row; the loss the mean cross-entropy per predicted character;
// one layer; and the cell-write gate's hidden-to-hidden weight on the
// Stiefel manifold.

// Command charrnn trains the LSTM character model of Gorgonia's
// examples/charRNN with its cell's hidden-to-hidden weight on the Stiefel
// manifold.
package main

import (
	"errors"
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/param"
)

// modelConfig sizes the character model.
type modelConfig struct {
	// Vocab is the number of characters: the width of the one-hot inputs
	// and targets. Required.
	Vocab int
	// Embedding is the width of a character's embedding; 0 selects 10,
	// Gorgonia's.
	Embedding int
	// Hidden is the LSTM's hidden size, the side of its square Stiefel
	// weight; 0 selects 100, Gorgonia's.
	Hidden int
	// SeqLen is T, the steps the LSTM is unrolled for: a sequence is T+1
	// characters, each of the first T predicting the next. Required.
	SeqLen int
	// Batch is B, the sequences of a batch. Required.
	Batch int
	// Dtype is the element type, tensor.Float32 or tensor.Float64; the zero
	// value selects Float32.
	Dtype tensor.Dtype
}

// withDefaults returns c with its zero sizes and type set to their defaults,
// or an error naming a size that is not positive.
func (c modelConfig) withDefaults() (modelConfig, error) {
	if c.Embedding == 0 {
		c.Embedding = 10
	}
	if c.Hidden == 0 {
		c.Hidden = 100
	}
	if c.Dtype == (tensor.Dtype{}) {
		c.Dtype = tensor.Float32
	}
	switch {
	case c.Vocab < 1 || c.Embedding < 1 || c.Hidden < 1 || c.SeqLen < 1 || c.Batch < 1:
		return c, fmt.Errorf("charrnn: sizes vocab %d, embedding %d, hidden %d, sequence %d, batch %d: all must be positive",
			c.Vocab, c.Embedding, c.Hidden, c.SeqLen, c.Batch)
	case c.SeqLen > 256:
		return c, fmt.Errorf("charrnn: sequences of %d characters: at most 256 (Gorgonia v0.9.18 tells slices apart by a byte of their bounds)", c.SeqLen)
	case c.Dtype != tensor.Float32 && c.Dtype != tensor.Float64:
		return c, fmt.Errorf("charrnn: element type %v, want float32 or float64", c.Dtype)
	}
	return c, nil
}

// lstm is one LSTM layer: per gate (input, forget, output, cell write) an
// input weight (in x hidden), a hidden-to-hidden weight (hidden x hidden)
// and a bias (1 x hidden).
type lstm struct {
	wix, wih, biasI *G.Node
	wfx, wfh, biasF *G.Node
	wox, woh, biasO *G.Node
	wcx, wch, biasC *G.Node
}

// gateInputs are one step's input projections x W + b of the four gates,
// each (batch, hidden).
type gateInputs struct{ i, f, o, c *G.Node }

// fwd returns the hidden state and cell of one step, (batch, hidden) each,
// from the step's input projections and the previous step's hidden state
// and cell; nil previous ones are the zero state of the first step.
func (l *lstm) fwd(x gateInputs, prevHidden, prevCell *G.Node) (hidden, cell *G.Node) {
	pre := func(xw, wh *G.Node) *G.Node {
		if prevHidden == nil {
			return xw
		}
		return G.Must(G.Add(xw, G.Must(G.Mul(prevHidden, wh))))
	}
	inputGate := G.Must(G.Sigmoid(pre(x.i, l.wih)))
	forgetGate := G.Must(G.Sigmoid(pre(x.f, l.wfh)))
	outputGate := G.Must(G.Sigmoid(pre(x.o, l.woh)))
	cellWrite := G.Must(G.Tanh(pre(x.c, l.wch)))

	// cell activations
	cell = G.Must(G.HadamardProd(inputGate, cellWrite))
	if prevCell != nil {
		retain := G.Must(G.HadamardProd(forgetGate, prevCell))
		cell = G.Must(G.Add(retain, cell))
	}
	hidden = G.Must(G.HadamardProd(outputGate, G.Must(G.Tanh(cell))))
	return hidden, cell
}

// charModel is the character model's graph: the loss of predicting each
// next character of B sequences over T steps, its inputs and parameters.
type charModel struct {
	cfg modelConfig
	// x and y are the (T*B, vocab) one-hot inputs and targets, row t*B+b
	// being step t of sequence b (step-major, so that a step's rows are a
	// leading-row slice, a view in a compiled program).
	x, y *G.Node
	// logits are the (T*B, vocab) scores of the next character, rows as x's.
	logits *G.Node
	// loss is the mean cross-entropy over the T*B predictions.
	loss *G.Node
	// params are the embedding, the LSTM's weights and the decoder's, all
	// plain but the cell-write gate's hidden-to-hidden weight (Stiefel).
	params []param.Param
	// stiefel is the constrained weight, also in params.
	stiefel param.Param

	// xs and ys are feed's one-hot buffers, []float32 or []float64.
	xs, ys any
}

// buildModel builds the character model on g: an embedding of the one-hot
// characters, one LSTM layer unrolled for cfg.SeqLen steps, and a dense
// decoder to the next character's logits. Plain weights start as Gorgonia's
// (Gaussian, standard deviation 0.08; the embedding 0.008), biases at zero,
// and the cell-write gate's hidden-to-hidden weight Haar-random on the
// orthogonal group (the Stiefel manifold of square matrices), all drawn
// from rng. gorgonia.Grad is not called.
func buildModel(g *G.ExprGraph, cfg modelConfig, rng *rand.Rand) (m *charModel, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	defer func() { // G.Must's panics, from shapes that do not fit, as errors
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("charrnn: building the model: %v", r)
		}
	}()
	V, E, H, T, B, dt := cfg.Vocab, cfg.Embedding, cfg.Hidden, cfg.SeqLen, cfg.Batch, cfg.Dtype
	m = &charModel{cfg: cfg}
	w := &weights{g: g, dt: dt, rng: rng}
	embedding := w.gauss("embedding", 0.008, V, E)
	l, err := newLSTM(w, E, H)
	if err != nil {
		return nil, err
	}
	m.stiefel = param.OnStiefel(l.wch)
	whd := w.gauss("whd", 0.08, H, V)
	biasD := w.zeros("bias_d", V)
	m.params = append(w.plain, m.stiefel)

	m.x = G.NewMatrix(g, dt, G.WithShape(T*B, V), G.WithName("x"), G.WithInit(G.Zeroes()))
	m.y = G.NewMatrix(g, dt, G.WithShape(T*B, V), G.WithName("y"), G.WithInit(G.Zeroes()))
	all := l.unroll(G.Must(G.Mul(m.x, embedding)), T, B, H)
	m.logits = G.Must(G.BroadcastAdd(G.Must(G.Mul(all, whd)), biasD, nil, []byte{0}))
	m.loss = crossEntropy(m.logits, m.y)

	if dt == tensor.Float32 {
		m.xs, m.ys = make([]float32, T*B*V), make([]float32, T*B*V)
	} else {
		m.xs, m.ys = make([]float64, T*B*V), make([]float64, T*B*V)
	}
	return m, nil
}

// weights makes the model's weights on g, of type dt, drawn in turn from
// rng, and collects the plain ones.
type weights struct {
	g     *G.ExprGraph
	dt    tensor.Dtype
	rng   *rand.Rand
	plain []param.Param
}

// gauss returns a plain rows x cols weight, Gaussian of standard deviation
// std.
func (w *weights) gauss(name string, std float64, rows, cols int) *G.Node {
	n := matrix(w.g, w.dt, name, rows, cols, func(int) float64 { return std * w.rng.NormFloat64() })
	w.plain = append(w.plain, param.Plain(n))
	return n
}

// zeros returns a plain 1 x cols bias of zeros.
func (w *weights) zeros(name string, cols int) *G.Node {
	n := matrix(w.g, w.dt, name, 1, cols, func(int) float64 { return 0 })
	w.plain = append(w.plain, param.Plain(n))
	return n
}

// newLSTM returns the LSTM's weights for inputs of width E and hidden size
// H: plain ones from w, and the cell-write gate's hidden-to-hidden weight
// Haar-random on the orthogonal group, drawn from w's rng (not in w.plain).
func newLSTM(w *weights, E, H int) (*lstm, error) {
	l := &lstm{
		wix: w.gauss("wix", 0.08, E, H), wih: w.gauss("wih", 0.08, H, H), biasI: w.zeros("bias_i", H),
		wfx: w.gauss("wfx", 0.08, E, H), wfh: w.gauss("wfh", 0.08, H, H), biasF: w.zeros("bias_f", H),
		wox: w.gauss("wox", 0.08, E, H), woh: w.gauss("woh", 0.08, H, H), biasO: w.zeros("bias_o", H),
		wcx: w.gauss("wcx", 0.08, E, H), biasC: w.zeros("bias_c", H),
	}
	st, err := manifold.NewStiefel[float64](H, H)
	if err != nil {
		return nil, fmt.Errorf("charrnn: %w", err)
	}
	haar := make([]float64, H*H)
	if err := st.Random(haar, w.rng); err != nil {
		return nil, fmt.Errorf("charrnn: %w", err)
	}
	l.wch = matrix(w.g, w.dt, "wch", H, H, func(i int) float64 { return haar[i] })
	return l, nil
}

// unroll returns the LSTM's hidden states of T steps of B sequences,
// (T*B, H) step-major, from e, every step's (T*B, embedding) inputs.
func (l *lstm) unroll(e *G.Node, T, B, H int) *G.Node {
	// Every step's input projections at once, per gate. Each is (T, B,
	// hidden), step t its slice t: Gorgonia v0.9.18 hashes a slice's bounds
	// as bytes, so rows t*B to (t+1)*B of a (T*B, hidden) matrix past 255
	// would be merged with another step's slice.
	proj := func(w, b *G.Node) *G.Node {
		p := G.Must(G.BroadcastAdd(G.Must(G.Mul(e, w)), b, nil, []byte{0}))
		return G.Must(G.Reshape(p, tensor.Shape{T, B, H}))
	}
	xi, xf, xo, xc := proj(l.wix, l.biasI), proj(l.wfx, l.biasF), proj(l.wox, l.biasO), proj(l.wcx, l.biasC)
	var hidden, cell *G.Node
	hiddens := make(G.Nodes, T)
	for t := range T {
		rows := func(n *G.Node) *G.Node { return G.Must(G.Slice(n, G.S(t))) }
		hidden, cell = l.fwd(gateInputs{rows(xi), rows(xf), rows(xo), rows(xc)}, hidden, cell)
		hiddens[t] = hidden
	}
	all := hiddens[0]
	if T > 1 {
		all = G.Must(G.Concat(0, hiddens...))
	}
	return all
}

// crossEntropy returns the mean over the rows of -log softmax(logits)[y],
// the labels one-hot rows of onehot, in Gorgonia's own ops.
func crossEntropy(logits, onehot *G.Node) *G.Node {
	logp := G.Must(G.LogSoftMax(logits))
	picked := G.Must(G.Sum(G.Must(G.HadamardProd(logp, onehot)), 1))
	return G.Must(G.Neg(G.Must(G.Mean(picked))))
}

// matrix returns a rows x cols node of type dt whose entry i is at(i).
func matrix(g *G.ExprGraph, dt tensor.Dtype, name string, rows, cols int, at func(int) float64) *G.Node {
	var t *tensor.Dense
	if dt == tensor.Float32 {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(at(i))
		}
		t = tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v))
	} else {
		v := make([]float64, rows*cols)
		for i := range v {
			v[i] = at(i)
		}
		t = tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v))
	}
	return G.NewMatrix(g, dt, G.WithShape(rows, cols), G.WithName(name), G.WithValue(t))
}

// inputs returns the model's input nodes, the one-hot inputs and targets,
// which feed sets.
func (m *charModel) inputs() []*G.Node { return []*G.Node{m.x, m.y} }

// feed writes a batch into the model's inputs through set (a compiled
// program's SetInput, or gorgonia.Let for a tape machine): seqs holds B
// sequences of T+1 character indices (as float32, row-major, a textSet's
// examples); character t of a sequence is the input of step t and
// character t+1 its target. The buffers given to set are the model's own,
// rewritten by the next feed.
func (m *charModel) feed(seqs []float32, set func(n *G.Node, data any) error) error {
	var err error
	switch xs := m.xs.(type) {
	case []float32:
		err = oneHotSteps(xs, m.ys.([]float32), seqs, m.cfg)
	case []float64:
		err = oneHotSteps(xs, m.ys.([]float64), seqs, m.cfg)
	}
	if err != nil {
		return err
	}
	return errors.Join(set(m.x, m.xs), set(m.y, m.ys))
}

// oneHotSteps writes the one-hot inputs and targets of seqs (B sequences of
// T+1 indices) into x and y, (T*B, vocab) each, row t*B+b for step t of
// sequence b.
func oneHotSteps[F float32 | float64](x, y []F, seqs []float32, cfg modelConfig) error {
	T, B, V := cfg.SeqLen, cfg.Batch, cfg.Vocab
	if len(seqs) != B*(T+1) {
		return fmt.Errorf("charrnn: feed: %d values, want %d sequences of %d characters", len(seqs), B, T+1)
	}
	clear(x)
	clear(y)
	for b := range B {
		seq := seqs[b*(T+1) : (b+1)*(T+1)]
		for t, c := range seq {
			k := int(c)
			if float32(k) != c || k < 0 || k >= V {
				return fmt.Errorf("charrnn: feed: character %v of sequence %d is not an index in [0, %d)", c, b, V)
			}
			if t < T {
				x[(t*B+b)*V+k] = 1
			}
			if t > 0 {
				y[((t-1)*B+b)*V+k] = 1
			}
		}
	}
	return nil
}
