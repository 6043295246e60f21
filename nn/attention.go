package nn

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/param"
)

// Attention is multi-head self-attention over sequences of tokens:
// softmax(Q K^T / sqrt(d/h)) V per head with Q = x Wq, K = x Wk, V = x Wv,
// then the heads' outputs concatenated and multiplied by Wo. Wq, Wk and Wv
// are d x d, bias-free and Stiefel-constrained (the paper's orthogonal ViT);
// Wo is an unconstrained Linear with bias.
type Attention struct {
	Wq, Wk, Wv param.Param
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
		dst  *param.Param
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
// each sequence in consecutive rows. It returns the same shape. The
// products with Wq, Wk and Wv are Gorgonia products; the rest (per head
// scores, softmax and weighted sum) is one fused op (fused.Attention), so
// no Reshape or Transpose is needed.
func (a *Attention) Forward(x *G.Node, tokens int) (*G.Node, error) {
	s := x.Shape()
	d := a.Wq.Node.Shape()[0]
	if x.Dims() != 2 || s[1] != d || tokens < 1 || s[0]%tokens != 0 {
		return nil, fmt.Errorf("nn: attention over %d features got input %v for %d tokens, want (batch*%d, %d)", d, s, tokens, tokens, d)
	}
	q, err := G.Mul(x, a.Wq.Node)
	if err != nil {
		return nil, fmt.Errorf("nn: attention: %w", err)
	}
	k, err := G.Mul(x, a.Wk.Node)
	if err != nil {
		return nil, fmt.Errorf("nn: attention: %w", err)
	}
	v, err := G.Mul(x, a.Wv.Node)
	if err != nil {
		return nil, fmt.Errorf("nn: attention: %w", err)
	}
	ctx, err := fused.Attention(q, k, v, a.Heads, tokens)
	if err != nil {
		return nil, fmt.Errorf("nn: attention: %w", err)
	}
	return a.Out.Forward(ctx)
}

// Params returns Wq, Wk, Wv (on the Stiefel manifold), then Wo and its bias.
func (a *Attention) Params() []param.Param {
	return append([]param.Param{a.Wq, a.Wk, a.Wv}, a.Out.Params()...)
}
