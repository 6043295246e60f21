// Package lower lowers the nodes of a Gorgonia graph into backend kernels
// against virtual buffers: the lowering phase of program.Compile. Each op
// type has one entry in the lowerings table (lower.go), which reads the
// op's parameters at compile time, checks its arguments' shapes and emits
// the kernels that compute it; patterns of several nodes that one kernel
// computes (a convolution with its gradients) are rewrites found by
// fusions (conv.go) before the nodes are lowered.
//
// What it emits is a small IR that package program plans and runs:
// Kernels whose operands are Buffers (virtual buffers, which the planner
// maps onto physical ones) and, for every lowered node, its Value (a window
// of a Buffer). A Lowering holds one graph's lowering in progress.
package lower

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
)

// ErrUnknownOp is the error of a node whose op the compiler does not know
// (program.ErrUnknownOp).
var ErrUnknownOp = errors.New("program: unknown op")

// A Buffer is a virtual buffer: the kernels are lowered against Buffers,
// which the planner then maps onto physical buffers. It implements
// backend.Buffer.
type Buffer struct {
	Type     backend.DType
	N        int  // its length, at least 1
	Resident bool // kept to the end of the run (not shared with a temporary)
	Init     any  // host data copied in after allocation (constants), or nil
	Name     string
	// Alias, where its Buf is set, is the physical buffer, at its offset,
	// that this one is: a parameter or state of the program this one
	// shares (program.Config.Share). The planner allocates nothing for it.
	Alias backend.Operand
}

// DType returns the type of the buffer's elements.
func (b *Buffer) DType() backend.DType { return b.Type }

// Len returns the buffer's length.
func (b *Buffer) Len() int { return b.N }

// A Value is where one node's value lives: Size elements of a Buffer from
// element Off (a view shares its argument's Buffer).
type Value struct {
	Shape tensor.Shape
	Size  int
	Buf   *Buffer
	Off   int
}

// Operand returns the value's first element as a kernel's operand.
func (v *Value) Operand() backend.Operand { return backend.Operand{Buf: v.Buf, Off: v.Off} }

// A State is one tensor of program state that a lowering made: a
// BatchNormOp's running mean or variance.
type State struct {
	Name     string
	Value    *Value
	Op       *G.BatchNormOp
	Variance bool // the running variance (else the mean)
}

// A SharedState is a state of the program whose buffers the lowered one
// shares (program.Config.Share), which a lowering uses instead of its own.
type SharedState struct {
	Name string
	Type backend.DType
	Size int
	At   backend.Operand // its physical buffer and offset
}

// Config is what a Lowering reads of the compilation.
type Config struct {
	Graph       *G.ExprGraph // the graph, where a batch norm's gradient finds its op's node
	EvalMode    bool         // batch norm and dropout in inference mode (program.Config.EvalMode)
	DropoutSeed uint64       // seeds every random draw (program.Config.DropoutSeed)
	// Sharing says the program shares another's parameters and state;
	// SharedStates are that program's states.
	Sharing      bool
	SharedStates []SharedState
}

// A Lowering is one graph's lowering in progress: the kernels emitted so
// far, the buffers they use and every lowered node's value.
type Lowering struct {
	Kernels []backend.Kernel // in order; nil where a later lowering replaced one (accumulate)
	Buffers []*Buffer
	Values  map[*G.Node]*Value
	States  []State // batch norms' running statistics, in the order made
	Step    *Buffer // the step that keys the random draws; nil until one needs it

	// Users counts, for every needed node, the needed nodes (and outputs)
	// that take it as an argument; Pinned are the nodes whose buffers the
	// program hands out (inputs, dropout masks, gradients). The compiler
	// sets both before it lowers the nodes.
	Users  map[*G.Node]int
	Pinned map[*G.Node]bool

	cfg      Config
	rewrites map[*G.Node]rewrite         // fused patterns' outputs (Fuse)
	spans    map[*G.Node][2]int          // each lowered op node's kernels
	owns     map[*G.Node]bool            // nodes whose values are buffers of their own, not views
	bn       map[*G.BatchNormOp]*bnStats // batch norms' running statistics
	unitVals map[unitKey]*Value          // group norm's unit scales and zero shifts
}

