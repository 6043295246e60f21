package program

import (
	"errors"
	"hash"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/fused"
)

func one(f func(*G.Node) (*G.Node, error)) func([]*G.Node) (*G.Node, error) {
	return func(l []*G.Node) (*G.Node, error) { return f(l[0]) }
}

func two(f func(a, b *G.Node) (*G.Node, error)) func([]*G.Node) (*G.Node, error) {
	return func(l []*G.Node) (*G.Node, error) { return f(l[0], l[1]) }
}

// scalarOf returns a constant scalar of n's type.
func scalarOf(n *G.Node, v float64) *G.Node {
	if n.Dtype() == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// coreCases are the op cases that both the lowerings' test (TestLowerings)
// and the ONNX export's (TestExportONNX) run.
func coreCases() []graphCase {
	return []graphCase{
		// Products in every transpose combination.
		{name: "matmul", shapes: [][]int{{3, 4}, {4, 5}}, build: two(G.Mul)},
		{name: "matmul-aT", shapes: [][]int{{4, 3}, {4, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.Mul(G.Must(G.Transpose(a)), b) })},
		{name: "matmul-bT", shapes: [][]int{{3, 4}, {5, 4}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.Mul(a, G.Must(G.Transpose(b))) })},
		{name: "matvec", shapes: [][]int{{3, 4}, {4}}, build: two(G.Mul)},
		{name: "vecdot", shapes: [][]int{{7}, {7}}, build: two(G.Mul)},
		// The tape machine fails the outer product's gradient ("Shape
		// mismatch" in its Aᵀ × b): compare values only.
		{name: "outer", shapes: [][]int{{3}, {5}}, build: two(G.OuterProd), noGrad: true},
		{name: "batched", shapes: [][]int{{2, 3, 4}, {2, 4, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.BatchedMatMul(a, b) })},
		{name: "batched-bT", shapes: [][]int{{2, 3, 4}, {2, 5, 4}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.BatchedMatMul(a, b, false, true) })},
		{name: "batched-aT", shapes: [][]int{{3, 4, 2}, {3, 4, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.BatchedMatMul(a, b, true, false) })},
		// Elementwise, unary.
		unaryCase("neg", G.Neg, false),
		unaryCase("exp", G.Exp, false),
		unaryCase("log", G.Log, true),
		unaryCase("sqrt", G.Sqrt, true),
		unaryCase("square", G.Square, false),
		unaryCase("cube", G.Cube, false),
		unaryCase("tanh", G.Tanh, false),
		unaryCase("sigmoid", G.Sigmoid, false),
		unaryCase("abs", G.Abs, false),
		unaryCase("inverse", G.Inverse, true),
		unaryCase("log1p", G.Log1p, true),
		unaryCase("softplus", G.Softplus, false),
		unaryCase("relu", G.Rectify, false),
		// Elementwise, binary, with scalars and broadcasting.
		{name: "add", shapes: [][]int{{3, 5}, {3, 5}}, build: two(G.Add)},
		{name: "sub", shapes: [][]int{{2, 3, 4}, {2, 3, 4}}, build: two(G.Sub)},
		{name: "hadamard", shapes: [][]int{{7}, {7}}, build: two(G.HadamardProd)},
		{name: "div", shapes: [][]int{{3, 5}, {3, 5}}, build: two(G.HadamardDiv), positive: true},
		{name: "scalar-mul", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Mul(scalarOf(a, 1.5), a) })},
		{name: "scalar-div", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.HadamardDiv(scalarOf(a, 2), a) }), positive: true},
		{name: "pow", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Pow(a, scalarOf(a, 3)) }), positive: true},
		{name: "broadcast-add-rows", shapes: [][]int{{4, 3}, {1, 3}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.BroadcastAdd(a, b, nil, []byte{0}) })},
		{name: "broadcast-sub-cols", shapes: [][]int{{4, 3}, {4, 1}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.BroadcastSub(a, b, nil, []byte{1}) })},
		{name: "broadcast-mul-3d", shapes: [][]int{{2, 3, 4}, {2, 3, 1}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.BroadcastHadamardProd(a, b, nil, []byte{2}) })},
		{name: "broadcast-left", shapes: [][]int{{1, 3}, {4, 3}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.BroadcastAdd(a, b, []byte{0}, nil) })},
		// Shapes.
		{name: "reshape", shapes: [][]int{{3, 4}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.Mul(G.Must(G.Reshape(a, tensor.Shape{2, 6})), G.Must(G.Reshape(G.Must(G.Square(a)), tensor.Shape{6, 2})))
		})},
		{name: "transpose-2d", shapes: [][]int{{3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Transpose(a) })},
		{name: "transpose-4d", shapes: [][]int{{2, 3, 4, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Transpose(a, 0, 2, 1, 3) })},
		{name: "slice-rows", shapes: [][]int{{5, 3}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Slice(a, G.S(1, 4)) })},
		{name: "slice-cols", shapes: [][]int{{5, 6}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Slice(a, nil, G.S(1, 5)) })},
		{name: "slice-index", shapes: [][]int{{4, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Slice(a, nil, G.S(2)) })},
		{name: "slice-3d-middle", shapes: [][]int{{2, 5, 3}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Slice(a, nil, G.S(1, 3)) })},
		{name: "concat-1", shapes: [][]int{{2, 3, 2}, {2, 1, 2}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.Concat(1, a, b) })},
		// Reductions.
		{name: "sum-all", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a) })},
		{name: "sum-0-2", shapes: [][]int{{2, 3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a, 0, 2) })},
		{name: "mean-1", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Mean(a, 1) })},
		{name: "max-0", shapes: [][]int{{4, 3}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Max(a, 0) })},
		{name: "max-3d-2", shapes: [][]int{{2, 3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Max(a, 2) })},
		// Softmax.
		{name: "softmax", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.SoftMax(a) })},
		{name: "logsoftmax", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.LogSoftMax(a) })},
		{name: "softmax-3d-axis1", shapes: [][]int{{2, 3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.SoftMax(a, 1) })},
		{name: "fused-layer-norm", shapes: [][]int{{6, 5}, {1, 5}, {1, 5}}, build: func(l []*G.Node) (*G.Node, error) { return fused.LayerNorm(l[0], l[1], l[2], 1e-5) }},
		{name: "fused-attention", shapes: [][]int{{6, 4}, {6, 4}, {6, 4}}, build: func(l []*G.Node) (*G.Node, error) { return fused.Attention(l[0], l[1], l[2], 2, 3) }},
		{name: "fused-attention-odd", shapes: [][]int{{14, 6}, {14, 6}, {14, 6}}, build: func(l []*G.Node) (*G.Node, error) { return fused.Attention(l[0], l[1], l[2], 3, 7) }},
		{name: "fused-gelu", shapes: [][]int{{3, 7}}, build: one(fused.GELU)},
		{name: "fused-bias-identity", shapes: [][]int{{4, 5}, {1, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) { return fused.BiasAct(a, b, fused.Identity) })},
		{name: "fused-bias-relu", shapes: [][]int{{4, 5}, {1, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) { return fused.BiasAct(a, b, fused.ReLU) })},
		{name: "fused-bias-gelu", shapes: [][]int{{3, 6}, {1, 6}}, build: two(func(a, b *G.Node) (*G.Node, error) { return fused.BiasAct(a, b, fused.GELUTanh) })},
	}
}

