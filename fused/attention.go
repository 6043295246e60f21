package fused

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// AttentionOp is the core of multi-head self-attention: arguments q, k and
// v, each (batch*Tokens, d) with the Tokens rows of a sequence consecutive
// and head h in columns h*dh to (h+1)*dh, dh = d/Heads. For every sequence
// and head it computes softmax(Q_h K_h^T Scale) V_h (the softmax along each
// row, with the row maximum subtracted) into the head's columns of the
// (batch*Tokens, d) result: the heads side by side, as the output
// projection takes them.
type AttentionOp struct {
	base
	Heads, Tokens int
	Scale         float64
}

// Attention returns the multi-head attention of queries q, keys k and
// values v over sequences of tokens rows, with scale 1/sqrt(d/heads).
func Attention(q, k, v *G.Node, heads, tokens int) (*G.Node, error) {
	if err := checkMatrices(arg{"queries", q}, arg{"keys", k}, arg{"values", v}); err != nil {
		return nil, err
	}
	s := q.Shape()
	if !k.Shape().Eq(s) || !v.Shape().Eq(s) {
		return nil, fmt.Errorf("fused: attention of queries %v, keys %v and values %v, want one shape", s, k.Shape(), v.Shape())
	}
	if heads < 1 || s[1]%heads != 0 {
		return nil, fmt.Errorf("fused: attention with %d heads over %d features: the heads must divide them", heads, s[1])
	}
	if tokens < 1 || s[0]%tokens != 0 {
		return nil, fmt.Errorf("fused: attention over %d rows in sequences of %d tokens", s[0], tokens)
	}
	if err := sameType(q, k, v); err != nil {
		return nil, err
	}
	return G.ApplyOp(&AttentionOp{Heads: heads, Tokens: tokens, Scale: 1 / math.Sqrt(float64(s[1]/heads))}, q, k, v)
}

func (*AttentionOp) Arity() int    { return 3 }
func (*AttentionOp) Type() hm.Type { return matrixType(3, false) }
func (o *AttentionOp) String() string {
	return fmt.Sprintf("Attention{heads=%d, tokens=%d, scale=%g}", o.Heads, o.Tokens, o.Scale)
}
func (o *AttentionOp) Hashcode() uint32       { return hashOf(o) }
func (o *AttentionOp) WriteHash(h hashWriter) { writeHash(h, o) }

// Kernel returns backend.Attention.
func (o *AttentionOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.Attention{Seqs: s[0][0] / o.Tokens, Tokens: o.Tokens, Heads: o.Heads, D: s[0][1], Scale: o.Scale,
		Q: in[0], K: in[1], V: in[2], Out: out}
}

// Do computes the attention on the host.
func (o *AttentionOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }

func (*AttentionOp) DiffWRT(int) []bool { return []bool{true, true, true} }

// SymDiff returns the gradients of q, k and v: row blocks of one
// AttentionGradOp.
func (o *AttentionOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	g, err := G.ApplyOp(&AttentionGradOp{Heads: o.Heads, Tokens: o.Tokens, Scale: o.Scale}, in[0], in[1], in[2], grad)
	if err != nil {
		return nil, err
	}
	n := in[0].Shape()[0]
	out := make(G.Nodes, 3)
	for i := range out {
		if out[i], err = rows(g, i*n, (i+1)*n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AttentionGradOp is the gradient of AttentionOp: arguments q, k, v and the
// gradient dy of the result, all (n, d); the result (3n, d) holds the
// gradients of q, k and v one above the other. Per sequence and head, with
// P the softmax weights: dV = P^T dY, dP = dY V^T,
// dS = P (dP - rowsum(dP P)), dQ = Scale dS K, dK = Scale dS^T Q.
type AttentionGradOp struct {
	base
	Heads, Tokens int
	Scale         float64
}

func (*AttentionGradOp) Arity() int    { return 4 }
func (*AttentionGradOp) Type() hm.Type { return matrixType(4, false) }
func (o *AttentionGradOp) String() string {
	return fmt.Sprintf("AttentionGrad{heads=%d, tokens=%d, scale=%g}", o.Heads, o.Tokens, o.Scale)
}
func (o *AttentionGradOp) Hashcode() uint32       { return hashOf(o) }
func (o *AttentionGradOp) WriteHash(h hashWriter) { writeHash(h, o) }

func (*AttentionGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return resultShape(in, func(s tensor.Shape) tensor.Shape { return tensor.Shape{3 * s[0], s[1]} })
}

// Kernel returns backend.AttentionGrad.
func (o *AttentionGradOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.AttentionGrad{Seqs: s[0][0] / o.Tokens, Tokens: o.Tokens, Heads: o.Heads, D: s[0][1], Scale: o.Scale,
		Q: in[0], K: in[1], V: in[2], DOut: in[3], DQKV: out}
}

// Do computes the gradients on the host.
func (o *AttentionGradOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }
