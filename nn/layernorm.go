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

// Forward normalizes the rows of x. Row means, the spreading of a column
// over the row and of Gamma and Beta over the rows are products with
// constant vectors, so that on a GPU every op is a cuBLAS product or a
// same-shape elementwise kernel: built from Gorgonia's reductions and
// broadcasting ops, a ViT's loss on the CUDA machine was wrong and its
// gradients NaN.
func (l *LayerNorm) Forward(x *G.Node) (*G.Node, error) {
	if x.Dims() != 2 || x.Shape()[1] != l.Gamma.Shape()[1] {
		return nil, fmt.Errorf("nn: layer norm over %d features got input %v", l.Gamma.Shape()[1], x.Shape())
	}
	b, d := x.Shape()[0], x.Shape()[1]
	g, dt := x.Graph(), x.Dtype()
	filled := func(name string, r, c int, v float64) *G.Node {
		return G.Must(Param(g, name, dt, []int{r, c}, func(int) float64 { return v }))
	}
	avg := filled(fmt.Sprintf("ln.avg%d", d), d, 1, 1/float64(d)) // x avg = row means
	spread := filled(fmt.Sprintf("ln.spread%d", d), 1, d, 1)      // (b,1) spread = (b,d)
	rows := filled(fmt.Sprintf("ln.rows%d", b), b, 1, 1)          // rows (1,d) = (b,d)
	eps := filled(fmt.Sprintf("ln.eps%d", b), b, 1, l.Eps)
	mean := G.Must(G.Mul(x, avg))
	centered := G.Must(G.Sub(x, G.Must(G.Mul(mean, spread))))
	variance := G.Must(G.Mul(G.Must(G.Square(centered)), avg))
	std := G.Must(G.Sqrt(G.Must(G.Add(variance, eps))))
	normed := G.Must(G.HadamardDiv(centered, G.Must(G.Mul(std, spread))))
	scaled := G.Must(G.HadamardProd(normed, G.Must(G.Mul(rows, l.Gamma))))
	return G.Add(scaled, G.Must(G.Mul(rows, l.Beta)))
}

// Params returns Gamma and Beta.
func (l *LayerNorm) Params() []G.ValueGrad { return []G.ValueGrad{l.Gamma, l.Beta} }

// Nodes returns Gamma and Beta.
func (l *LayerNorm) Nodes() G.Nodes { return optim.Nodes(l.Params()) }