// unaryCase is the case of a unary function of a 3 x 5 leaf, positive
// where its domain asks for it.
func unaryCase(name string, f func(*G.Node) (*G.Node, error), positive bool) graphCase {
	return graphCase{name: name, shapes: [][]int{{3, 5}}, build: one(f), positive: positive}
}

// TestLowerings compares every op lowering with the tape machine: values,
// and gradients through gorgonia.Grad, in float64 and float32, on odd
// shapes, on one thread and split across three.
func TestLowerings(t *testing.T) {
	cases := append(coreCases(),
		graphCase{name: "scalar-sub", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Sub(a, scalarOf(a, 0.25)) })},
		graphCase{name: "param-scalar", shapes: [][]int{{}, {4, 3}}, build: two(G.Mul)},
		// Comparisons as 0/1 masks (no gradient through them).
		graphCase{name: "gte-mask", shapes: [][]int{{3, 5}, {3, 5}}, constant: []bool{false, true}, build: two(func(a, b *G.Node) (*G.Node, error) {
			m, err := G.Gte(a, b, true)
			if err != nil {
				return nil, err
			}
			return G.HadamardProd(a, m)
		})},
		graphCase{name: "lt-eq-ne", shapes: [][]int{{3, 5}, {3, 5}}, noGrad: true, build: two(func(a, b *G.Node) (*G.Node, error) {
			lt := G.Must(G.Lt(a, b, true))
			eq := G.Must(G.Eq(a, a, true))
			ne := G.Must(G.Ne(a, b, true))
			gt := G.Must(G.Gt(a, b, true))
			lte := G.Must(G.Lte(a, b, true))
			return G.Add(G.Must(G.Add(lt, eq)), G.Must(G.Add(ne, G.Must(G.Add(gt, lte)))))
		})},
		graphCase{name: "transpose-3d", shapes: [][]int{{2, 3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Transpose(a, 2, 0, 1) })},
		graphCase{name: "slice-step", shapes: [][]int{{7, 3}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Slice(a, G.S(0, 7, 2)) })},
		graphCase{name: "concat-0", shapes: [][]int{{2, 3}, {4, 3}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.Concat(0, a, b) })},
		graphCase{name: "sum-0", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a, 0) })},
		graphCase{name: "sum-1", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a, 1) })},
		graphCase{name: "sum-1-2", shapes: [][]int{{2, 3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a, 1, 2) })},
		graphCase{name: "mean-all", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Mean(a) })},
		graphCase{name: "max-1", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Max(a, 1) })},
		graphCase{name: "softmax-3d-axis2", shapes: [][]int{{2, 3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.SoftMax(a, 2) })},
		// A composite: a node used twice (gradient contributions summed).
		graphCase{name: "reuse", shapes: [][]int{{4, 3}, {3, 3}}, build: two(func(x, w *G.Node) (*G.Node, error) {
			h := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
			return G.Add(G.Must(G.Mul(h, w)), h)
		})},
		// orthonet's fused ops.
		graphCase{name: "fused-cross-entropy", shapes: [][]int{{5, 7}, {5, 7}}, constant: []bool{false, true}, build: two(fused.SoftmaxCrossEntropy)},
		// A constant matrix leaf (not a parameter).
		graphCase{name: "constant-leaf", shapes: [][]int{{3, 4}, {4, 2}}, constant: []bool{false, true}, build: two(G.Mul)},
	)
	runCases(t, cases)
}