// StepOperand returns the buffer of the step that keys the program's random
// draws, made at its first use.
func (l *Lowering) StepOperand() backend.Operand {
	if l.Step == nil {
		l.Step = l.NewBuffer(backend.Float64, 1, true, "step")
	}
	return backend.At(l.Step, 0)
}

// bnStats are the running statistics of one BatchNormOp.
type bnStats struct {
	node     *G.Node // the op's node, which names them
	mean, vr *Value
}

// New returns an empty Lowering for cfg.
func New(cfg Config) *Lowering {
	return &Lowering{cfg: cfg, Values: map[*G.Node]*Value{}, spans: map[*G.Node][2]int{}, owns: map[*G.Node]bool{}}
}

// Lower emits the kernels of op node n, whose arguments' values (in the
// order of Children) are in: the lowering of its rewrite if it has one,
// else of its op type in lowerings. An error but ErrUnknownOp names the
// node.
func (l *Lowering) Lower(n *G.Node, in []*Value) error {
	start := len(l.Kernels)
	if err := l.lower(n, in); err != nil {
		if errors.Is(err, ErrUnknownOp) {
			return err
		}
		return fmt.Errorf("program: node %q (op %v, %T): %w", n.Name(), n.Op(), n.Op(), err)
	}
	if l.Values[n] == nil {
		return fmt.Errorf("program: node %q (op %v): lowering produced no value", n.Name(), n.Op())
	}
	l.spans[n] = [2]int{start, len(l.Kernels)}
	return nil
}

// ArgValues returns the values of n's arguments, in the order of Children.
func (l *Lowering) ArgValues(n *G.Node) []*Value {
	ch := l.Children(n)
	in := make([]*Value, len(ch))
	for i, x := range ch {
		in[i] = l.Values[x]
	}
	return in
}

// lower emits the kernels of op node n, whose arguments' values are in.
func (l *Lowering) lower(n *G.Node, in []*Value) error {
	if rw, ok := l.rewrites[n]; ok { // a fused pattern's output
		out, err := l.NewValue(n, false)
		if err != nil {
			return err
		}
		return rw.lower(l, n, in, out)
	}
	op := n.Op()
	name := gorgoniaop.OpName(op)
	if _, ok := op.(fused.Lowering); ok {
		name = gorgoniaop.Fused // an op with its own lowering, whatever its type's name
	}
	if lower, ok := notOwnValue[name]; ok {
		return lower(l, n, in)
	}
	lower, ok := lowerings[name]
	if !ok {
		return fmt.Errorf("%w %v (%T) at node %q: see the README for the ops the compiler knows", ErrUnknownOp, op, op, n.Name())
	}
	if err := checkInts(n, name, in); err != nil {
		return err
	}
	out, err := l.NewValue(n, false)
	if err != nil {
		return err
	}
	return lower(l, n, in, out)
}

// notOwnValue lower the ops whose value is not a new one of their own:
// constants, sizes, and views of their argument (Reshape, Slice).
var notOwnValue = map[gorgoniaop.OpType]func(l *Lowering, n *G.Node, in []*Value) error{
	gorgoniaop.ConstantScalar: func(l *Lowering, n *G.Node, _ []*Value) error { return l.Constant(n) },
	gorgoniaop.ConstantTensor: func(l *Lowering, n *G.Node, _ []*Value) error { return l.Constant(n) },
	gorgoniaop.SizeOp:         (*Lowering).axisSize,
	gorgoniaop.ReshapeOp:      (*Lowering).reshape,
	gorgoniaop.SliceOp: func(l *Lowering, n *G.Node, in []*Value) error {
		if err := checkInts(n, gorgoniaop.SliceOp, in); err != nil {
			return err
		}
		return l.slice(n, in)
	},
}

