package fused

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// SoftmaxCrossEntropyOp is the mean over rows of the cross-entropy between
// softmax(logits row) and a target distribution: arguments logits and
// targets, both (rows, classes); the result is the scalar
// mean_i (logsumexp(z_i) sum_j t_ij - sum_j t_ij z_ij), which for one-hot
// targets is mean_i -log softmax(z_i)[label_i]. It is computed with the row
// maximum subtracted, so large logits do not overflow. Differentiable in
// the logits only.
type SoftmaxCrossEntropyOp struct{ base }

// SoftmaxCrossEntropy returns the mean softmax cross-entropy of logits
// against targets (one-hot rows, or any distributions).
func SoftmaxCrossEntropy(logits, targets *G.Node) (*G.Node, error) {
	if err := checkMatrix("logits", logits); err != nil {
		return nil, err
	}
	if err := checkMatrix("targets", targets); err != nil {
		return nil, err
	}
	if !logits.Shape().Eq(targets.Shape()) {
		return nil, fmt.Errorf("fused: softmax cross-entropy of logits %v against targets %v", logits.Shape(), targets.Shape())
	}
	if err := sameType(logits, targets); err != nil {
		return nil, err
	}
	return G.ApplyOp(&SoftmaxCrossEntropyOp{}, logits, targets)
}

func (*SoftmaxCrossEntropyOp) Arity() int         { return 2 }
func (*SoftmaxCrossEntropyOp) Type() hm.Type      { return matrixType(2, true) }
func (*SoftmaxCrossEntropyOp) String() string     { return "SoftmaxCrossEntropy" }
func (o *SoftmaxCrossEntropyOp) Hashcode() uint32 { return hashOf(o) }

func (o *SoftmaxCrossEntropyOp) WriteHash(h hashWriter) { writeHash(h, o) }

func (*SoftmaxCrossEntropyOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.ScalarShape(), nil
}

// Do computes the loss.
func (o *SoftmaxCrossEntropyOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 2, vals)
	if err != nil {
		return nil, err
	}
	z, t := a[0], a[1]
	s := vals[0].Shape()
	r, k := s[0], s[1]
	var loss float64
	for i := 0; i < r; i++ {
		zi, ti := z[i*k:(i+1)*k], t[i*k:(i+1)*k]
		lse := logSumExp(zi)
		for j := range zi {
			loss += ti[j] * (lse - zi[j])
		}
	}
	return scalarOf(loss/float64(r), is32), nil
}

func logSumExp(z []float64) float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, v)
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

func (*SoftmaxCrossEntropyOp) DiffWRT(n int) []bool { return []bool{true, false} }

// SymDiff returns the gradient of the logits: a SoftmaxCrossEntropyGradOp.
func (*SoftmaxCrossEntropyOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	g, err := G.ApplyOp(&SoftmaxCrossEntropyGradOp{}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{g, nil}, nil
}

// SoftmaxCrossEntropyGradOp is the gradient of SoftmaxCrossEntropyOp with
// respect to the logits: arguments logits, targets (rows, classes) and the
// scalar gradient g of the loss; the result (rows, classes) is
// g (softmax(z_i) sum_j t_ij - t_i) / rows.
type SoftmaxCrossEntropyGradOp struct{ base }

func (*SoftmaxCrossEntropyGradOp) Arity() int { return 3 }
func (*SoftmaxCrossEntropyGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t := G.TensorType{Dims: 2, Of: a}
	return hm.NewFnType(t, t, a, t)
}
func (*SoftmaxCrossEntropyGradOp) String() string     { return "SoftmaxCrossEntropyGrad" }
func (o *SoftmaxCrossEntropyGradOp) Hashcode() uint32 { return hashOf(o) }

func (o *SoftmaxCrossEntropyGradOp) WriteHash(h hashWriter) { writeHash(h, o) }

func (*SoftmaxCrossEntropyGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// Do computes the gradient.
func (o *SoftmaxCrossEntropyGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 3, vals)
	if err != nil {
		return nil, err
	}
	z, t, g := a[0], a[1], a[2][0]
	s := vals[0].Shape()
	r, k := s[0], s[1]
	out := make([]float64, r*k)
	for i := 0; i < r; i++ {
		zi, ti := z[i*k:(i+1)*k], t[i*k:(i+1)*k]
		lse := logSumExp(zi)
		var mass float64
		for _, v := range ti {
			mass += v
		}
		for j := range zi {
			out[i*k+j] = g * (math.Exp(zi[j]-lse)*mass - ti[j]) / float64(r)
		}
	}
	return tensorOf(out, is32, r, k), nil
}