// TestUnknownOp checks that an op the compiler does not know is refused at
// Compile, with an error naming the op and the node.
func TestUnknownOp(t *testing.T) {
	g := G.NewGraph()
	x := newLeaf(g, tensor.Float64, "x", []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	y := G.Must(G.Cos(x))
	z := G.Must(G.SoftMax(y))
	// ConvType (dtConvOp) has no lowering.
	conv := G.Must(G.ConvType(z, tensor.Float64, tensor.Int))
	be := cpu.New(cpu.Options{})
	defer be.Close()
	_, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{conv}})
	if !errors.Is(err, ErrUnknownOp) || !strings.Contains(err.Error(), "dtConvOp") {
		t.Fatalf("error %v, want ErrUnknownOp naming dtConvOp", err)
	}
	if !strings.Contains(err.Error(), conv.Name()) {
		t.Errorf("error %v does not name the node %q", err, conv.Name())
	}
}

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

// elementwise holds the methods that the tests' ops of one's own (panicOp,
// absOp) share: one argument, a result of its type and shape.
type elementwise struct{}

func (elementwise) Arity() int           { return 1 }
func (elementwise) Type() hm.Type        { a := hm.TypeVariable('a'); return hm.NewFnType(a, a) }
func (elementwise) ReturnsPtr() bool     { return false }
func (elementwise) CallsExtern() bool    { return false }
func (elementwise) OverwritesInput() int { return -1 }
func (elementwise) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}

// panicOp is an op of one's own whose lowering (fused.Lowering) panics
// at Compile, or whose kernel panics at Run.
type panicOp struct {
	elementwise
	atRun bool
}

func (panicOp) String() string                      { return "Panic" }
func (panicOp) WriteHash(h hash.Hash)               { _, _ = h.Write([]byte("Panic")) }
func (o panicOp) Hashcode() uint32                  { h := fnv.New32a(); o.WriteHash(h); return h.Sum32() }
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