// reshape makes n a view of its argument, of n's shape.
func (l *Lowering) reshape(n *G.Node, in []*Value) error {
	if in[0].Size != n.DataSize() {
		return fmt.Errorf("reshape of %d values to %v", in[0].Size, n.Shape())
	}
	l.View(n, in[0], 0)
	return nil
}

// lowerings lower the ops that write a value of their own, out.
var lowerings = map[gorgoniaop.OpType]func(l *Lowering, n *G.Node, in []*Value, out *Value) error{
	gorgoniaop.ElemUnaryOp: (*Lowering).unary, gorgoniaop.ElemBinOp: (*Lowering).binary, gorgoniaop.LinAlgBinOp: (*Lowering).linAlg,
	gorgoniaop.SoftmaxOp: (*Lowering).softmax, gorgoniaop.SoftmaxDiffOp: (*Lowering).softmax, gorgoniaop.RepeatOp: (*Lowering).repeat,
	gorgoniaop.TransposeOp: (*Lowering).transpose, gorgoniaop.SliceIncrOp: (*Lowering).sliceIncr, gorgoniaop.ConcatOp: (*Lowering).concat,
	gorgoniaop.SumOp: func(l *Lowering, n *G.Node, in []*Value, out *Value) error { return l.reduce(n, in, out, backend.Sum) },
	gorgoniaop.MaxOp: func(l *Lowering, n *G.Node, in []*Value, out *Value) error { return l.reduce(n, in, out, backend.Max) },
	gorgoniaop.Fused: (*Lowering).lowerFused,

	// Normalizations and random draws (norm.go).
	gorgoniaop.BatchNormOp: (*Lowering).batchNorm, gorgoniaop.BatchnormDiffOp: (*Lowering).batchNormGrad,
	gorgoniaop.GroupNormOp: (*Lowering).groupNorm, gorgoniaop.GroupNormDiffOp: (*Lowering).groupNorm,
	gorgoniaop.DropoutOp: (*Lowering).dropout, gorgoniaop.DropoutDiffOp: (*Lowering).dropout, gorgoniaop.RandomOp: (*Lowering).random,

	// Indexing, products, pooling-free image ops, sparsemax, CTC and YOLO (ops.go).
	gorgoniaop.ByIndicesOp: (*Lowering).take, gorgoniaop.ByIndicesOpDiffOp: (*Lowering).takeGrad, gorgoniaop.AtOp: (*Lowering).at,
	gorgoniaop.TensordotOp: (*Lowering).tensordot, gorgoniaop.DiagFlatOp: (*Lowering).diagFlat, gorgoniaop.Iop: (*Lowering).identity,
	gorgoniaop.UpsampleOp: (*Lowering).upsample, gorgoniaop.UpsampleDiffOp: (*Lowering).upsampleGrad,
	gorgoniaop.SparsemaxOp: (*Lowering).sparsemax, gorgoniaop.SparsemaxDiffOp: (*Lowering).sparsemaxGrad,
	gorgoniaop.MinBetween: (*Lowering).between, gorgoniaop.MaxBetween: (*Lowering).between,
	gorgoniaop.CtcLossOp: (*Lowering).ctcLoss, gorgoniaop.CtcLossDiffOp: (*Lowering).ctcLossGrad, gorgoniaop.YoloOp: (*Lowering).yolo,

	// Convolutions and pooling (conv.go).
	gorgoniaop.Im2colOp: (*Lowering).im2col, gorgoniaop.Col2imOp: (*Lowering).col2im, gorgoniaop.MaxPoolOp: (*Lowering).pool,
	gorgoniaop.MaxPoolDiffOp: (*Lowering).poolGrad, gorgoniaop.AvgPoolOp: (*Lowering).pool, gorgoniaop.AvgPoolDiffOp: (*Lowering).poolGrad,
	gorgoniaop.GlobalAveragePoolOp: (*Lowering).globalAvgPool,
}

// Lowered returns the op types Lower knows, sorted: those of its
// tables, the ops that write a value of their own and those that do not
// (constants, SizeOf, Reshape and Slice).
func Lowered() []gorgoniaop.OpType {
	types := slices.Concat(slices.Collect(maps.Keys(lowerings)), slices.Collect(maps.Keys(notOwnValue)))
	slices.Sort(types)
	return types
}

