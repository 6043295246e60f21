package fused

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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
	for _, a := range []struct {
		what string
		n    *G.Node
	}{{"input", x}, {"gamma", gamma}, {"beta", beta}} {
		if err := checkMatrix(a.what, a.n); err != nil {
			return nil, err
		}
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

func (*LayerNormOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// normalize returns xhat and 1/sqrt(var + eps) of each row.
func normalize(x []float64, r, d int, eps float64) (xhat, rstd []float64) {
	xhat, rstd = make([]float64, r*d), make([]float64, r)
	for i := 0; i < r; i++ {
		row := x[i*d : (i+1)*d]
		var mean float64
		for _, v := range row {
			mean += v
		}
		mean /= float64(d)
		var vr float64
		for _, v := range row {
			vr += (v - mean) * (v - mean)
		}
		vr /= float64(d)
		rstd[i] = 1 / math.Sqrt(vr+eps)
		for j, v := range row {
			xhat[i*d+j] = (v - mean) * rstd[i]
		}
	}
	return xhat, rstd
}

// Do normalizes.
func (o *LayerNormOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 3, vals)
	if err != nil {
		return nil, err
	}
	s := vals[0].Shape()
	r, d := s[0], s[1]
	xhat, _ := normalize(a[0], r, d, o.Eps)
	for i := 0; i < r; i++ {
		for j := 0; j < d; j++ {
			xhat[i*d+j] = xhat[i*d+j]*a[1][j] + a[2][j]
		}
	}
	return tensorOf(xhat, is32, r, d), nil
}

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

func (*LayerNormGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// Do computes the gradient of x.
func (o *LayerNormGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 3, vals)
	if err != nil {
		return nil, err
	}
	s := vals[0].Shape()
	r, d := s[0], s[1]
	xhat, rstd := normalize(a[0], r, d, o.Eps)
	gamma, dy := a[1], a[2]
	out := make([]float64, r*d)
	for i := 0; i < r; i++ {
		var mg, mgx float64
		for j := 0; j < d; j++ {
			g := dy[i*d+j] * gamma[j]
			mg += g
			mgx += g * xhat[i*d+j]
		}
		mg /= float64(d)
		mgx /= float64(d)
		for j := 0; j < d; j++ {
			g := dy[i*d+j] * gamma[j]
			out[i*d+j] = rstd[i] * (g - mg - xhat[i*d+j]*mgx)
		}
	}
	return tensorOf(out, is32, r, d), nil
}

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
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{2, s[0][1]}, nil
}

// Do computes the gradients of gamma and beta.
func (o *LayerNormParamGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 2, vals)
	if err != nil {
		return nil, err
	}
	s := vals[0].Shape()
	r, d := s[0], s[1]
	xhat, _ := normalize(a[0], r, d, o.Eps)
	dy := a[1]
	out := make([]float64, 2*d)
	for i := 0; i < r; i++ {
		for j := 0; j < d; j++ {
			out[j] += dy[i*d+j] * xhat[i*d+j]
			out[d+j] += dy[i*d+j]
		}
	}
	return tensorOf(out, is32, 2, d), nil
}
