package lower

import (
	"errors"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// TestLowerEmitsAgainstBuffers lowers tanh(x) + x of a constant x: the
// kernels' operands are the Lowering's Buffers, a node's Value its window
// of one, and a Reshape a view of its argument's Buffer.
func TestLowerEmitsAgainstBuffers(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, G.Float64, G.WithShape(2, 3), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))))
	th := G.Must(G.Tanh(x))
	sum := G.Must(G.Add(th, x))
	flat := G.Must(G.Reshape(sum, tensor.Shape{6}))
	l := New(Config{Graph: g})
	if err := l.Constant(x); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*G.Node{th, sum, flat} {
		if err := l.Lower(n, l.ArgValues(n)); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.Kernels) != 2 || len(l.Buffers) != 3 {
		t.Fatalf("%d kernels over %d buffers, want a Map and a Zip over x's, tanh's and the sum's", len(l.Kernels), len(l.Buffers))
	}
	m, ok := l.Kernels[0].(backend.Map)
	if !ok || m.Op != backend.Tanh || m.Src != l.Values[x].Operand() || m.Dst != l.Values[th].Operand() {
		t.Errorf("first kernel %#v, want Map tanh from x's buffer into tanh's", l.Kernels[0])
	}
	if z, ok := l.Kernels[1].(backend.Zip); !ok || z.Op != backend.Add || z.Dst.Buf != l.Values[sum].Buf {
		t.Errorf("second kernel %#v, want Zip add into the sum's buffer", l.Kernels[1])
	}
	if v := l.Values[flat]; v.Buf != l.Values[sum].Buf || v.Size != 6 || v.Off != 0 {
		t.Errorf("the reshape is %+v, want a view of the sum's buffer", v)
	}
	if init, ok := l.Values[x].Buf.Init.([]float64); !ok || len(init) != 6 || !l.Values[x].Buf.Resident {
		t.Errorf("x's buffer holds %v (resident %v), want its 6 values, resident", l.Values[x].Buf.Init, l.Values[x].Buf.Resident)
	}
}

// TestLowerRefusesUnknownOp: an op type without a lowering is
// ErrUnknownOp, naming the node.
func TestLowerRefusesUnknownOp(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("x"), G.WithInit(G.Zeroes()))
	var v G.Value
	y := G.Read(x, &v) // the tape machine's read-out statement
	l := New(Config{Graph: g})
	if err := l.Constant(x); err != nil {
		t.Fatal(err)
	}
	if err := l.Lower(y, l.ArgValues(y)); !errors.Is(err, ErrUnknownOp) {
		t.Errorf("lowering %v: %v, want ErrUnknownOp", y.Op(), err)
	}
}
