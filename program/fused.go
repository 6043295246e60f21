package program

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/fused"
)

var activations = map[fused.Activation]backend.Activation{
	fused.Identity: backend.ActIdentity, fused.ReLU: backend.ActReLU, fused.GELUTanh: backend.ActGELU,
}

// lowerFused lowers orthonet's fused ops (package fused) to their kernels;
// ok is false for any other op.
func (c *compiler) lowerFused(n *G.Node, in []*val) (ok bool, err error) {
	op := n.Op()
	var k backend.Kernel
	switch o := op.(type) {
	case *fused.SoftmaxCrossEntropyOp:
		z := in[0]
		k = backend.SoftmaxCrossEntropy{Rows: z.shape[0], Classes: z.shape[1], Z: z.operand(), T: in[1].operand()}
	case *fused.SoftmaxCrossEntropyGradOp:
		z := in[0]
		k = backend.SoftmaxCrossEntropyGrad{Rows: z.shape[0], Classes: z.shape[1], Z: z.operand(), T: in[1].operand(), G: in[2].operand()}
	case *fused.LayerNormOp:
		x := in[0]
		k = backend.LayerNorm{Rows: x.shape[0], D: x.shape[1], Eps: o.Eps, X: x.operand(), Gamma: in[1].operand(), Beta: in[2].operand()}
	case *fused.LayerNormGradOp:
		x := in[0]
		k = backend.LayerNormGrad{Rows: x.shape[0], D: x.shape[1], Eps: o.Eps, X: x.operand(), Gamma: in[1].operand(), DY: in[2].operand()}
	case *fused.LayerNormParamGradOp:
		x := in[0]
		k = backend.LayerNormParamGrad{Rows: x.shape[0], D: x.shape[1], Eps: o.Eps, X: x.operand(), DY: in[1].operand()}
	case *fused.AttentionOp:
		q := in[0]
		k = backend.Attention{Seqs: q.shape[0] / o.Tokens, Tokens: o.Tokens, Heads: o.Heads, D: q.shape[1], Scale: o.Scale,
			Q: q.operand(), K: in[1].operand(), V: in[2].operand()}
	case *fused.AttentionGradOp:
		q := in[0]
		k = backend.AttentionGrad{Seqs: q.shape[0] / o.Tokens, Tokens: o.Tokens, Heads: o.Heads, D: q.shape[1], Scale: o.Scale,
			Q: q.operand(), K: in[1].operand(), V: in[2].operand(), DOut: in[3].operand()}
	case *fused.GELUOp:
		k = backend.Map{Op: backend.GELU, N: in[0].size, Src: in[0].operand()}
	case *fused.GELUGradOp:
		k = backend.Zip{Op: backend.GELUGrad, N: in[0].size, A: in[0].operand(), B: in[1].operand()}
	case *fused.BiasActOp:
		x := in[0]
		k = backend.BiasAct{Rows: x.shape[0], N: x.shape[1], Act: activations[o.Act], X: x.operand(), Bias: in[1].operand()}
	case *fused.BiasActGradOp:
		x := in[0]
		k = backend.BiasActGrad{Rows: x.shape[0], N: x.shape[1], Act: activations[o.Act], X: x.operand(), Bias: in[1].operand(), DY: in[2].operand()}
	default:
		return false, nil
	}
	out, err := c.newVal(n)
	if err != nil {
		return true, err
	}
	// The result goes to the kernel's output operand.
	switch kk := k.(type) {
	case backend.SoftmaxCrossEntropy:
		kk.Loss = out.operand()
		k = kk
	case backend.SoftmaxCrossEntropyGrad:
		kk.DZ = out.operand()
		k = kk
	case backend.LayerNorm:
		kk.Y = out.operand()
		k = kk
	case backend.LayerNormGrad:
		kk.DX = out.operand()
		k = kk
	case backend.LayerNormParamGrad:
		kk.DParams = out.operand()
		k = kk
	case backend.Attention:
		kk.Out = out.operand()
		k = kk
	case backend.AttentionGrad:
		kk.DQKV = out.operand()
		k = kk
	case backend.Map:
		kk.Dst = out.operand()
		k = kk
	case backend.Zip:
		kk.Dst = out.operand()
		k = kk
	case backend.BiasAct:
		kk.Y = out.operand()
		k = kk
	case backend.BiasActGrad:
		kk.DX = out.operand()
		k = kk
	}
	if ch, ok := k.(backend.Checker); ok {
		if err := ch.Check(); err != nil {
			return true, fmt.Errorf("%v: %w", op, err)
		}
	}
	c.emit(k)
	return true, nil
}
