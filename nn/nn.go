// Package nn holds Gorgonia building blocks for orthogonal networks: dense
// layers (plain, and orthogonal with a Haar initialisation and their weight
// marked as a point of the Stiefel manifold, see package param), layer
// norm, attention, dropout, GELU, softmax cross-entropy and accuracy.
package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/param"
)

// Linear is the dense layer y = x W + b, x of shape (batch, in), W (in, out),
// b (1, out) broadcast over the batch. An orthogonal layer's W is marked
// as a point of the Stiefel manifold (param.OnStiefel).
type Linear struct {
	W param.Param
	B param.Param // B.Node is nil without bias
}

// NewLinear returns a plain layer initialised as PyTorch's nn.Linear does:
// W and b uniform in [-1/sqrt(in), 1/sqrt(in)].
func NewLinear(g *G.ExprGraph, name string, in, out int, dt tensor.Dtype, bias bool, rng *rand.Rand) (*Linear, error) {
	if in < 1 || out < 1 {
		return nil, fmt.Errorf("nn: %s: layer %d -> %d: sizes must be positive", name, in, out)
	}
	bound := 1 / math.Sqrt(float64(in))
	w, err := NewTensor(g, name+".W", dt, []int{in, out}, func(i int) float64 { return bound * (2*rng.Float64() - 1) })
	if err != nil {
		return nil, err
	}
	l := &Linear{W: param.Plain(w)}
	if bias {
		b, err := NewTensor(g, name+".b", dt, []int{1, out}, func(int) float64 { return bound * (2*rng.Float64() - 1) })
		if err != nil {
			return nil, err
		}
		l.B = param.Plain(b)
	}
	return l, nil
}

// NewOrthoLinear returns a layer whose in x out weight starts at a
// Haar-random point of the Stiefel manifold: orthonormal columns when
// in >= out, orthonormal rows (the transpose of a point of St(out, in))
// when in < out. The bias starts at zero.
func NewOrthoLinear(g *G.ExprGraph, name string, in, out int, dt tensor.Dtype, bias bool, rng *rand.Rand) (*Linear, error) {
	if in < 1 || out < 1 {
		return nil, fmt.Errorf("nn: %s: layer %d -> %d: sizes must be positive", name, in, out)
	}
	n, p := max(in, out), min(in, out)
	st, err := manifold.NewStiefel[float64](n, p)
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", name, err)
	}
	x := make([]float64, n*p)
	if err := st.Random(x, rng); err != nil {
		return nil, fmt.Errorf("nn: %s: %w", name, err)
	}
	at := func(i int) float64 { return x[i] }
	if in < out { // entry (r, c) of the in x out weight is (c, r) of the sample
		at = func(i int) float64 { return x[(i%out)*p+i/out] }
	}
	w, err := NewTensor(g, name+".W", dt, []int{in, out}, at)
	if err != nil {
		return nil, err
	}
	l := &Linear{W: param.OnStiefel(w)}
	if bias {
		b, err := NewTensor(g, name+".b", dt, []int{1, out}, func(int) float64 { return 0 })
		if err != nil {
			return nil, err
		}
		l.B = param.Plain(b)
	}
	return l, nil
}

// Forward returns x W + b.
func (l *Linear) Forward(x *G.Node) (*G.Node, error) { return l.ForwardAct(x, fused.Identity) }

// ForwardAct returns act(x W + b), the bias and the activation in one fused
// op (fused.BiasAct); without a bias, act(x W).
func (l *Linear) ForwardAct(x *G.Node, act fused.Activation) (*G.Node, error) {
	y, err := G.Mul(x, l.W.Node)
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", l.W.Name(), err)
	}
	if l.B.Node != nil {
		return fused.BiasAct(y, l.B.Node, act)
	}
	switch act {
	case fused.ReLU:
		return G.Rectify(y)
	case fused.GELUTanh:
		return fused.GELU(y)
	}
	return y, nil
}

// Params returns the layer's parameters: W, then b if there is one.
func (l *Linear) Params() []param.Param {
	if l.B.Node == nil {
		return []param.Param{l.W}
	}
	return []param.Param{l.W, l.B}
}

// NewTensor returns a node of the given shape and element type whose entry
// i is init(i): a layer's weight, or a constant input.
func NewTensor(g *G.ExprGraph, name string, dt tensor.Dtype, shape []int, init func(int) float64) (*G.Node, error) {
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
	c, err := Correct(logits, labels, classes)
	if err != nil {
		return 0, err
	}
	return float64(c) / float64(len(labels)), nil
}

// Correct returns the number of rows of the (batch, classes) row-major
// logits whose largest entry (the first of equal ones) is at the label:
// Accuracy's numerator, which sums over batches without rounding.
func Correct[T float32 | float64](logits []T, labels []int, classes int) (int, error) {
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
	return correct, nil
}

// CrossEntropyLoss returns the mean softmax cross-entropy of the rows of the
// (batch, classes) row-major logits against integer labels, computed in
// float64 with the row maximum subtracted, so large logits do not overflow.
// It is the host-side value of CrossEntropy, for evaluation loops.
func CrossEntropyLoss[T float32 | float64](logits []T, labels []int, classes int) (float64, error) {
	if classes < 1 || len(labels) == 0 || len(logits) != len(labels)*classes {
		return 0, fmt.Errorf("nn: cross-entropy: %d logits for %d labels of %d classes", len(logits), len(labels), classes)
	}
	var sum float64
	for i, y := range labels {
		if y < 0 || y >= classes {
			return 0, fmt.Errorf("nn: cross-entropy: label %d of example %d is not in [0, %d)", y, i, classes)
		}
		row := logits[i*classes : (i+1)*classes]
		m := float64(row[0])
		for _, v := range row {
			m = max(m, float64(v))
		}
		var se float64
		for _, v := range row {
			se += math.Exp(float64(v) - m)
		}
		sum += m + math.Log(se) - float64(row[y])
	}
	return sum / float64(len(labels)), nil
}
