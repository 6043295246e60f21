package gorgoniaop

import (
	"testing"

	G "gorgonia.org/gorgonia"
)

// TestFuncsAreGorgonias checks every UnaryFunc and BinaryFunc against the
// op that Gorgonia's builder of that function makes: UnaryOf and BinaryOf
// read the constant off it.
func TestFuncsAreGorgonias(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, G.Float64, G.WithShape(2, 3), G.WithName("x"))
	y := G.NewMatrix(g, G.Float64, G.WithShape(2, 3), G.WithName("y"))
	unary := map[UnaryFunc]func(*G.Node) (*G.Node, error){
		Abs: G.Abs, Sign: G.Sign, Ceil: G.Ceil, Floor: G.Floor, Sin: G.Sin, Cos: G.Cos, Exp: G.Exp, Ln: G.Log,
		Log2: G.Log2, Neg: G.Neg, Square: G.Square, Sqrt: G.Sqrt, Inv: G.Inverse, InvSqrt: G.InverseSqrt,
		Cube: G.Cube, Tanh: G.Tanh, Sigmoid: G.Sigmoid, Log1p: G.Log1p, Expm1: G.Expm1, Softplus: G.Softplus,
	}
	for want, f := range unary {
		n, err := f(x)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if got := UnaryOf(n.Op()); got != want || OpName(n.Op()) != ElemUnaryOp {
			t.Errorf("Gorgonia's %s is %s (%q), want %s", want, OpName(n.Op()), got, ElemUnaryOp)
		}
	}
	cmp := func(f func(a, b *G.Node, retSame bool) (*G.Node, error)) func(a, b *G.Node) (*G.Node, error) {
		return func(a, b *G.Node) (*G.Node, error) { return f(a, b, true) }
	}
	binary := map[BinaryFunc]func(a, b *G.Node) (*G.Node, error){
		Add: G.Add, Sub: G.Sub, Mul: G.HadamardProd, Div: G.HadamardDiv, Pow: G.Pow,
		Lt: cmp(G.Lt), Gt: cmp(G.Gt), Lte: cmp(G.Lte), Gte: cmp(G.Gte), Eq: cmp(G.Eq), Ne: cmp(G.Ne),
	}
	for want, f := range binary {
		n, err := f(x, y)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if got := BinaryOf(n.Op()); got != want || OpName(n.Op()) != ElemBinOp {
			t.Errorf("Gorgonia's %s is %s (%q), want %s", want, OpName(n.Op()), got, ElemBinOp)
		}
	}
}
