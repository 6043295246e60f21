package program

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
)

// lowerNodes, the lowering phase, emits the program's kernels against
// virtual buffers: the dropout masks the program draws, the reset of the
// gradients' finite flags, then every needed node in order (node: a leaf
// becomes a buffer, an op its kernels, by lower and the lowerings table)
// with the check of each gradient, and Config.Accuracy's count.
func (c *compiler) lowerNodes() error {
	if err := c.drawMasks(); err != nil {
		return err
	}
	if !c.cfg.NoGrad && len(c.pvals) > 0 {
		c.flags = c.newBuf(backend.Int32, 2*len(c.pvals), true, "finite flags")
		c.emit(backend.Fill{N: 2 * len(c.pvals), Dst: backend.At(c.flags, 0)})
	}
	for _, n := range c.needed {
		if c.vals[n] != nil {
			continue // a dropout mask, lowered by drawMasks
		}
		start := len(c.kernels)
		if err := c.lowerNode(n); err != nil {
			return err
		}
		c.spans[n] = [2]int{start, len(c.kernels)}
		for _, i := range c.grads[n] {
			c.checkGrad(i, n)
		}
		if len(c.grads[n]) == 1 {
			c.gradKernels[n] = [2]int{start, len(c.kernels)}
		}
	}
	return c.countCorrect()
}

// drawMasks lowers the dropout masks the outputs need, each drawn at the
// start of every Run.
func (c *compiler) drawMasks() error {
	needed := map[*G.Node]bool{}
	for _, n := range c.needed {
		needed[n] = true
	}
	for i, d := range c.cfg.Dropout {
		if !needed[d.Node] {
			continue // a mask the outputs do not need
		}
		if err := c.lowerNode(d.Node); err != nil {
			return err
		}
		v := c.vals[d.Node]
		c.emit(backend.DropoutMask{N: v.size, P: d.P, Seed: c.cfg.DropoutSeed, Stream: uint64(i),
			Step: c.stepOperand(), Dst: v.operand()})
	}
	return nil
}

// lowerNode lowers n by node. A panic in a lowering, which is a bug (each
// checks what it reads), becomes an error that names the node, its op and
// its shape.
func (c *compiler) lowerNode(n *G.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("program: lowering node %q (op %v, shape %v): %v", n.Name(), n.Op(), n.Shape(), r)
		}
	}()
	return c.node(n)
}

// node lowers one node: a leaf becomes a resident buffer, an op its kernels.
func (c *compiler) node(n *G.Node) error {
	if n.Op() == nil {
		return c.leaf(n)
	}
	ch := c.children(n)
	in := make([]*val, len(ch))
	for i, x := range ch {
		in[i] = c.vals[x]
	}
	if err := c.lower(n, in); err != nil {
		if errors.Is(err, ErrUnknownOp) {
			return err
		}
		return fmt.Errorf("program: node %q (op %v, %T): %w", n.Name(), n.Op(), n.Op(), err)
	}
	if c.vals[n] == nil {
		return fmt.Errorf("program: node %q (op %v): lowering produced no value", n.Name(), n.Op())
	}
	return nil
}

// leaf gives a leaf its resident buffer: a constant's or (unless the
// program shares another's) a parameter's value at Compile, an input's, or
// the shared program's parameter of the same name.
func (c *compiler) leaf(n *G.Node) error {
	_, isParam := c.params[n]
	if !isParam && !c.inputs[n] {
		if err := c.constant(n); err != nil {
			return fmt.Errorf("%w (a leaf that is neither a parameter nor an input is a constant)", err)
		}
		return nil
	}
	if isParam && c.cfg.Share == nil {
		return c.constant(n) // its value at Compile, in a buffer of its own
	}
	v, err := c.newVal(n, true)
	if err != nil {
		return err
	}
	if !isParam {
		v.vb.init, _ = hostData(n) // an input's value at Compile (if it has one), until SetInput
		return nil
	}
	// A parameter of the shared program.
	share := c.cfg.Share.params
	j := slices.IndexFunc(share, func(pv paramVal) bool { return pv.Node.Name() == n.Name() })
	if j < 0 {
		return fmt.Errorf("program: parameter %q is not a parameter of the shared program", n.Name())
	}
	other := share[j].v
	if other.vb.dt != v.vb.dt || other.size != v.size {
		return fmt.Errorf("program: parameter %q has %d values of %v, the shared program's %d of %v", n.Name(), v.size, v.vb.dt, other.size, other.vb.dt)
	}
	v.vb.phys, v.vb.physOff = other.vb.phys, other.vb.physOff+other.off
	return nil
}