// NewBuffer registers a virtual buffer of n elements of type dt.
func (l *Lowering) NewBuffer(dt backend.DType, n int, resident bool, name string) *Buffer {
	b := &Buffer{Type: dt, N: max(n, 1), Resident: resident, Name: name}
	l.Buffers = append(l.Buffers, b)
	return b
}

// Emit appends a kernel to the program.
func (l *Lowering) Emit(k backend.Kernel) { l.Kernels = append(l.Kernels, k) }

// NewValue gives n a fresh buffer of its shape and type: a temporary, or
// resident to the end of the run.
func (l *Lowering) NewValue(n *G.Node, resident bool) (*Value, error) {
	dt, ok := DTypeOf(n.Dtype())
	if !ok {
		return nil, fmt.Errorf("program: node %q holds %v: only float32, float64, integers and booleans are supported", n.Name(), n.Dtype())
	}
	v := &Value{Shape: n.Shape(), Size: n.DataSize()} // Shape is a copy
	v.Buf = l.NewBuffer(dt, v.Size, resident, n.Name())
	l.Values[n] = v
	l.owns[n] = true
	return v, nil
}

// View makes n's value a window of base's buffer at element offset off.
func (l *Lowering) View(n *G.Node, base *Value, off int) {
	l.Values[n] = &Value{Shape: n.Shape(), Size: n.DataSize(), Buf: base.Buf, Off: base.Off + off}
}

// Constant makes n's value at Compile a resident buffer of its own: a
// constant, or a parameter's starting value.
func (l *Lowering) Constant(n *G.Node) error {
	v, err := l.NewValue(n, true)
	if err != nil {
		return err
	}
	v.Buf.Init, err = HostData(n)
	return err
}

// axisSize lowers gorgonia.SizeOf: the length of an axis of its argument, known
// at compile time.
func (l *Lowering) axisSize(n *G.Node, in []*Value) error {
	v, err := gorgoniaop.SizeOf(n.Op(), in[0].Shape)
	if err != nil {
		return err
	}
	out, err := l.NewValue(n, true)
	if err != nil {
		return err
	}
	out.Buf.Init = []float64{v}
	if out.Buf.Type == backend.Float32 {
		out.Buf.Init = []float32{float32(v)}
	}
	return nil
}

// unaryOps are the kernels' functions of Gorgonia's unary functions.
var unaryOps = map[gorgoniaop.UnaryFunc]backend.UnaryOp{
	gorgoniaop.Abs: backend.Abs, gorgoniaop.Sign: backend.Sign, gorgoniaop.Ceil: backend.Ceil, gorgoniaop.Floor: backend.Floor,
	gorgoniaop.Sin: backend.Sin, gorgoniaop.Cos: backend.Cos, gorgoniaop.Exp: backend.Exp, gorgoniaop.Ln: backend.Log,
	gorgoniaop.Log2: backend.Log2, gorgoniaop.Neg: backend.Neg, gorgoniaop.Square: backend.Square, gorgoniaop.Sqrt: backend.Sqrt,
	gorgoniaop.Inv: backend.Inverse, gorgoniaop.InvSqrt: backend.InverseSqrt, gorgoniaop.Cube: backend.Cube,
	gorgoniaop.Tanh: backend.Tanh, gorgoniaop.Sigmoid: backend.Sigmoid, gorgoniaop.Log1p: backend.Log1p,
	gorgoniaop.Expm1: backend.Expm1, gorgoniaop.Softplus: backend.Softplus,
}

func (l *Lowering) unary(n *G.Node, in []*Value, out *Value) error {
	name := gorgoniaop.UnaryOf(n.Op())
	uop, ok := unaryOps[name]
	if !ok {
		return fmt.Errorf("%w: unary function %q at node %q", ErrUnknownOp, name, n.Name())
	}
	if out.Size != in[0].Size {
		return fmt.Errorf("unary %s of %d values gives %d", name, in[0].Size, out.Size)
	}
	l.Emit(backend.Map{Op: uop, N: out.Size, Src: in[0].Operand(), Dst: out.Operand()})
	return nil
}

