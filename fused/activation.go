package fused

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Activation is an elementwise nonlinearity of BiasAct.
type Activation int

const (
	// Identity is x.
	Identity Activation = iota
	// ReLU is max(x, 0).
	ReLU
	// GELUTanh is the tanh form of GELU (see GELUOp).
	GELUTanh
)

// String returns the activation's name.
func (a Activation) String() string {
	switch a {
	case Identity:
		return "identity"
	case ReLU:
		return "relu"
	case GELUTanh:
		return "gelu"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// geluC is sqrt(2/pi).
var geluC = math.Sqrt(2 / math.Pi)

// Gelu returns x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func Gelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(geluC*(x+0.044715*x*x*x)))
}

// GeluDeriv returns the derivative of Gelu at x.
func GeluDeriv(x float64) float64 {
	u := geluC * (x + 0.044715*x*x*x)
	t := math.Tanh(u)
	return 0.5*(1+t) + 0.5*x*(1-t*t)*geluC*(1+3*0.044715*x*x)
}

func (a Activation) apply(x float64) float64 {
	switch a {
	case ReLU:
		return math.Max(x, 0)
	case GELUTanh:
		return Gelu(x)
	}
	return x
}

func (a Activation) deriv(x float64) float64 {
	switch a {
	case ReLU:
		if x > 0 {
			return 1
		}
		return 0
	case GELUTanh:
		return GeluDeriv(x)
	}
	return 1
}

// GELUOp is the Gaussian error linear unit in its tanh form (PyTorch's
// approximate="tanh"), x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// elementwise on a tensor of any shape.
type GELUOp struct{ base }

// GELU returns GELU(x), elementwise.
func GELU(x *G.Node) (*G.Node, error) {
	if x == nil {
		return nil, fmt.Errorf("fused: GELU of nil")
	}
	if dt := x.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("fused: GELU of %q holding %v, want float32 or float64", x.Name(), dt)
	}
	return G.ApplyOp(&GELUOp{}, x)
}

func (*GELUOp) Arity() int { return 1 }
func (*GELUOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (*GELUOp) String() string           { return "GELU" }
func (o *GELUOp) Hashcode() uint32       { return hashOf(o) }
func (o *GELUOp) WriteHash(h hashWriter) { writeHash(h, o) }
func (*GELUOp) DiffWRT(int) []bool       { return []bool{true} }
func (*GELUOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// Do applies GELU.
func (o *GELUOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 1, vals)
	if err != nil {
		return nil, err
	}
	for i, x := range a[0] {
		a[0][i] = Gelu(x)
	}
	return tensorOf(a[0], is32, vals[0].Shape()...), nil
}

// SymDiff returns GELUGradOp(x, grad).
func (*GELUOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	g, err := G.ApplyOp(&GELUGradOp{}, in[0], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{g}, nil
}

// GELUGradOp is the gradient of GELUOp: arguments x and dy of one shape;
// the result is dy * GELU'(x).
type GELUGradOp struct{ base }

func (*GELUGradOp) Arity() int { return 2 }
func (*GELUGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}
func (*GELUGradOp) String() string           { return "GELUGrad" }
func (o *GELUGradOp) Hashcode() uint32       { return hashOf(o) }
func (o *GELUGradOp) WriteHash(h hashWriter) { writeHash(h, o) }
func (*GELUGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// Do computes the gradient.
func (o *GELUGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 2, vals)
	if err != nil {
		return nil, err
	}
	for i, x := range a[0] {
		a[0][i] = a[1][i] * GeluDeriv(x)
	}
	return tensorOf(a[0], is32, vals[0].Shape()...), nil
}

// BiasActOp adds a bias to every row of x and applies an activation:
// arguments x (rows, n) and b (1, n); the result (rows, n) is
// Act(x + b).
type BiasActOp struct {
	base
	Act Activation
}

// BiasAct returns act(x + b) with the row b added to every row of x.
func BiasAct(x, b *G.Node, act Activation) (*G.Node, error) {
	if err := checkMatrix("input", x); err != nil {
		return nil, err
	}
	if err := checkMatrix("bias", b); err != nil {
		return nil, err
	}
	if !b.Shape().Eq(tensor.Shape{1, x.Shape()[1]}) {
		return nil, fmt.Errorf("fused: bias %v for an input %v, want (1, %d)", b.Shape(), x.Shape(), x.Shape()[1])
	}
	if act < Identity || act > GELUTanh {
		return nil, fmt.Errorf("fused: unknown activation %v", act)
	}
	if err := sameType(x, b); err != nil {
		return nil, err
	}
	return G.ApplyOp(&BiasActOp{Act: act}, x, b)
}

func (*BiasActOp) Arity() int               { return 2 }
func (*BiasActOp) Type() hm.Type            { return matrixType(2, false) }
func (o *BiasActOp) String() string         { return fmt.Sprintf("BiasAct{%v}", o.Act) }
func (o *BiasActOp) Hashcode() uint32       { return hashOf(o) }
func (o *BiasActOp) WriteHash(h hashWriter) { writeHash(h, o) }
func (*BiasActOp) DiffWRT(int) []bool       { return []bool{true, true} }
func (*BiasActOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// Do computes act(x + b).
func (o *BiasActOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 2, vals)
	if err != nil {
		return nil, err
	}
	s := vals[0].Shape()
	n := s[1]
	for i, x := range a[0] {
		a[0][i] = o.Act.apply(x + a[1][i%n])
	}
	return tensorOf(a[0], is32, s...), nil
}

// SymDiff returns the gradient of x (a BiasActGradOp) and of b (its column
// sums).
func (o *BiasActOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&BiasActGradOp{Act: o.Act}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	db, err := G.Sum(dx, 0)
	if err != nil {
		return nil, err
	}
	if db, err = G.Reshape(db, in[1].Shape().Clone()); err != nil {
		return nil, err
	}
	return G.Nodes{dx, db}, nil
}

// BiasActGradOp is the gradient of BiasActOp with respect to x (and, by
// column sums, b): arguments x (rows, n), b (1, n) and dy (rows, n); the
// result is dy * Act'(x + b).
type BiasActGradOp struct {
	base
	Act Activation
}

func (*BiasActGradOp) Arity() int               { return 3 }
func (*BiasActGradOp) Type() hm.Type            { return matrixType(3, false) }
func (o *BiasActGradOp) String() string         { return fmt.Sprintf("BiasActGrad{%v}", o.Act) }
func (o *BiasActGradOp) Hashcode() uint32       { return hashOf(o) }
func (o *BiasActGradOp) WriteHash(h hashWriter) { writeHash(h, o) }
func (*BiasActGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapes(in)
	if err != nil {
		return nil, err
	}
	return s[0].Clone(), nil
}

// Do computes the gradient.
func (o *BiasActGradOp) Do(vals ...G.Value) (G.Value, error) {
	a, is32, err := args(o, 3, vals)
	if err != nil {
		return nil, err
	}
	s := vals[0].Shape()
	n := s[1]
	for i, x := range a[0] {
		a[0][i] = a[2][i] * o.Act.deriv(x+a[1][i%n])
	}
	return tensorOf(a[0], is32, s...), nil
}