// hostData returns a copy of a leaf's value as a host slice: []float32,
// []float64, or, for integers and booleans, []int32.
func hostData(n *G.Node) (any, error) {
	data, ok, err := gorgoniaop.FloatData(n)
	switch {
	case err != nil:
		return nil, fmt.Errorf("program: %w", err)
	case ok:
		return data, nil
	case !isFloat(n.Dtype()):
		return intData(n.Name(), n.Value().Data())
	}
	return nil, fmt.Errorf("program: leaf %q holds %T, want float32 or float64 values", n.Name(), n.Value().Data())
}

// checkGrad adds the kernels that flag a non-finite gradient of parameter
// i, whose gradient node g has just been lowered. A gradient that is the
// product A^T B of two thin matrices (a linear layer's batch) is checked
// through its factors, at a fraction of the cost of scanning it.
func (c *compiler) checkGrad(i int, g *G.Node) {
	v := c.vals[g]
	if a, b, ok := c.thinProduct(g); ok && a.shape[0]*(a.shape[1]+b.shape[1]) < v.size {
		c.emit(backend.CheckProduct{RA: a.shape[0], CA: a.shape[1], CB: b.shape[1], A: a.operand(), B: b.operand(), Flag: backend.At(c.flags, 2*i)})
		return
	}
	c.emit(backend.CheckFinite{N: v.size, Src: v.operand(), Flag: backend.At(c.flags, 2*i+1)})
}

// lower emits the kernels of op node n, whose arguments' values are in.
func (c *compiler) lower(n *G.Node, in []*val) error {
	if rw, ok := c.rewrites[n]; ok { // a fused pattern's output
		out, err := c.newVal(n, false)
		if err != nil {
			return err
		}
		return rw.lower(c, n, in, out)
	}
	op := n.Op()
	name := gorgoniaop.OpName(op)
	if _, ok := op.(fused.Lowering); ok {
		name = gorgoniaop.Fused // an op with its own lowering, whatever its type's name
	}
	switch name {
	case gorgoniaop.ConstantScalar, gorgoniaop.ConstantTensor:
		return c.constant(n)
	case gorgoniaop.SizeOp:
		return c.size(n, in)
	case gorgoniaop.ReshapeOp:
		if in[0].size != n.DataSize() {
			return fmt.Errorf("reshape of %d values to %v", in[0].size, n.Shape())
		}
		c.view(n, in[0], 0)
		return nil
	case gorgoniaop.SliceOp:
		if err := checkInts(n, name, in); err != nil {
			return err
		}
		return c.slice(n, in)
	}
	lower, ok := lowerings[name]
	if !ok {
		return fmt.Errorf("%w %v (%T) at node %q: see the README for the ops the compiler knows", ErrUnknownOp, op, op, n.Name())
	}
	if err := checkInts(n, name, in); err != nil {
		return err
	}
	out, err := c.newVal(n, false)
	if err != nil {
		return err
	}
	return lower(c, n, in, out)
}

