package fused

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// Activation is an elementwise nonlinearity of BiasAct.
type Activation = backend.Activation

const (
	// Identity is x.
	Identity = backend.ActIdentity
	// ReLU is max(x, 0).
	ReLU = backend.ActReLU
	// GELUTanh is the tanh form of GELU (see GELUOp).
	GELUTanh = backend.ActGELU
)

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

// Kernel returns backend.Map of backend.GELU.
func (*GELUOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.Map{Op: backend.GELU, N: tensor.Shape(s[0]).TotalSize(), Src: in[0], Dst: out}
}

// Do applies GELU on the host.
func (o *GELUOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }

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

// Kernel returns backend.Zip of backend.GELUGrad.
func (*GELUGradOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.Zip{Op: backend.GELUGrad, N: tensor.Shape(s[0]).TotalSize(), A: in[0], B: in[1], Dst: out}
}

// Do computes the gradient on the host.
func (o *GELUGradOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }

// BiasActOp adds a bias to every row of x and applies an activation:
// arguments x (rows, n) and b (1, n); the result (rows, n) is
// Act(x + b).
type BiasActOp struct {
	base
	Act Activation
}

// BiasAct returns act(x + b) with the row b added to every row of x.
func BiasAct(x, b *G.Node, act Activation) (*G.Node, error) {
	if err := checkMatrices(arg{"input", x}, arg{"bias", b}); err != nil {
		return nil, err
	}
	if !b.Shape().Eq(tensor.Shape{1, x.Shape()[1]}) {
		return nil, fmt.Errorf("fused: bias %v for an input %v, want (1, %d)", b.Shape(), x.Shape(), x.Shape()[1])
	}
	if act > GELUTanh {
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

// Kernel returns backend.BiasAct.
func (o *BiasActOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.BiasAct{Rows: s[0][0], N: s[0][1], Act: o.Act, X: in[0], Bias: in[1], Y: out}
}

// Do computes act(x + b) on the host.
func (o *BiasActOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }

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

// Kernel returns backend.BiasActGrad.
func (o *BiasActGradOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.BiasActGrad{Rows: s[0][0], N: s[0][1], Act: o.Act, X: in[0], Bias: in[1], DY: in[2], DX: out}
}

// Do computes the gradient on the host.
func (o *BiasActGradOp) Do(vals ...G.Value) (G.Value, error) { return Do(o, vals...) }