// binaryOps are the kernels' functions of Gorgonia's binary functions.
var binaryOps = map[gorgoniaop.BinaryFunc]backend.BinaryOp{
	gorgoniaop.Add: backend.Add, gorgoniaop.Sub: backend.Sub, gorgoniaop.Mul: backend.Mul, gorgoniaop.Div: backend.Div,
	gorgoniaop.Pow: backend.Pow, gorgoniaop.Lt: backend.Lt, gorgoniaop.Gt: backend.Gt, gorgoniaop.Lte: backend.Le,
	gorgoniaop.Gte: backend.Ge, gorgoniaop.Eq: backend.Eq, gorgoniaop.Ne: backend.Ne,
}

func (l *Lowering) binary(n *G.Node, in []*Value, out *Value) error {
	sym := gorgoniaop.BinaryOf(n.Op())
	bop, ok := binaryOps[sym]
	if !ok {
		return fmt.Errorf("%w: binary function %q at node %q", ErrUnknownOp, sym, n.Name())
	}
	if out.Buf.Type == backend.Int32 { // a comparison with retSame false
		return l.compare(n, bop, in, out)
	}
	a, b := in[0], in[1]
	aScalar, bScalar, ok := scalars(a, b, out)
	if !ok {
		return fmt.Errorf("elementwise %s of shapes %v and %v into %v", sym, a.Shape, b.Shape, out.Shape)
	}
	if bop == backend.Add && !aScalar && !bScalar && l.accumulate(n, in) {
		return nil
	}
	l.Emit(backend.Zip{Op: bop, N: out.Size, A: a.Operand(), B: b.Operand(), AScalar: aScalar, BScalar: bScalar, Dst: out.Operand()})
	return nil
}

// accumulate lowers n = x + y, where y is a matrix product (its lowering
// one Gemm) and x a buffer of its own, neither read by anything else nor a
// gradient the program keeps, as that product accumulated into x's buffer
// (Beta 1), which n's value then is: Gorgonia sums a weight's gradient
// over the T steps of a recurrent network as T - 1 such additions, each a
// pass over the weight that this saves. The product moves to n's place,
// after both; its first kernel is dropped. It reports whether it did.
func (l *Lowering) accumulate(n *G.Node, in []*Value) bool {
	ch := l.Children(n)
	if len(ch) != 2 || len(in) != 2 || in[0].Size != in[1].Size {
		return false
	}
	for _, o := range [2][2]int{{0, 1}, {1, 0}} {
		x, y, xv, yv := ch[o[0]], ch[o[1]], in[o[0]], in[o[1]]
		if l.Users[x] != 1 || l.Users[y] != 1 || !l.owns[x] || xv.Buf.Resident || xv.Off != 0 || l.Pinned[x] || l.Pinned[y] {
			continue
		}
		span, ok := l.spans[y]
		if !ok || span[1]-span[0] != 1 {
			continue
		}
		g, ok := l.Kernels[span[0]].(backend.Gemm)
		if !ok || g.Batches() != 1 || g.Beta != 0 || g.C.Buf != backend.Buffer(yv.Buf) || g.C.Off != yv.Off || g.LDC != g.N || g.M*g.N != yv.Size {
			continue
		}
		l.Kernels[span[0]] = nil // dropKernels removes it
		g.C, g.Beta = xv.Operand(), 1
		l.Emit(g)
		l.View(n, xv, 0)
		return true
	}
	return false
}

// scalars says which operand of an elementwise binary op into out is a
// scalar taken for every element (neither, where both have out's size),
// and whether their sizes fit out at all.
func scalars(a, b, out *Value) (aScalar, bScalar, ok bool) {
	switch {
	case a.Size == out.Size && b.Size == out.Size:
		return false, false, true
	case a.Size == 1 && b.Size == out.Size:
		return true, false, true
	case b.Size == 1 && a.Size == out.Size:
		return false, true, true
	}
	return false, false, false
}