// lowerings lower the ops that write a value of their own, out.
var lowerings = map[gorgoniaop.OpType]func(c *compiler, n *G.Node, in []*val, out *val) error{
	gorgoniaop.ElemUnaryOp: (*compiler).unary, gorgoniaop.ElemBinOp: (*compiler).binary, gorgoniaop.LinAlgBinOp: (*compiler).linAlg,
	gorgoniaop.SoftmaxOp: (*compiler).softmax, gorgoniaop.SoftmaxDiffOp: (*compiler).softmax, gorgoniaop.RepeatOp: (*compiler).repeat,
	gorgoniaop.TransposeOp: (*compiler).transpose, gorgoniaop.SliceIncrOp: (*compiler).sliceIncr, gorgoniaop.ConcatOp: (*compiler).concat,
	gorgoniaop.SumOp: func(c *compiler, n *G.Node, in []*val, out *val) error { return c.reduce(n, in, out, backend.Sum) },
	gorgoniaop.MaxOp: func(c *compiler, n *G.Node, in []*val, out *val) error { return c.reduce(n, in, out, backend.Max) },
	gorgoniaop.Fused: (*compiler).lowerFused,

	// Normalizations and random draws (lower_norm.go).
	gorgoniaop.BatchNormOp: (*compiler).batchNorm, gorgoniaop.BatchnormDiffOp: (*compiler).batchNormGrad,
	gorgoniaop.GroupNormOp: (*compiler).groupNorm, gorgoniaop.GroupNormDiffOp: (*compiler).groupNorm,
	gorgoniaop.DropoutOp: (*compiler).dropout, gorgoniaop.DropoutDiffOp: (*compiler).dropout, gorgoniaop.RandomOp: (*compiler).random,

	// Indexing, products, pooling-free image ops, sparsemax, CTC and YOLO (lower_ops.go).
	gorgoniaop.ByIndicesOp: (*compiler).take, gorgoniaop.ByIndicesOpDiffOp: (*compiler).takeGrad, gorgoniaop.AtOp: (*compiler).at,
	gorgoniaop.TensordotOp: (*compiler).tensordot, gorgoniaop.DiagFlatOp: (*compiler).diagFlat, gorgoniaop.Iop: (*compiler).identity,
	gorgoniaop.UpsampleOp: (*compiler).upsample, gorgoniaop.UpsampleDiffOp: (*compiler).upsampleGrad,
	gorgoniaop.SparsemaxOp: (*compiler).sparsemax, gorgoniaop.SparsemaxDiffOp: (*compiler).sparsemaxGrad,
	gorgoniaop.MinBetween: (*compiler).between, gorgoniaop.MaxBetween: (*compiler).between,
	gorgoniaop.CtcLossOp: (*compiler).ctcLoss, gorgoniaop.CtcLossDiffOp: (*compiler).ctcLossGrad, gorgoniaop.YoloOp: (*compiler).yolo,

	// Convolutions and pooling (lower_conv.go).
	gorgoniaop.Im2colOp: (*compiler).im2col, gorgoniaop.Col2imOp: (*compiler).col2im, gorgoniaop.MaxPoolOp: (*compiler).pool,
	gorgoniaop.MaxPoolDiffOp: (*compiler).poolGrad, gorgoniaop.AvgPoolOp: (*compiler).pool, gorgoniaop.AvgPoolDiffOp: (*compiler).poolGrad,
	gorgoniaop.GlobalAveragePoolOp: (*compiler).globalAvgPool,
}

// newBuf registers a virtual buffer.
func (c *compiler) newBuf(dt backend.DType, n int, persistent bool, name string) *vbuf {
	b := &vbuf{dt: dt, n: max(n, 1), persistent: persistent, def: -1, last: -1, name: name}
	c.vbufs = append(c.vbufs, b)
	return b
}

// emit appends a kernel to the program.
func (c *compiler) emit(k backend.Kernel) { c.kernels = append(c.kernels, k) }

// newVal gives n a fresh buffer of its shape and type: a temporary, or
// resident (persistent) to the end of the run.
func (c *compiler) newVal(n *G.Node, persistent bool) (*val, error) {
	dt, ok := dtypeOf(n.Dtype())
	if !ok {
		return nil, fmt.Errorf("program: node %q holds %v: only float32, float64, integers and booleans are supported", n.Name(), n.Dtype())
	}
	v := &val{shape: n.Shape(), size: n.DataSize()} // Shape is a copy
	v.vb = c.newBuf(dt, v.size, persistent, n.Name())
	c.vals[n] = v
	c.owns[n] = true
	return v, nil
}

