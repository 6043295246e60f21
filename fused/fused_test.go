package fused

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/gradcheck"
	"github.com/orthonet/orthonet/internal/testval"
)

// constant returns a scalar constant of n's element type.
func constant(n *G.Node, v float64) *G.Node {
	if n.Dtype() == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// composite building blocks: the same functions from Gorgonia's own ops.

func compositeCE(a []*G.Node) (*G.Node, error) {
	z, t := a[0], a[1]
	// Shift by the row maximum first: tensor v0.9.23's softmax shifts by a
	// wrong maximum.
	shifted := G.Must(G.BroadcastSub(z, G.Must(G.Max(z, 1)), nil, []byte{1}))
	ls := G.Must(G.LogSoftMax(shifted))
	return G.Neg(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(ls, t)), 1)))))
}

func compositeLN(eps float64) func(a []*G.Node) (*G.Node, error) {
	return func(a []*G.Node) (*G.Node, error) {
		x, gamma, beta := a[0], a[1], a[2]
		mean := G.Must(G.Mean(x, 1))
		c := G.Must(G.BroadcastSub(x, mean, nil, []byte{1}))
		v := G.Must(G.Mean(G.Must(G.Square(c)), 1))
		std := G.Must(G.Sqrt(G.Must(G.Add(v, constant(x, eps)))))
		norm := G.Must(G.BroadcastHadamardDiv(c, std, nil, []byte{1}))
		return G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(norm, gamma, nil, []byte{0})), beta, nil, []byte{0})
	}
}

func compositeAttention(heads, tokens int) func(a []*G.Node) (*G.Node, error) {
	return func(a []*G.Node) (*G.Node, error) {
		s := a[0].Shape()
		b, t, h, d := s[0]/tokens, tokens, heads, s[1]
		dh := d / h
		split := func(x *G.Node) *G.Node {
			p := G.Must(G.Reshape(x, tensor.Shape{b, t, h, dh}))
			return G.Must(G.Reshape(G.Must(G.Transpose(p, 0, 2, 1, 3)), tensor.Shape{b * h, t, dh}))
		}
		// Copies first: the tape machine writes through Reshape views.
		q := split(G.Must(G.Mul(a[0], constant(a[0], 1))))
		k := split(G.Must(G.Mul(a[1], constant(a[1], 1))))
		v := split(G.Must(G.Mul(a[2], constant(a[2], 1))))
		scores := G.Must(G.Mul(G.Must(G.BatchedMatMul(q, k, false, true)), constant(a[0], 1/math.Sqrt(float64(dh)))))
		shifted := G.Must(G.BroadcastSub(scores, G.Must(G.Max(scores, 2)), nil, []byte{2}))
		ctx := G.Must(G.BatchedMatMul(G.Must(G.SoftMax(shifted, 2)), v))
		ctx = G.Must(G.Reshape(ctx, tensor.Shape{b, h, t, dh}))
		return G.Reshape(G.Must(G.Transpose(ctx, 0, 2, 1, 3)), tensor.Shape{b * t, d})
	}
}

func compositeGELU(x *G.Node) *G.Node {
	inner := G.Must(G.Add(x, G.Must(G.Mul(constant(x, 0.044715), G.Must(G.Cube(x))))))
	th := G.Must(G.Tanh(G.Must(G.Mul(constant(x, math.Sqrt(2/math.Pi)), inner))))
	return G.Must(G.HadamardProd(G.Must(G.Mul(constant(x, 0.5), x)), G.Must(G.Add(constant(x, 1), th))))
}

func compositeBiasAct(act Activation) func(a []*G.Node) (*G.Node, error) {
	return func(a []*G.Node) (*G.Node, error) {
		y := G.Must(G.BroadcastAdd(a[0], a[1], nil, []byte{0}))
		switch act {
		case ReLU:
			return G.Rectify(y)
		case GELUTanh:
			return compositeGELU(y), nil
		}
		return y, nil
	}
}

type opCase struct {
	name      string
	shapes    [][]int
	onehot    []bool // arguments drawn as one-hot rows
	diff      []bool // arguments differentiated
	fused     func(a []*G.Node) (*G.Node, error)
	composite func(a []*G.Node) (*G.Node, error)
	scale     float64 // arguments drawn N(0, scale^2); 0 means 1
}