func (l *Lowering) linAlg(n *G.Node, in []*Value, out *Value) error {
	op := n.Op()
	kind, tA, tB, err := gorgoniaop.LinAlgOf(op)
	if err != nil {
		return err
	}
	a, b := in[0], in[1]
	// Vectors are taken as matrices: a matrix times a vector is a GEMM
	// with one column, a dot product a row times a column, an outer
	// product a column times a row.
	as, bs := a.Shape, b.Shape
	want := map[int][2]int{gorgoniaop.MatMul: {2, 2}, gorgoniaop.MatVecMul: {2, 1}, gorgoniaop.VecDot: {1, 1}, gorgoniaop.OuterProd: {1, 1}}[kind] // axes of a and b
	switch {
	case kind == gorgoniaop.BatchedMatMul:
		if len(as) < 3 || len(bs) != len(as) {
			return fmt.Errorf("%v: operands of shapes %v and %v, want batches of matrices", op, as, bs)
		}
	case want == [2]int{}:
		return fmt.Errorf("%w: linear algebra op kind %d (%v)", ErrUnknownOp, kind, op)
	case len(as) != want[0] || len(bs) != want[1]:
		return fmt.Errorf("%v: operands of shapes %v and %v, want %d and %d axes", op, as, bs, want[0], want[1])
	}
	switch kind {
	case gorgoniaop.MatVecMul:
		bs, tB = tensor.Shape{bs[0], 1}, false
	case gorgoniaop.VecDot:
		as, bs, tA, tB = tensor.Shape{1, as[0]}, tensor.Shape{bs[0], 1}, false, false
	case gorgoniaop.OuterProd:
		as, bs, tA, tB = tensor.Shape{as[0], 1}, tensor.Shape{1, bs[0]}, false, false
	}
	// Matrices, or batches of them over the leading axes.
	d := len(as)
	batch := as[:d-2].TotalSize()
	if bs[:d-2].TotalSize() != batch {
		return fmt.Errorf("%v: batches of shapes %v and %v", op, as, bs)
	}
	ar, ac, br, bc := as[d-2], as[d-1], bs[d-2], bs[d-1]
	g := backend.Gemm{TransA: tA, TransB: tB, Alpha: 1, M: ar, K: ac, N: bc, LDA: ac, LDB: bc, A: a.Operand(), B: b.Operand(), C: out.Operand()}
	if tA {
		g.M, g.K = ac, ar
	}
	if tB {
		g.N = br
	}
	g.LDC = g.N
	if kind == gorgoniaop.BatchedMatMul {
		g.Batch, g.StrideA, g.StrideB, g.StrideC = batch, ar*ac, br*bc, g.M*g.N
	}
	if g.Batches()*g.M*g.N != out.Size {
		return fmt.Errorf("%v: product of %v and %v has %d values, the node %v", op, a.Shape, b.Shape, g.Batches()*g.M*g.N, out.Shape)
	}
	l.Emit(g)
	return nil
}

// ThinProduct reports whether g is the matrix product A^T B, and returns
// A's and B's values.
func (l *Lowering) ThinProduct(g *G.Node) (a, b *Value, ok bool) {
	if _, fused := l.rewrites[g]; fused {
		return nil, nil, false
	}
	if op := g.Op(); op == nil || gorgoniaop.OpName(op) != gorgoniaop.LinAlgBinOp {
		return nil, nil, false
	}
	if kind, tA, tB, err := gorgoniaop.LinAlgOf(g.Op()); err != nil || kind != gorgoniaop.MatMul || !tA || tB {
		return nil, nil, false
	}
	ch := l.Children(g)
	a, b = l.Values[ch[0]], l.Values[ch[1]]
	if a == nil || b == nil || len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, nil, false
	}
	return a, b, true
}