// view makes n's value a window of base's buffer at element offset off.
func (c *compiler) view(n *G.Node, base *val, off int) {
	c.vals[n] = &val{shape: n.Shape(), size: n.DataSize(), vb: base.vb, off: base.off + off}
}

var dtypes = map[tensor.Dtype]backend.DType{tensor.Float32: backend.Float32, tensor.Float64: backend.Float64}

// constant makes n's value at Compile a resident buffer of its own: a
// constant, or a parameter's starting value.
func (c *compiler) constant(n *G.Node) error {
	v, err := c.newVal(n, true)
	if err != nil {
		return err
	}
	v.vb.init, err = hostData(n)
	return err
}

// size lowers gorgonia.SizeOf: the length of an axis of its argument, known
// at compile time.
func (c *compiler) size(n *G.Node, in []*val) error {
	axis, err := gorgoniaop.IntField(n.Op(), "axis")
	if err != nil {
		return err
	}
	v := 1.0
	if s := in[0].shape; len(s) > 0 {
		if axis < 0 || axis >= len(s) {
			return fmt.Errorf("size of axis %d of shape %v", axis, s)
		}
		v = float64(s[axis])
	}
	out, err := c.newVal(n, true)
	if err != nil {
		return err
	}
	out.vb.init = []float64{v}
	if out.vb.dt == backend.Float32 {
		out.vb.init = []float32{float32(v)}
	}
	return nil
}

var unaryOps = map[string]backend.UnaryOp{
	"abs": backend.Abs, "sign": backend.Sign, "ceil": backend.Ceil, "floor": backend.Floor,
	"sin": backend.Sin, "cos": backend.Cos, "exp": backend.Exp, "ln": backend.Log, "log2": backend.Log2,
	"neg": backend.Neg, "square": backend.Square, "sqrt": backend.Sqrt, "inv": backend.Inverse,
	"invSqrt": backend.InverseSqrt, "cube": backend.Cube, "tanh": backend.Tanh, "sigmoid": backend.Sigmoid,
	"log1p": backend.Log1p, "expm1": backend.Expm1, "softplus": backend.Softplus,
}

func (c *compiler) unary(n *G.Node, in []*val, out *val) error {
	name := fmt.Sprint(n.Op())
	uop, ok := unaryOps[name]
	if !ok {
		return fmt.Errorf("%w: unary function %q at node %q", ErrUnknownOp, name, n.Name())
	}
	if out.size != in[0].size {
		return fmt.Errorf("unary %s of %d values gives %d", name, in[0].size, out.size)
	}
	c.emit(backend.Map{Op: uop, N: out.size, Src: in[0].operand(), Dst: out.operand()})
	return nil
}

var binaryOps = map[string]backend.BinaryOp{
	"+": backend.Add, "-": backend.Sub, "⊙": backend.Mul, "÷": backend.Div, "^": backend.Pow,
	"<": backend.Lt, ">": backend.Gt, "<=": backend.Le, ">=": backend.Ge, "==": backend.Eq, "!=": backend.Ne,
}

func (c *compiler) binary(n *G.Node, in []*val, out *val) error {
	sym, _, _ := strings.Cut(fmt.Sprint(n.Op()), " ")
	bop, ok := binaryOps[sym]
	if !ok {
		return fmt.Errorf("%w: binary function %q at node %q", ErrUnknownOp, sym, n.Name())
	}
	if out.vb.dt == backend.Int32 { // a comparison with retSame false
		return c.compare(n, bop, in, out)
	}
	a, b := in[0], in[1]
	aScalar, bScalar, ok := scalars(a, b, out)
	if !ok {
		return fmt.Errorf("elementwise %s of shapes %v and %v into %v", sym, a.shape, b.shape, out.shape)
	}
	if bop == backend.Add && !aScalar && !bScalar && c.accumulate(n, in) {
		return nil
	}
	c.emit(backend.Zip{Op: bop, N: out.size, A: a.operand(), B: b.operand(), AScalar: aScalar, BScalar: bScalar, Dst: out.operand()})
	return nil
}

