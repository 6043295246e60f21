package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/optim"
)

// Attention is multi-head self-attention over sequences of tokens:
// softmax(Q K^T / sqrt(d/h)) V per head with Q = x Wq, K = x Wk, V = x Wv,
// then the heads' outputs concatenated and multiplied by Wo. Wq, Wk and Wv
// are d x d, bias-free and Stiefel-constrained (the paper's orthogonal ViT);
// Wo is an unconstrained Linear with bias.
type Attention struct {
	Wq, Wk, Wv *G.Node
	Out        *Linear
	Heads      int
}

// NewAttention returns attention over d features with the given number of
// heads (which must divide d), Wq, Wk and Wv Haar-random orthogonal.
func NewAttention(g *G.ExprGraph, name string, d, heads int, dt tensor.Dtype, rng *rand.Rand) (*Attention, error) {
	if heads < 1 || d%heads != 0 {
		return nil, fmt.Errorf("nn: %s: %d heads do not divide %d features", name, heads, d)
	}
	a := &Attention{Heads: heads}
	for _, w := range []struct {
		dst  **G.Node
		name string
	}{{&a.Wq, ".Wq"}, {&a.Wk, ".Wk"}, {&a.Wv, ".Wv"}} {
		l, err := NewOrthoLinear(g, name+w.name, d, d, dt, false, rng)
		if err != nil {
			return nil, err
		}
		*w.dst = l.W
	}
	var err error
	if a.Out, err = NewLinear(g, name+".out", d, d, dt, true, rng); err != nil {
		return nil, err
	}
	return a, nil
}

// Forward applies attention to x of shape (batch*tokens, d): the tokens of
// each sequence in consecutive rows. It returns the same shape. Taking rows
// rather than a (batch, tokens, d) node keeps x from being reshaped:
// gorgonia v0.9.18's tape machine writes in place through Reshape views,
// which would corrupt an x that is also used elsewhere (a residual stream).
func (a *Attention) Forward(x *G.Node, tokens int) (*G.Node, error) {
	s := x.Shape()
	d := a.Wq.Shape()[0]
	if x.Dims() != 2 || s[1] != d || tokens < 1 || s[0]%tokens != 0 {
		return nil, fmt.Errorf("nn: attention over %d features got input %v for %d tokens, want (batch*%d, %d)", d, s, tokens, tokens, d)
	}
	b, t, h := s[0]/tokens, tokens, a.Heads
	dh := d / h
	// heads maps (b*t, d) to (b*h, t, dh); the reshapes apply to fresh
	// products only.
	heads := func(w *G.Node) *G.Node {
		p := G.Must(G.Reshape(G.Must(G.Mul(x, w)), tensor.Shape{b, t, h, dh}))
		return G.Must(G.Reshape(G.Must(G.Transpose(p, 0, 2, 1, 3)), tensor.Shape{b * h, t, dh}))
	}
	q, k, v := heads(a.Wq), heads(a.Wk), heads(a.Wv)
	scores := G.Must(G.BatchedMatMul(q, k, false, true))
	scale := G.NewConstant(1 / math.Sqrt(float64(dh)))
	if x.Dtype() == tensor.Float32 {
		scale = G.NewConstant(float32(1 / math.Sqrt(float64(dh))))
	}
	scores = G.Must(G.Mul(scores, scale))
	// Shift by the row maximum before SoftMax (see CrossEntropy).
	shifted := G.Must(G.BroadcastSub(scores, G.Must(G.Max(scores, 2)), nil, []byte{2}))
	weights, err := G.SoftMax(shifted, 2)
	if err != nil {
		return nil, fmt.Errorf("nn: attention: %w", err)
	}
	ctx := G.Must(G.BatchedMatMul(weights, v)) // (b*h, t, dh)
	ctx = G.Must(G.Reshape(ctx, tensor.Shape{b, h, t, dh}))
	ctx = G.Must(G.Reshape(G.Must(G.Transpose(ctx, 0, 2, 1, 3)), tensor.Shape{b * t, d}))
	return a.Out.Forward(ctx)
}

// Params returns Wq, Wk, Wv marked as Stiefel points, then Wo and its bias.
func (a *Attention) Params() []G.ValueGrad {
	return append([]G.ValueGrad{optim.Stiefel(a.Wq), optim.Stiefel(a.Wk), optim.Stiefel(a.Wv)}, a.Out.Params()...)
}

// Nodes returns every parameter node.
func (a *Attention) Nodes() G.Nodes { return optim.Nodes(a.Params()) }