func cases() []opCase {
	attn := func(heads, tokens int) func(a []*G.Node) (*G.Node, error) {
		return func(a []*G.Node) (*G.Node, error) { return Attention(a[0], a[1], a[2], heads, tokens) }
	}
	biasAct := func(act Activation) func(a []*G.Node) (*G.Node, error) {
		return func(a []*G.Node) (*G.Node, error) { return BiasAct(a[0], a[1], act) }
	}
	return []opCase{
		{name: "cross-entropy", shapes: [][]int{{5, 7}, {5, 7}}, onehot: []bool{false, true}, diff: []bool{true, false},
			fused: func(a []*G.Node) (*G.Node, error) { return SoftmaxCrossEntropy(a[0], a[1]) }, composite: compositeCE},
		{name: "cross-entropy-one-row", shapes: [][]int{{1, 3}, {1, 3}}, onehot: []bool{false, true}, diff: []bool{true, false},
			fused: func(a []*G.Node) (*G.Node, error) { return SoftmaxCrossEntropy(a[0], a[1]) }, composite: compositeCE},
		{name: "layer-norm", shapes: [][]int{{6, 5}, {1, 5}, {1, 5}}, diff: []bool{true, true, true},
			fused: func(a []*G.Node) (*G.Node, error) { return LayerNorm(a[0], a[1], a[2], 1e-5) }, composite: compositeLN(1e-5)},
		{name: "layer-norm-wide", shapes: [][]int{{3, 33}, {1, 33}, {1, 33}}, diff: []bool{true, true, true},
			fused: func(a []*G.Node) (*G.Node, error) { return LayerNorm(a[0], a[1], a[2], 0.1) }, composite: compositeLN(0.1)},
		{name: "attention", shapes: [][]int{{6, 4}, {6, 4}, {6, 4}}, diff: []bool{true, true, true},
			fused: attn(2, 3), composite: compositeAttention(2, 3)},
		{name: "attention-one-head", shapes: [][]int{{10, 3}, {10, 3}, {10, 3}}, diff: []bool{true, true, true},
			fused: attn(1, 5), composite: compositeAttention(1, 5)},
		{name: "attention-odd", shapes: [][]int{{7, 6}, {7, 6}, {7, 6}}, diff: []bool{true, true, true},
			fused: attn(3, 7), composite: compositeAttention(3, 7)},
		{name: "gelu", shapes: [][]int{{4, 5}}, diff: []bool{true}, scale: 2,
			fused: func(a []*G.Node) (*G.Node, error) { return GELU(a[0]) }, composite: func(a []*G.Node) (*G.Node, error) { return compositeGELU(a[0]), nil }},
		{name: "gelu-3d", shapes: [][]int{{2, 3, 4}}, diff: []bool{true},
			fused: func(a []*G.Node) (*G.Node, error) { return GELU(a[0]) }, composite: func(a []*G.Node) (*G.Node, error) { return compositeGELU(a[0]), nil }},
		{name: "bias-identity", shapes: [][]int{{4, 5}, {1, 5}}, diff: []bool{true, true}, fused: biasAct(Identity), composite: compositeBiasAct(Identity)},
		{name: "bias-relu", shapes: [][]int{{4, 5}, {1, 5}}, diff: []bool{true, true}, fused: biasAct(ReLU), composite: compositeBiasAct(ReLU)},
		{name: "bias-gelu", shapes: [][]int{{3, 7}, {1, 7}}, diff: []bool{true, true}, fused: biasAct(GELUTanh), composite: compositeBiasAct(GELUTanh)},
	}
}

// build makes a graph of c's function (fused or composite) on leaves of dt
// and returns the leaves, the result and loss = sum(result * R).
func build(c opCase, dt tensor.Dtype, fused bool) (*G.ExprGraph, []*G.Node, *G.Node, *G.Node, error) {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(uint64(len(c.name)), 11))
	var leaves []*G.Node
	for i, s := range c.shapes {
		n := 1
		for _, d := range s {
			n *= d
		}
		v := make([]float64, n)
		scale := c.scale
		if scale == 0 {
			scale = 1
		}
		for j := range v {
			v[j] = scale * rng.NormFloat64()
		}
		if i < len(c.onehot) && c.onehot[i] {
			clear(v)
			for r := 0; r < s[0]; r++ {
				v[r*s[1]+(r*3)%s[1]] = 1
			}
		}
		leaves = append(leaves, G.NewTensor(g, dt, len(s), G.WithShape(s...), G.WithName(fmt.Sprintf("a%d", i)), G.WithValue(testval.Tensor(dt, s, v))))
	}
	f := c.composite
	if fused {
		f = c.fused
	}
	out, err := f(leaves)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var loss *G.Node
	if out.Shape().IsScalar() {
		loss = G.Must(G.Mul(out, constant(out, 1.7)))
	} else {
		n := out.Shape().TotalSize()
		r := make([]float64, n)
		wr := rand.New(rand.NewPCG(5, 5))
		for i := range r {
			r[i] = wr.NormFloat64()
		}
		w := G.NewTensor(g, dt, out.Dims(), G.WithShape(out.Shape()...), G.WithName("R"), G.WithValue(testval.Tensor(dt, out.Shape(), r)))
		loss = G.Must(G.Sum(G.Must(G.HadamardProd(out, w))))
	}
	return g, leaves, out, loss, nil
}

