package fused

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
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
	if err := checkMatrices(arg{"logits", logits}, arg{"targets", targets}); err != nil {
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

// Kernel returns backend.SoftmaxCrossEntropy.
func (*SoftmaxCrossEntropyOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.SoftmaxCrossEntropy{Rows: s[0][0], Classes: s[0][1], Z: in[0], T: in[1], Loss: out}
}

// Do computes the loss on the host.
func (o *SoftmaxCrossEntropyOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }

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

// Kernel returns backend.SoftmaxCrossEntropyGrad.
func (*SoftmaxCrossEntropyGradOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.SoftmaxCrossEntropyGrad{Rows: s[0][0], Classes: s[0][1], Z: in[0], T: in[1], G: in[2], DZ: out}
}

// Do computes the gradient on the host.
func (o *SoftmaxCrossEntropyGradOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }
