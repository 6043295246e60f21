package fused

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/linalg"
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
	for _, a := range []struct {
		what string
		n    *G.Node
	}{{"queries", q}, {"keys", k}, {"values", v}} {
		if err := checkMatrix(a.what, a.n); err != nil {
			return nil, err
		}
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

func (*AttentionOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// head is one sequence's head: rows lo to lo+t, columns c0 to c0+dh of a
// (rows, d) matrix.
type head struct{ lo, t, c0, dh, d int }

// weights returns the t x t softmax weights of a head: the scores by a
// float64 product, then a stable softmax of each row.
func (o *AttentionOp) weights(h head, q, k []float64) []float64 {
	p := make([]float64, h.t*h.t)
	off := h.lo*h.d + h.c0
	linalg.Gemm(false, true, h.t, h.t, h.dh, o.Scale, q[off:], h.d, k[off:], h.d, 0, p, h.t)
	for i := 0; i < h.t; i++ {
		row := p[i*h.t : (i+1)*h.t]
		lse := logSumExp(row)
		for j := range row {
			row[j] = math.Exp(row[j] - lse)
		}
	}
	return p
}

func (o *AttentionOp) heads(rows, d int) []head {
	var hs []head
	dh := d / o.Heads
	for lo := 0; lo < rows; lo += o.Tokens {
		for h := 0; h < o.Heads; h++ {
			hs = append(hs, head{lo: lo, t: o.Tokens, c0: h * dh, dh: dh, d: d})
		}
	}
	return hs
}

// Do computes the attention, in float64.
func (o *AttentionOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 3, vals)
	if err != nil {
		return nil, err
	}
	s := vals[0].Shape()
	out := make([]float64, s[0]*s[1])
	for _, h := range o.heads(s[0], s[1]) {
		p := o.weights(h, a[0], a[1])
		off := h.lo*h.d + h.c0
		linalg.Gemm(false, false, h.t, h.dh, h.t, 1, p, h.t, a[2][off:], h.d, 0, out[off:], h.d)
	}
	return tensorOf(out, is32, s[0], s[1]), nil
}

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
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{3 * s[0][0], s[0][1]}, nil
}

// Do computes the gradients, in float64.
func (o *AttentionGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 4, vals)
	if err != nil {
		return nil, err
	}
	s := vals[0].Shape()
	n, d := s[0], s[1]
	q, k, v, dy := a[0], a[1], a[2], a[3]
	out := make([]float64, 3*n*d)
	dq, dk, dv := out[:n*d], out[n*d:2*n*d], out[2*n*d:]
	fwd := &AttentionOp{Heads: o.Heads, Tokens: o.Tokens, Scale: o.Scale}
	for _, h := range fwd.heads(n, d) {
		t, off := h.t, h.lo*d+h.c0
		p := fwd.weights(h, q, k)
		// dV = P^T dY, dP = dY V^T.
		linalg.Gemm(true, false, t, h.dh, t, 1, p, t, dy[off:], d, 0, dv[off:], d)
		ds := make([]float64, t*t)
		linalg.Gemm(false, true, t, t, h.dh, 1, dy[off:], d, v[off:], d, 0, ds, t)
		// dS = P (dP - rowsum(dP P)).
		for i := 0; i < t; i++ {
			var dot float64
			for j := 0; j < t; j++ {
				dot += ds[i*t+j] * p[i*t+j]
			}
			for j := 0; j < t; j++ {
				ds[i*t+j] = p[i*t+j] * (ds[i*t+j] - dot)
			}
		}
		// dQ = Scale dS K, dK = Scale dS^T Q.
		linalg.Gemm(false, false, t, h.dh, t, o.Scale, ds, t, k[off:], d, 0, dq[off:], d)
		linalg.Gemm(true, false, t, h.dh, t, o.Scale, ds, t, q[off:], d, 0, dk[off:], d)
	}
	return tensorOf(out, is32, 3*n, d), nil
}