// accumulate lowers n = x + y, where y is a matrix product (its lowering
// one Gemm) and x a buffer of its own, neither read by anything else nor a
// gradient the program keeps, as that product accumulated into x's buffer
// (Beta 1), which n's value then is: Gorgonia sums a weight's gradient
// over the T steps of a recurrent network as T - 1 such additions, each a
// pass over the weight that this saves. The product moves to n's place,
// after both; its first kernel is dropped. It reports whether it did.
func (c *compiler) accumulate(n *G.Node, in []*val) bool {
	ch := c.children(n)
	if len(ch) != 2 || len(in) != 2 || in[0].size != in[1].size {
		return false
	}
	for _, o := range [2][2]int{{0, 1}, {1, 0}} {
		x, y, xv, yv := ch[o[0]], ch[o[1]], in[o[0]], in[o[1]]
		if c.users[x] != 1 || c.users[y] != 1 || !c.owns[x] || xv.vb.persistent || xv.off != 0 ||
			len(c.grads[x]) > 0 || len(c.grads[y]) > 0 || c.inputs[x] {
			continue
		}
		span, ok := c.spans[y]
		if !ok || span[1]-span[0] != 1 {
			continue
		}
		g, ok := c.kernels[span[0]].(backend.Gemm)
		if !ok || g.Batches() != 1 || g.Beta != 0 || g.C.Buf != backend.Buffer(yv.vb) || g.C.Off != yv.off || g.LDC != g.N || g.M*g.N != yv.size {
			continue
		}
		c.kernels[span[0]] = nil // dropKernels removes it
		g.C, g.Beta = xv.operand(), 1
		c.emit(g)
		c.view(n, xv, 0)
		return true
	}
	return false
}

// dropKernels removes the kernels that accumulate replaced (nil).
func (c *compiler) dropKernels() {
	kept := c.kernels[:0]
	for _, k := range c.kernels {
		if k != nil {
			kept = append(kept, k)
		}
	}
	c.kernels = kept
}

// scalars says which operand of an elementwise binary op into out is a
// scalar taken for every element (neither, where both have out's size),
// and whether their sizes fit out at all.
func scalars(a, b, out *val) (aScalar, bScalar, ok bool) {
	switch {
	case a.size == out.size && b.size == out.size:
		return false, false, true
	case a.size == 1 && b.size == out.size:
		return true, false, true
	case b.size == 1 && a.size == out.size:
		return false, true, true
	}
	return false, false, false
}

func (c *compiler) linAlg(n *G.Node, in []*val, out *val) error {
	op := n.Op()
	kind, tA, tB, err := gorgoniaop.LinAlgOf(op)
	if err != nil {
		return err
	}
	a, b := in[0], in[1]
	// Vectors are taken as matrices: a matrix times a vector is a GEMM
	// with one column, a dot product a row times a column, an outer
	// product a column times a row.
	as, bs := a.shape, b.shape
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
	g := backend.Gemm{TransA: tA, TransB: tB, Alpha: 1, M: ar, K: ac, N: bc, LDA: ac, LDB: bc, A: a.operand(), B: b.operand(), C: out.operand()}
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
	if g.Batches()*g.M*g.N != out.size {
		return fmt.Errorf("%v: product of %v and %v has %d values, the node %v", op, a.shape, b.shape, g.Batches()*g.M*g.N, out.shape)
	}
	c.emit(g)
	return nil
}

// thinProduct reports whether g is the matrix product A^T B, and returns
// A's and B's values.
func (c *compiler) thinProduct(g *G.Node) (a, b *val, ok bool) {
	if _, fused := c.rewrites[g]; fused {
		return nil, nil, false
	}
	if op := g.Op(); op == nil || gorgoniaop.OpName(op) != gorgoniaop.LinAlgBinOp {
		return nil, nil, false
	}
	if kind, tA, tB, err := gorgoniaop.LinAlgOf(g.Op()); err != nil || kind != gorgoniaop.MatMul || !tA || tB {
		return nil, nil, false
	}
	ch := c.children(g)
	a, b = c.vals[ch[0]], c.vals[ch[1]]
	if a == nil || b == nil || len(a.shape) != 2 || len(b.shape) != 2 {
		return nil, nil, false
	}
	return a, b, true
}

