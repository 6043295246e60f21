package nn

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/optim"
)

// LayerNorm normalizes each row of a (rows, d) input to zero mean and unit
// variance (biased, as PyTorch's nn.LayerNorm), then scales by Gamma and
// shifts by Beta, both (1, d). Inputs with more axes are reshaped to
// (rows, d) by the caller.
type LayerNorm struct {
	Gamma, Beta *G.Node
	Eps         float64
}

// NewLayerNorm returns a LayerNorm over d features with Gamma = 1, Beta = 0
// and eps = 1e-5.
func NewLayerNorm(g *G.ExprGraph, name string, d int, dt tensor.Dtype) (*LayerNorm, error) {
	gamma, err := Param(g, name+".gamma", dt, []int{1, d}, func(int) float64 { return 1 })
	if err != nil {
		return nil, err
	}
	beta, err := Param(g, name+".beta", dt, []int{1, d}, func(int) float64 { return 0 })
	if err != nil {
		return nil, err
	}
	return &LayerNorm{Gamma: gamma, Beta: beta, Eps: 1e-5}, nil
}

// Forward normalizes the rows of x.
func (l *LayerNorm) Forward(x *G.Node) (*G.Node, error) {
	if x.Dims() != 2 || x.Shape()[1] != l.Gamma.Shape()[1] {
		return nil, fmt.Errorf("nn: layer norm over %d features got input %v", l.Gamma.Shape()[1], x.Shape())
	}
	eps := G.NewConstant(l.Eps)
	if x.Dtype() == tensor.Float32 {
		eps = G.NewConstant(float32(l.Eps))
	}
	mean, err := G.Mean(x, 1)
	if err != nil {
		return nil, fmt.Errorf("nn: layer norm: %w", err)
	}
	centered := G.Must(G.BroadcastSub(x, mean, nil, []byte{1}))
	variance := G.Must(G.Mean(G.Must(G.Square(centered)), 1))
	inv := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(variance, eps))))))
	normed := G.Must(G.BroadcastHadamardProd(centered, inv, nil, []byte{1}))
	scaled := G.Must(G.BroadcastHadamardProd(normed, l.Gamma, nil, []byte{0}))
	return G.BroadcastAdd(scaled, l.Beta, nil, []byte{0})
}

// Params returns Gamma and Beta.
func (l *LayerNorm) Params() []G.ValueGrad { return []G.ValueGrad{l.Gamma, l.Beta} }

// Nodes returns Gamma and Beta.
func (l *LayerNorm) Nodes() G.Nodes { return optim.Nodes(l.Params()) }
