package nn

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/param"
)

// LayerNorm normalizes each row of a (rows, d) input to zero mean and unit
// variance (biased, as PyTorch's nn.LayerNorm), then scales by Gamma and
// shifts by Beta, both (1, d). Inputs with more axes are reshaped to
// (rows, d) by the caller.
type LayerNorm struct {
	Gamma, Beta param.Param
	Eps         float64
}

// NewLayerNorm returns a LayerNorm over d features with Gamma = 1, Beta = 0
// and eps = 1e-5.
func NewLayerNorm(g *G.ExprGraph, name string, d int, dt tensor.Dtype) (*LayerNorm, error) {
	gamma, err := NewTensor(g, name+".gamma", dt, []int{1, d}, func(int) float64 { return 1 })
	if err != nil {
		return nil, err
	}
	beta, err := NewTensor(g, name+".beta", dt, []int{1, d}, func(int) float64 { return 0 })
	if err != nil {
		return nil, err
	}
	return &LayerNorm{Gamma: param.Plain(gamma), Beta: param.Plain(beta), Eps: 1e-5}, nil
}

// Forward normalizes the rows of x, as one fused op (fused.LayerNorm).
func (l *LayerNorm) Forward(x *G.Node) (*G.Node, error) {
	d := l.Gamma.Node.Shape()[1]
	if x.Dims() != 2 || x.Shape()[1] != d {
		return nil, fmt.Errorf("nn: layer norm over %d features got input %v", d, x.Shape())
	}
	return fused.LayerNorm(x, l.Gamma.Node, l.Beta.Node, l.Eps)
}

// Params returns Gamma and Beta.
func (l *LayerNorm) Params() []param.Param { return []param.Param{l.Gamma, l.Beta} }