// reduce lowers Sum and Max along axes: runs of adjacent axes are reduced
// at once, from the last run to the first.
func (l *Lowering) reduce(n *G.Node, in []*Value, out *Value, rop backend.ReduceOp) error {
	along, err := gorgoniaop.IntsField(n.Op(), "along")
	if err != nil {
		return err
	}
	src := in[0]
	shape := src.Shape.Clone()
	if len(along) == 0 { // every axis
		for i := range shape {
			along = append(along, i)
		}
	}
	sort.Ints(along)
	// Runs of adjacent axes, reduced last first.
	type run struct{ lo, hi int }
	var runs []run
	for i, a := range along {
		switch l := len(runs) - 1; {
		case a < 0 || a >= len(shape) || (i > 0 && along[i-1] == a):
			return fmt.Errorf("reduction along %v of shape %v", along, src.Shape)
		case l >= 0 && runs[l].hi == a:
			runs[l].hi = a + 1
		default:
			runs = append(runs, run{a, a + 1})
		}
	}
	cur := src.Operand()
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		outer, mid, inner := shape[:r.lo].TotalSize(), shape[r.lo:r.hi].TotalSize(), shape[r.hi:].TotalSize()
		dst := out.Operand()
		if i > 0 {
			dst = backend.At(l.NewBuffer(out.Buf.Type, outer*inner, false, n.Name()+".partial"), 0)
		}
		l.Emit(backend.Reduce{Op: rop, Outer: outer, Mid: mid, Inner: inner, Src: cur, Dst: dst})
		shape = append(shape[:r.lo:r.lo], shape[r.hi:]...)
		cur = dst
	}
	if shape.TotalSize() != out.Size {
		return fmt.Errorf("reduction of %v along %v gives %d values, the node %v", src.Shape, along, shape.TotalSize(), out.Shape)
	}
	return nil
}

// softmax lowers SoftMax / LogSoftMax, and their gradient softmaxDiffOp
// (arguments x, y = softmax(x), dy).
func (l *Lowering) softmax(n *G.Node, in []*Value, out *Value) error {
	op, x := n.Op(), in[0]
	isLog, axis, err := gorgoniaop.SoftmaxOf(op, x.Shape)
	if err != nil {
		return err
	}
	outer, inner := x.Shape[:axis].TotalSize(), x.Shape[axis+1:].TotalSize()
	if gorgoniaop.OpName(op) == gorgoniaop.SoftmaxOp {
		l.Emit(backend.Softmax{Log: isLog, Outer: outer, Axis: x.Shape[axis], Inner: inner, Src: x.Operand(), Dst: out.Operand()})
		return nil
	}
	if len(in) != 3 || in[1].Size != x.Size || in[2].Size != x.Size {
		return fmt.Errorf("softmax gradient of %d arguments", len(in))
	}
	l.Emit(backend.SoftmaxGrad{Log: isLog, Outer: outer, Axis: x.Shape[axis], Inner: inner, Y: in[1].Operand(), DY: in[2].Operand(), DX: out.Operand()})
	return nil
}

// repeat lowers gorgonia's repeatOp (broadcasting): every element of the
// argument is repeated along one axis, as tensor.Repeat does.
func (l *Lowering) repeat(n *G.Node, in []*Value, out *Value) error {
	along, err := gorgoniaop.IntField(n.Op(), "along")
	if err != nil {
		return err
	}
	x := in[0]
	os := out.Shape
	if along < 0 || along >= len(os) {
		return fmt.Errorf("repeat along axis %d into shape %v", along, os)
	}
	// The argument's shape, padded with unit axes to the output's rank.
	xs := make(tensor.Shape, len(os))
	for i := range xs {
		xs[i] = 1
	}
	copy(xs, x.Shape)
	if xs.TotalSize() != x.Size {
		return fmt.Errorf("repeat of shape %v into %v", x.Shape, os)
	}
	rep := os[along] / xs[along]
	want := slices.Clone(xs) // the argument's shape, rep times as long along the axis
	want[along] *= rep
	if !slices.Equal(want, os) {
		return fmt.Errorf("repeat of shape %v into %v along %d", x.Shape, os, along)
	}
	// Split the repeated axis into (xs[along], rep): the copy reads the
	// same element rep times (source stride 0).
	xst, ost := xs.CalcStrides(), os.CalcStrides()
	ds := slices.Insert(ost, along+1, ost[along])
	ds[along] *= rep
	l.Emit(backend.Copy{Shape: slices.Insert(xs, along+1, rep), Src: x.Operand(), SrcStrides: slices.Insert(xst, along+1, 0), Dst: out.Operand(), DstStrides: ds})
	return nil
}