// reduce lowers Sum and Max along axes: runs of adjacent axes are reduced
// at once, from the last run to the first.
func (c *compiler) reduce(n *G.Node, in []*val, out *val, rop backend.ReduceOp) error {
	along, err := gorgoniaop.IntsField(n.Op(), "along")
	if err != nil {
		return err
	}
	src := in[0]
	shape := src.shape.Clone()
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
			return fmt.Errorf("reduction along %v of shape %v", along, src.shape)
		case l >= 0 && runs[l].hi == a:
			runs[l].hi = a + 1
		default:
			runs = append(runs, run{a, a + 1})
		}
	}
	cur := src.operand()
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		outer, mid, inner := shape[:r.lo].TotalSize(), shape[r.lo:r.hi].TotalSize(), shape[r.hi:].TotalSize()
		dst := out.operand()
		if i > 0 {
			dst = backend.At(c.newBuf(out.vb.dt, outer*inner, false, n.Name()+".partial"), 0)
		}
		c.emit(backend.Reduce{Op: rop, Outer: outer, Mid: mid, Inner: inner, Src: cur, Dst: dst})
		shape = append(shape[:r.lo:r.lo], shape[r.hi:]...)
		cur = dst
	}
	if shape.TotalSize() != out.size {
		return fmt.Errorf("reduction of %v along %v gives %d values, the node %v", src.shape, along, shape.TotalSize(), out.shape)
	}
	return nil
}

// softmax lowers SoftMax / LogSoftMax, and their gradient softmaxDiffOp
// (arguments x, y = softmax(x), dy).
func (c *compiler) softmax(n *G.Node, in []*val, out *val) error {
	op := n.Op()
	isLog, err1 := gorgoniaop.BoolField(op, "isLog")
	axis, err2 := gorgoniaop.IntField(op, "axis")
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	x := in[0]
	if axis == -1 { // the axis gorgonia's softmaxOp picks for the shape
		axis = x.shape.Dims() - 1
		if x.shape.IsColVec() || (x.shape.IsVector() && !x.shape.IsRowVec()) {
			axis = 0
		}
	}
	if axis < 0 || axis >= x.shape.Dims() {
		return fmt.Errorf("softmax along axis %d of shape %v", axis, x.shape)
	}
	outer, inner := x.shape[:axis].TotalSize(), x.shape[axis+1:].TotalSize()
	if gorgoniaop.OpName(op) == gorgoniaop.SoftmaxOp {
		c.emit(backend.Softmax{Log: isLog, Outer: outer, Axis: x.shape[axis], Inner: inner, Src: x.operand(), Dst: out.operand()})
		return nil
	}
	if len(in) != 3 || in[1].size != x.size || in[2].size != x.size {
		return fmt.Errorf("softmax gradient of %d arguments", len(in))
	}
	c.emit(backend.SoftmaxGrad{Log: isLog, Outer: outer, Axis: x.shape[axis], Inner: inner, Y: in[1].operand(), DY: in[2].operand(), DX: out.operand()})
	return nil
}

// repeat lowers gorgonia's repeatOp (broadcasting): every element of the
// argument is repeated along one axis, as tensor.Repeat does.
func (c *compiler) repeat(n *G.Node, in []*val, out *val) error {
	along, err := gorgoniaop.IntField(n.Op(), "along")
	if err != nil {
		return err
	}
	x := in[0]
	os := out.shape
	if along < 0 || along >= len(os) {
		return fmt.Errorf("repeat along axis %d into shape %v", along, os)
	}
	// The argument's shape, padded with unit axes to the output's rank.
	xs := make(tensor.Shape, len(os))
	for i := range xs {
		xs[i] = 1
	}
	copy(xs, x.shape)
	if xs.TotalSize() != x.size {
		return fmt.Errorf("repeat of shape %v into %v", x.shape, os)
	}
	rep := os[along] / xs[along]
	want := slices.Clone(xs) // the argument's shape, rep times as long along the axis
	want[along] *= rep
	if !slices.Equal(want, os) {
		return fmt.Errorf("repeat of shape %v into %v along %d", x.shape, os, along)
	}
	// Split the repeated axis into (xs[along], rep): the copy reads the
	// same element rep times (source stride 0).
	xst, ost := xs.CalcStrides(), os.CalcStrides()
	ds := slices.Insert(ost, along+1, ost[along])
	ds[along] *= rep
	c.emit(backend.Copy{Shape: slices.Insert(xs, along+1, rep), Src: x.operand(), SrcStrides: slices.Insert(xst, along+1, 0), Dst: out.operand(), DstStrides: ds})
	return nil
}

