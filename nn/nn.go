// Package nn holds Gorgonia building blocks for orthogonal networks: dense
// layers (plain, and column-orthonormal with a Haar initialisation and the
// Stiefel marking that optim.Solver reads), GELU, softmax cross-entropy and
// accuracy.
package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// Linear is the dense layer y = x W + b, x of shape (batch, in), W (in, out),
// b (1, out) broadcast over the batch.
type Linear struct {
	W, B *G.Node // B is nil without bias
	// Ortho is true when W is column-orthonormal (in >= out) and optimized on
	// the Stiefel manifold.
	Ortho bool
}

// NewLinear returns a plain layer initialised as PyTorch's nn.Linear does:
// W and b uniform in [-1/sqrt(in), 1/sqrt(in)].
func NewLinear(g *G.ExprGraph, name string, in, out int, dt tensor.Dtype, bias bool, rng *rand.Rand) (*Linear, error) {
	if in < 1 || out < 1 {
		return nil, fmt.Errorf("nn: %s: layer %d -> %d: sizes must be positive", name, in, out)
	}
	bound := 1 / math.Sqrt(float64(in))
	w, err := Param(g, name+".W", dt, []int{in, out}, func(i int) float64 { return bound * (2*rng.Float64() - 1) })
	if err != nil {
		return nil, err
	}
	l := &Linear{W: w}
	if bias {
		if l.B, err = Param(g, name+".b", dt, []int{1, out}, func(int) float64 { return bound * (2*rng.Float64() - 1) }); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// NewOrthoLinear returns a layer whose in x out weight (in >= out) starts at
// a Haar-random point of St(in, out); the bias starts at zero.
func NewOrthoLinear(g *G.ExprGraph, name string, in, out int, dt tensor.Dtype, bias bool, rng *rand.Rand) (*Linear, error) {
	if in < out {
		return nil, fmt.Errorf("nn: %s: an orthogonal layer needs in >= out (column-orthonormal W), got %d -> %d", name, in, out)
	}
	st, err := manifold.NewStiefel[float64](in, out)
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", name, err)
	}
	x := make([]float64, in*out)
	if err := st.Random(x, rng); err != nil {
		return nil, fmt.Errorf("nn: %s: %w", name, err)
	}
	w, err := Param(g, name+".W", dt, []int{in, out}, func(i int) float64 { return x[i] })
	if err != nil {
		return nil, err
	}
	l := &Linear{W: w, Ortho: true}
	if bias {
		if l.B, err = Param(g, name+".b", dt, []int{1, out}, func(int) float64 { return 0 }); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Forward returns x W + b.
func (l *Linear) Forward(x *G.Node) (*G.Node, error) { return l.ForwardAct(x, fused.Identity) }

// ForwardAct returns act(x W + b), the bias and the activation in one fused
// op (fused.BiasAct); without a bias, act(x W).
func (l *Linear) ForwardAct(x *G.Node, act fused.Activation) (*G.Node, error) {
	y, err := G.Mul(x, l.W)
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", l.W.Name(), err)
	}
	if l.B != nil {
		return fused.BiasAct(y, l.B, act)
	}
	switch act {
	case fused.ReLU:
		return G.Rectify(y)
	case fused.GELUTanh:
		return fused.GELU(y)
	}
	return y, nil
}

// Params returns the layer's parameters for optim.Solver, W marked as a
// Stiefel point when the layer is orthogonal.
func (l *Linear) Params() []G.ValueGrad {
	var ps []G.ValueGrad
	if l.Ortho {
		ps = append(ps, optim.Stiefel(l.W))
	} else {
		ps = append(ps, l.W)
	}
	if l.B != nil {
		ps = append(ps, l.B)
	}
	return ps
}

// Nodes returns the layer's parameter nodes, for gorgonia.Grad and
// gorgonia.BindDualValues.
func (l *Linear) Nodes() G.Nodes { return optim.Nodes(l.Params()) }

// Param returns a learnable node of the given shape and element type whose
// entry i is init(i).
func Param(g *G.ExprGraph, name string, dt tensor.Dtype, shape []int, init func(int) float64) (*G.Node, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	var t *tensor.Dense
	switch dt {
	case tensor.Float32:
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(init(i))
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	case tensor.Float64:
		v := make([]float64, n)
		for i := range v {
			v[i] = init(i)
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	default:
		return nil, fmt.Errorf("nn: %s: element type %v, want float32 or float64", name, dt)
	}
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t)), nil
}

// GELU is x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the tanh form of the
// Gaussian error linear unit (PyTorch's approximate="tanh"), as one fused op.
func GELU(x *G.Node) (*G.Node, error) { return fused.GELU(x) }

// CrossEntropy returns the mean over the batch of -log softmax(logits)[y],
// with the labels given as a one-hot (batch, classes) node, as one fused op
// (fused.SoftmaxCrossEntropy), stable for large logits.
func CrossEntropy(logits, onehot *G.Node) (*G.Node, error) {
	if !logits.Shape().Eq(onehot.Shape()) || logits.Dims() != 2 {
		return nil, fmt.Errorf("nn: cross-entropy: logits %v but one-hot labels %v", logits.Shape(), onehot.Shape())
	}
	return fused.SoftmaxCrossEntropy(logits, onehot)
}

// OneHot writes the (len(labels), classes) one-hot encoding of labels into
// dst, which must hold len(labels)*classes values.
func OneHot[T float32 | float64](dst []T, labels []int, classes int) error {
	if len(dst) != len(labels)*classes {
		return fmt.Errorf("nn: one-hot: %d slots for %d labels of %d classes", len(dst), len(labels), classes)
	}
	clear(dst)
	for i, y := range labels {
		if y < 0 || y >= classes {
			return fmt.Errorf("nn: one-hot: label %d of example %d is not in [0, %d)", y, i, classes)
		}
		dst[i*classes+y] = 1
	}
	return nil
}

// Accuracy returns the fraction of rows of the (batch, classes) row-major
// logits whose largest entry is at the label.
func Accuracy[T float32 | float64](logits []T, labels []int, classes int) (float64, error) {
	if len(labels) == 0 || len(logits) != len(labels)*classes {
		return 0, fmt.Errorf("nn: accuracy: %d logits for %d labels of %d classes", len(logits), len(labels), classes)
	}
	correct := 0
	for i, y := range labels {
		row := logits[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if best == y {
			correct++
		}
	}
	return float64(correct) / float64(len(labels)), nil
}