func (l *Lowering) transpose(n *G.Node, in []*Value, out *Value) error {
	x := in[0]
	pattern, err := gorgoniaop.TransposeOf(n.Op(), x.Shape)
	if err != nil {
		return err
	}
	xst := x.Shape.CalcStrides()
	ss := make([]int, len(pattern))
	for i, p := range pattern {
		if p < 0 || p >= len(x.Shape) || out.Shape[i] != x.Shape[p] {
			return fmt.Errorf("transpose %v of shape %v into %v", pattern, x.Shape, out.Shape)
		}
		ss[i] = xst[p]
	}
	l.Emit(backend.Copy{Shape: out.Shape, Src: x.Operand(), SrcStrides: ss, Dst: out.Operand(), DstStrides: out.Shape.CalcStrides()})
	return nil
}

func (l *Lowering) slice(n *G.Node, in []*Value) error {
	x := in[0]
	w, err := gorgoniaop.SliceOf(n.Op(), x.Shape)
	if err != nil {
		return err
	}
	if w.Shape.TotalSize() != n.DataSize() {
		return fmt.Errorf("slice of %v gives %v, the node %v", x.Shape, w.Shape, n.Shape())
	}
	if w.Contiguous {
		l.View(n, x, w.Off)
		return nil
	}
	out, err := l.NewValue(n, false)
	if err != nil {
		return err
	}
	l.Emit(backend.Copy{Shape: w.Shape, Src: backend.At(x.Buf, x.Off+w.Off), SrcStrides: w.Strides, Dst: out.Operand(), DstStrides: w.Shape.CalcStrides()})
	return nil
}

// sliceIncr lowers the gradient of a slice: zeros of the sliced tensor's
// shape with the slice's window set to the incoming gradient.
func (l *Lowering) sliceIncr(n *G.Node, in []*Value, out *Value) error {
	x, g := in[0], in[1]
	w, err := gorgoniaop.SliceOf(n.Op(), x.Shape)
	if err != nil {
		return err
	}
	if w.Shape.TotalSize() != g.Size {
		return fmt.Errorf("slice gradient of %d values into a window of %v", g.Size, w.Shape)
	}
	l.Emit(backend.Fill{N: out.Size, Dst: out.Operand()})
	l.Emit(backend.Copy{Shape: w.Shape, Src: g.Operand(), SrcStrides: w.Shape.CalcStrides(), Dst: backend.At(out.Buf, out.Off+w.Off), DstStrides: w.Strides})
	return nil
}

func (l *Lowering) concat(n *G.Node, in []*Value, out *Value) error {
	axis, err := gorgoniaop.IntField(n.Op(), "axis")
	if err != nil {
		return err
	}
	if axis < 0 || axis >= len(out.Shape) {
		return fmt.Errorf("concatenation along axis %d into %v", axis, out.Shape)
	}
	ost := out.Shape.CalcStrides()
	at := 0
	for _, x := range in {
		if len(x.Shape) != len(out.Shape) {
			return fmt.Errorf("concatenating shape %v into %v", x.Shape, out.Shape)
		}
		l.Emit(backend.Copy{Shape: x.Shape, Src: x.Operand(), SrcStrides: x.Shape.CalcStrides(), Dst: backend.At(out.Buf, out.Off+at*ost[axis]), DstStrides: ost})
		at += x.Shape[axis]
	}
	if at != out.Shape[axis] {
		return fmt.Errorf("concatenation of %d along axis %d into %v", at, axis, out.Shape)
	}
	return nil
}