func (c *compiler) transpose(n *G.Node, in []*val, out *val) error {
	pattern, err := gorgoniaop.IntsField(n.Op(), "pattern")
	if err != nil {
		return err
	}
	x := in[0]
	if len(pattern) != len(x.shape) {
		return fmt.Errorf("transpose %v of shape %v", pattern, x.shape)
	}
	xst := x.shape.CalcStrides()
	ss := make([]int, len(pattern))
	for i, p := range pattern {
		if p < 0 || p >= len(x.shape) || out.shape[i] != x.shape[p] {
			return fmt.Errorf("transpose %v of shape %v into %v", pattern, x.shape, out.shape)
		}
		ss[i] = xst[p]
	}
	c.emit(backend.Copy{Shape: out.shape, Src: x.operand(), SrcStrides: ss, Dst: out.operand(), DstStrides: out.shape.CalcStrides()})
	return nil
}

func (c *compiler) slice(n *G.Node, in []*val) error {
	x := in[0]
	w, err := gorgoniaop.SliceOf(n.Op(), x.shape)
	if err != nil {
		return err
	}
	if w.Shape.TotalSize() != n.DataSize() {
		return fmt.Errorf("slice of %v gives %v, the node %v", x.shape, w.Shape, n.Shape())
	}
	if w.Contiguous {
		c.view(n, x, w.Off)
		return nil
	}
	out, err := c.newVal(n, false)
	if err != nil {
		return err
	}
	c.emit(backend.Copy{Shape: w.Shape, Src: backend.At(x.vb, x.off+w.Off), SrcStrides: w.Strides, Dst: out.operand(), DstStrides: w.Shape.CalcStrides()})
	return nil
}

// sliceIncr lowers the gradient of a slice: zeros of the sliced tensor's
// shape with the slice's window set to the incoming gradient.
func (c *compiler) sliceIncr(n *G.Node, in []*val, out *val) error {
	x, g := in[0], in[1]
	w, err := gorgoniaop.SliceOf(n.Op(), x.shape)
	if err != nil {
		return err
	}
	if w.Shape.TotalSize() != g.size {
		return fmt.Errorf("slice gradient of %d values into a window of %v", g.size, w.Shape)
	}
	c.emit(backend.Fill{N: out.size, Dst: out.operand()})
	c.emit(backend.Copy{Shape: w.Shape, Src: g.operand(), SrcStrides: w.Shape.CalcStrides(), Dst: backend.At(out.vb, out.off+w.Off), DstStrides: w.Strides})
	return nil
}

func (c *compiler) concat(n *G.Node, in []*val, out *val) error {
	axis, err := gorgoniaop.IntField(n.Op(), "axis")
	if err != nil {
		return err
	}
	if axis < 0 || axis >= len(out.shape) {
		return fmt.Errorf("concatenation along axis %d into %v", axis, out.shape)
	}
	ost := out.shape.CalcStrides()
	at := 0
	for _, x := range in {
		if len(x.shape) != len(out.shape) {
			return fmt.Errorf("concatenating shape %v into %v", x.shape, out.shape)
		}
		c.emit(backend.Copy{Shape: x.shape, Src: x.operand(), SrcStrides: x.shape.CalcStrides(), Dst: backend.At(out.vb, out.off+at*ost[axis]), DstStrides: ost})
		at += x.shape[axis]
	}
	if at != out.shape[axis] {
		return fmt.Errorf("concatenation of %d along axis %d into %v", at, axis, out.shape)
	}
	return nil
}
