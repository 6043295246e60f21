package fused

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// LayerNormOp normalizes each row of x to zero mean and unit variance (the
// biased variance, as PyTorch's nn.LayerNorm) and scales and shifts it:
// arguments x (rows, d), gamma and beta (1, d); the result (rows, d) is
// (x - mean) / sqrt(var + Eps) * gamma + beta.
type LayerNormOp struct {
	base
	Eps float64
}

// LayerNorm returns the layer normalization of the rows of x.
func LayerNorm(x, gamma, beta *G.Node, eps float64) (*G.Node, error) {
	if err := checkMatrices(arg{"input", x}, arg{"gamma", gamma}, arg{"beta", beta}); err != nil {
		return nil, err
	}
	d := x.Shape()[1]
	if !gamma.Shape().Eq(tensor.Shape{1, d}) || !beta.Shape().Eq(tensor.Shape{1, d}) {
		return nil, fmt.Errorf("fused: layer norm of %v with gamma %v and beta %v, want (1, %d)", x.Shape(), gamma.Shape(), beta.Shape(), d)
	}
	if !(eps > 0) {
		return nil, fmt.Errorf("fused: layer norm eps %v, want > 0", eps)
	}
	if err := sameType(x, gamma, beta); err != nil {
		return nil, err
	}
	return G.ApplyOp(&LayerNormOp{Eps: eps}, x, gamma, beta)
}

func (*LayerNormOp) Arity() int               { return 3 }
func (*LayerNormOp) Type() hm.Type            { return matrixType(3, false) }
func (o *LayerNormOp) String() string         { return fmt.Sprintf("LayerNorm{eps=%g}", o.Eps) }
func (o *LayerNormOp) Hashcode() uint32       { return hashOf(o) }
func (o *LayerNormOp) WriteHash(h hashWriter) { writeHash(h, o) }

// Kernel returns backend.LayerNorm.
func (o *LayerNormOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.LayerNorm{Rows: s[0][0], D: s[0][1], Eps: o.Eps, X: in[0], Gamma: in[1], Beta: in[2], Y: out}
}

// Do normalizes on the host.
func (o *LayerNormOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }

func (*LayerNormOp) DiffWRT(int) []bool { return []bool{true, true, true} }

// SymDiff returns the gradients of x (a LayerNormGradOp) and of gamma and
// beta (rows of a LayerNormParamGradOp).
func (o *LayerNormOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&LayerNormGradOp{Eps: o.Eps}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	dp, err := G.ApplyOp(&LayerNormParamGradOp{Eps: o.Eps}, in[0], grad)
	if err != nil {
		return nil, err
	}
	dgamma, err := rows(dp, 0, 1)
	if err != nil {
		return nil, err
	}
	dbeta, err := rows(dp, 1, 2)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dgamma, dbeta}, nil
}

// LayerNormGradOp is the gradient of LayerNormOp with respect to x:
// arguments x (rows, d), gamma (1, d) and the gradient dy (rows, d) of the
// result; with xhat the normalized rows, rstd = 1/sqrt(var + Eps) and
// g = dy * gamma, the result is rstd (g - mean(g) - xhat mean(g xhat)) per
// row.
type LayerNormGradOp struct {
	base
	Eps float64
}

func (*LayerNormGradOp) Arity() int               { return 3 }
func (*LayerNormGradOp) Type() hm.Type            { return matrixType(3, false) }
func (o *LayerNormGradOp) String() string         { return fmt.Sprintf("LayerNormGrad{eps=%g}", o.Eps) }
func (o *LayerNormGradOp) Hashcode() uint32       { return hashOf(o) }
func (o *LayerNormGradOp) WriteHash(h hashWriter) { writeHash(h, o) }

// Kernel returns backend.LayerNormGrad.
func (o *LayerNormGradOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.LayerNormGrad{Rows: s[0][0], D: s[0][1], Eps: o.Eps, X: in[0], Gamma: in[1], DY: in[2], DX: out}
}

// Do computes the gradient of x on the host.
func (o *LayerNormGradOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }

// LayerNormParamGradOp is the gradient of LayerNormOp with respect to gamma
// and beta: arguments x (rows, d) and dy (rows, d); the result (2, d) holds
// the column sums of dy * xhat (gamma's gradient) in row 0 and of dy
// (beta's) in row 1.
type LayerNormParamGradOp struct {
	base
	Eps float64
}

func (*LayerNormParamGradOp) Arity() int    { return 2 }
func (*LayerNormParamGradOp) Type() hm.Type { return matrixType(2, false) }
func (o *LayerNormParamGradOp) String() string {
	return fmt.Sprintf("LayerNormParamGrad{eps=%g}", o.Eps)
}
func (o *LayerNormParamGradOp) Hashcode() uint32       { return hashOf(o) }
func (o *LayerNormParamGradOp) WriteHash(h hashWriter) { writeHash(h, o) }

func (*LayerNormParamGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return resultShape(in, func(s tensor.Shape) tensor.Shape { return tensor.Shape{2, s[1]} })
}

// Kernel returns backend.LayerNormParamGrad.
func (o *LayerNormParamGradOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.LayerNormParamGrad{Rows: s[0][0], D: s[0][1], Eps: o.Eps, X: in[0], DY: in[1], DParams: out}
}

// Do computes the gradients of gamma and beta on the host.
func (o *LayerNormParamGradOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }
