package program

import (
	"hash"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// TestBinaryXent compiles logistic regression's loss, the mean of
// gorgonia.BinaryXent(Sigmoid(x W + b), y), on every test backend (the CUDA
// backend on the host model of the device) and compares its loss and
// gradients with the tape machine's. Gorgonia rewrites log(1-p) inside
// BinaryXent to log1p(-p) and removes the node it replaces, which left
// ExprGraph.From returning another node's arguments: Compile panicked with
// "index out of range [1] with length 1".
func TestBinaryXent(t *testing.T) {
	runCases(t, []graphCase{{
		name: "logistic-regression", shapes: [][]int{{6, 3}, {3, 2}, {2}, {6, 2}}, constant: []bool{true, false, false, true},
		build: func(l []*G.Node) (*G.Node, error) {
			xw, err := G.Mul(l[0], l[1])
			if err != nil {
				return nil, err
			}
			z, err := G.BroadcastAdd(xw, l[2], nil, []byte{0})
			if err != nil {
				return nil, err
			}
			p, err := G.Sigmoid(z)
			if err != nil {
				return nil, err
			}
			xent, err := G.BinaryXent(p, l[3])
			if err != nil {
				return nil, err
			}
			return G.Mean(xent)
		},
	}})
}

// panicOp is an op of one's own whose lowering (fused.Lowering) panics
// at Compile, or whose kernel panics at Run.
type panicOp struct{ atRun bool }

func (panicOp) Arity() int            { return 1 }
func (panicOp) Type() hm.Type         { a := hm.TypeVariable('a'); return hm.NewFnType(a, a) }
func (panicOp) ReturnsPtr() bool      { return false }
func (panicOp) CallsExtern() bool     { return false }
func (panicOp) OverwritesInput() int  { return -1 }
func (panicOp) String() string        { return "Panic" }
func (panicOp) WriteHash(h hash.Hash) { _, _ = h.Write([]byte("Panic")) }
func (o panicOp) Hashcode() uint32    { h := fnv.New32a(); o.WriteHash(h); return h.Sum32() }
func (panicOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (panicOp) Do(vals ...G.Value) (G.Value, error) { return vals[0], nil }
func (o panicOp) Kernel(shapes [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	if !o.atRun {
		panic("a lowering's bug")
	}
	return panicKernel{Dst: out}
}

// panicKernel is a kernel that panics when it runs.
type panicKernel struct{ Dst backend.Operand }

func (panicKernel) Check() error { return nil }
func (panicKernel) Host(*backend.Pool) (backend.Func, error) {
	return func() error { panic("a kernel's bug") }, nil
}

// TestPanicsBecomeErrors checks the nets under Compile and Run: a panic in
// a lowering is an error naming the node, its op and its shape, and a
// panic in a kernel is Run's error naming the kernel.
func TestPanicsBecomeErrors(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, atRun := range []bool{false, true} {
		g := G.NewGraph()
		x := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("x"), G.WithInit(G.Ones()))
		y, err := G.ApplyOp(panicOp{atRun: atRun}, x)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{y}, NoGrad: true})
		if !atRun {
			want := "program: lowering node " + `"` + y.Name() + `" (op Panic, shape (3)): a lowering's bug`
			if err == nil || err.Error() != want {
				t.Errorf("Compile: got error %v, want %q", err, want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		err = prog.Run()
		if err == nil || !strings.Contains(err.Error(), "a kernel's bug") || !strings.Contains(err.Error(), "kernel 0 (panic-kernel)") {
			t.Errorf("Run: got error %v, want one naming kernel 0 (panic-kernel) and its panic", err)
		}
		prog.Close()
	}
}