// run returns the result and the gradients of the differentiated leaves.
func run(t *testing.T, c opCase, dt tensor.Dtype, fused bool) ([]float64, [][]float64) {
	t.Helper()
	g, leaves, out, loss, err := build(c, dt, fused)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	var wrt []*G.Node
	for i, l := range leaves {
		if c.diff[i] {
			wrt = append(wrt, l)
		}
	}
	var outV G.Value
	G.Read(out, &outV)
	if _, err := G.Grad(loss, wrt...); err != nil {
		t.Fatalf("%s: Grad: %v", c.name, err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%s (fused %v): %v", c.name, fused, err)
	}
	var grads [][]float64
	for _, n := range wrt {
		gr, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, testval.Floats(gr))
	}
	return testval.Floats(outV), grads
}

// TestAgainstComposite checks every fused op and its gradients against the
// same function built from Gorgonia's ops, on the tape machine: float64 to
// 1e-12 (values) and 1e-10 (gradients), float32 to 1e-5.
func TestAgainstComposite(t *testing.T) {
	for _, c := range cases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			vt, gt := 1e-12, 1e-10
			if dt == tensor.Float32 {
				vt, gt = 1e-5, 1e-5
			}
			fv, fg := run(t, c, dt, true)
			cv, cg := run(t, c, dt, false)
			if d := testval.MaxRel(fv, cv); !(d <= vt) {
				t.Errorf("%s %v: value differs from the composite's by %.3g", c.name, dt, d)
			}
			for i := range fg {
				if d := testval.MaxRel(fg[i], cg[i]); !(d <= gt) {
					t.Errorf("%s %v: gradient %d differs from the composite's by %.3g", c.name, dt, i, d)
				}
			}
		}
	}
}

// TestFiniteDifferences checks every fused op's gradients against central
// finite differences of its own forward pass (float64).
func TestFiniteDifferences(t *testing.T) {
	for _, c := range cases() {
		g, leaves, _, loss, err := build(c, tensor.Float64, true)
		if err != nil {
			t.Fatal(err)
		}
		var wrt []*G.Node
		for i, l := range leaves {
			if c.diff[i] {
				wrt = append(wrt, l)
			}
		}
		if err := gradcheck.Check(g, loss, 1e-6, 1e-6, wrt...); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestLargeLogits checks that cross-entropy and attention stay finite with
// inputs of 1e4, where an unshifted exponential overflows.
func TestLargeLogits(t *testing.T) {
	for _, c := range cases()[:5] {
		if !strings.HasPrefix(c.name, "cross-entropy") && !strings.HasPrefix(c.name, "attention") {
			continue
		}
		c.scale = 1e4
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			v, gs := run(t, c, dt, true)
			for _, x := range append(v, gs[0]...) {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%s %v with inputs of 1e4: non-finite %v", c.name, dt, x)
				}
			}
		}
	}
}

// TestErrors checks that bad shapes and types are refused with errors that
// name them.
func TestErrors(t *testing.T) {
	g := G.NewGraph()
	m := func(name string, dt tensor.Dtype, s ...int) *G.Node {
		return G.NewTensor(g, dt, len(s), G.WithShape(s...), G.WithName(name), G.WithInit(G.Zeroes()))
	}
	x := m("x", tensor.Float64, 6, 4)
	for _, tc := range []struct {
		name string
		f    func() (*G.Node, error)
		want string
	}{
		{"ce-shape", func() (*G.Node, error) { return SoftmaxCrossEntropy(x, m("t", tensor.Float64, 6, 5)) }, "logits (6, 4) against targets (6, 5)"},
		{"ce-type", func() (*G.Node, error) { return SoftmaxCrossEntropy(x, m("t32", tensor.Float32, 6, 4)) }, `"t32" holds float32`},
		{"ce-vector", func() (*G.Node, error) { return SoftmaxCrossEntropy(m("v", tensor.Float64, 4), x) }, "want a matrix"},
		{"ln-gamma", func() (*G.Node, error) {
			return LayerNorm(x, m("g", tensor.Float64, 1, 5), m("b", tensor.Float64, 1, 4), 1e-5)
		}, "gamma (1, 5)"},
		{"ln-eps", func() (*G.Node, error) {
			return LayerNorm(x, m("g2", tensor.Float64, 1, 4), m("b2", tensor.Float64, 1, 4), 0)
		}, "eps 0"},
		{"attn-heads", func() (*G.Node, error) { return Attention(x, x, x, 3, 2) }, "3 heads over 4 features"},
		{"attn-tokens", func() (*G.Node, error) { return Attention(x, x, x, 2, 4) }, "6 rows in sequences of 4 tokens"},
		{"attn-shape", func() (*G.Node, error) { return Attention(x, m("k", tensor.Float64, 6, 2), x, 1, 2) }, "keys (6, 2)"},
		{"bias-shape", func() (*G.Node, error) { return BiasAct(x, m("bb", tensor.Float64, 1, 3), ReLU) }, "bias (1, 3)"},
		{"bias-act", func() (*G.Node, error) { return BiasAct(x, m("bc", tensor.Float64, 1, 4), 9) }, "unknown activation"},
		{"gelu-int", func() (*G.Node, error) { return GELU(m("i", tensor.Int, 3)) }, "want float32 or float64"},
	} {
		if _, err := tc.f(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
