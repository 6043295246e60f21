package lower

import (
	"fmt"
	"reflect"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
)

// The lowerings of Gorgonia's ops beyond those of orthonet's models:
// indexing (ByIndices and its gradient, At), contractions (Tensordot),
// DiagFlat, Upsample2D, Sparsemax, MinBetween and MaxBetween, the CTC loss,
// YOLOv3's decoding, and Gorgonia's identity op. The README's op table says
// which op types compile and which are refused, and why.

// take lowers ByIndices: the slices of x along the op's axis at the
// indices (an integer vector).
func (l *Lowering) take(n *G.Node, in []*Value, out *Value) error {
	x, idx := in[0], in[1]
	outer, axis, inner, err := aroundAxis(n.Op(), x.Shape)
	if err != nil {
		return err
	}
	if idx.Buf.Type != backend.Int32 {
		return fmt.Errorf("ByIndices: the indices hold %v, want integers", idx.Buf.Type)
	}
	if outer*idx.Size*inner != out.Size {
		return fmt.Errorf("ByIndices of %v at %d indices gives %d values, the node %v", x.Shape, idx.Size, outer*idx.Size*inner, out.Shape)
	}
	l.Emit(backend.Take{Outer: outer, Axis: axis, Inner: inner, N: idx.Size, Indices: idx.Operand(), Src: x.Operand(), Dst: out.Operand()})
	return nil
}

// takeGrad lowers ByIndices' gradient (arguments x, the gradient of the
// result, the indices): a scatter-add into zeros of x's shape.
func (l *Lowering) takeGrad(n *G.Node, in []*Value, out *Value) error {
	x, dy, idx := in[0], in[1], in[2]
	outer, axis, inner, err := aroundAxis(n.Op(), x.Shape)
	if err != nil {
		return err
	}
	if idx.Buf.Type != backend.Int32 || outer*idx.Size*inner != dy.Size || out.Size != x.Size {
		return fmt.Errorf("ByIndices' gradient of %v at %d indices from a gradient of %v", x.Shape, idx.Size, dy.Shape)
	}
	l.Emit(backend.TakeGrad{Outer: outer, Axis: axis, Inner: inner, N: idx.Size, Indices: idx.Operand(), DY: dy.Operand(), DX: out.Operand()})
	return nil
}

// aroundAxis splits shape around the op's axis: the elements before it,
// along it and after it.
func aroundAxis(op G.Op, shape tensor.Shape) (outer, axis, inner int, err error) {
	a, err := gorgoniaop.IntField(op, "axis")
	if err != nil {
		return 0, 0, 0, err
	}
	if a < 0 || a >= len(shape) {
		return 0, 0, 0, fmt.Errorf("axis %d of shape %v", a, shape)
	}
	return shape[:a].TotalSize(), shape[a], shape[a+1:].TotalSize(), nil
}

// at lowers At: the element at the op's coordinates, copied.
func (l *Lowering) at(n *G.Node, in []*Value, out *Value) error {
	coords, err := gorgoniaop.IntsField(n.Op(), "coordinates")
	if err != nil {
		return err
	}
	x := in[0]
	if len(coords) != len(x.Shape) {
		return fmt.Errorf("coordinates %v of At outside shape %v", coords, x.Shape)
	}
	off, strides := 0, x.Shape.CalcStrides()
	for i, co := range coords {
		if co < 0 || co >= x.Shape[i] {
			return fmt.Errorf("coordinates %v of At outside shape %v", coords, x.Shape)
		}
		off += co * strides[i]
	}
	l.Emit(backend.Copy{Src: backend.At(x.Buf, x.Off+off), Dst: out.Operand()})
	return nil
}

// identity lowers Gorgonia's Iop: a copy.
func (l *Lowering) identity(n *G.Node, in []*Value, out *Value) error {
	if in[0].Size != out.Size {
		return fmt.Errorf("identity of %v into %v", in[0].Shape, out.Shape)
	}
	l.Emit(backend.Copy{Shape: []int{out.Size}, Src: in[0].Operand(), SrcStrides: []int{1}, Dst: out.Operand(), DstStrides: []int{1}})
	return nil
}

// tensordot lowers Tensordot: a's free axes and b's are kept in order, the
// contracted axes paired in the order given; a is copied to (free,
// contracted), b to (contracted, free) where they are not laid out so
// already, and one GEMM multiplies them.
func (l *Lowering) tensordot(n *G.Node, in []*Value, out *Value) error {
	f := gorgoniaop.FieldsOf(n.Op())
	aAxes, bAxes := f.Ints("aAxes"), f.Ints("bAxes")
	if err := f.Err(); err != nil {
		return err
	}
	a, b := in[0], in[1]
	if len(aAxes) != len(bAxes) {
		return fmt.Errorf("tensordot over axes %v of %v and %v of %v", aAxes, a.Shape, bAxes, b.Shape)
	}
	contract := func(s tensor.Shape, axes []int) (free []int, err error) {
		for _, ax := range axes {
			if ax < 0 || ax >= len(s) {
				return nil, fmt.Errorf("tensordot over axis %d of shape %v", ax, s)
			}
		}
		for i := range s {
			if !slices.Contains(axes, i) {
				free = append(free, i)
			}
		}
		return free, nil
	}
	freeA, err := contract(a.Shape, aAxes)
	if err != nil {
		return err
	}
	freeB, err := contract(b.Shape, bAxes)
	if err != nil {
		return err
	}
	k := 1
	for i, ax := range aAxes {
		if a.Shape[ax] != b.Shape[bAxes[i]] {
			return fmt.Errorf("tensordot pairs axis %d of %v with axis %d of %v", ax, a.Shape, bAxes[i], b.Shape)
		}
		k *= a.Shape[ax]
	}
	m, nn := a.Size/max(k, 1), b.Size/max(k, 1)
	if m*nn != out.Size {
		return fmt.Errorf("tensordot of %v and %v gives %d values, the node %v", a.Shape, b.Shape, m*nn, out.Shape)
	}
	pa := l.permuted(n, a, append(freeA, aAxes...))
	pb := l.permuted(n, b, append(slices.Clone(bAxes), freeB...))
	l.Emit(backend.Gemm{Alpha: 1, M: m, N: nn, K: k, A: pa, B: pb, C: out.Operand(), LDA: max(k, 1), LDB: max(nn, 1), LDC: max(nn, 1)})
	return nil
}

// permuted returns v's elements with its axes in the order perm: v itself
// where perm is the identity, else a copy in a temporary of n's type.
func (l *Lowering) permuted(n *G.Node, v *Value, perm []int) backend.Operand {
	if slices.IsSorted(perm) {
		return v.Operand()
	}
	shape, ss := make([]int, len(perm)), make([]int, len(perm))
	st := v.Shape.CalcStrides()
	for i, p := range perm {
		shape[i], ss[i] = v.Shape[p], st[p]
	}
	dst := backend.At(l.NewBuffer(v.Buf.Type, v.Size, false, n.Name()+".permuted"), 0)
	l.Emit(backend.Copy{Shape: shape, Src: v.Operand(), SrcStrides: ss, Dst: dst, DstStrides: tensor.Shape(shape).CalcStrides()})
	return dst
}

// diagFlat lowers DiagFlat: zeros, and the flattened argument on the
// diagonal.
func (l *Lowering) diagFlat(n *G.Node, in []*Value, out *Value) error {
	x := in[0]
	if out.Size != x.Size*x.Size {
		return fmt.Errorf("DiagFlat of %d values into %v", x.Size, out.Shape)
	}
	l.Emit(backend.Fill{N: out.Size, Dst: out.Operand()})
	l.Emit(backend.Copy{Shape: []int{x.Size}, Src: x.Operand(), SrcStrides: []int{1}, Dst: out.Operand(), DstStrides: []int{x.Size + 1}})
	return nil
}

// upsample lowers Upsample2D: each pixel of a (B, C, H, W) tensor repeated
// f x f times (f the op's stride plus one), as a copy that reads every
// source element f^2 times.
func (l *Lowering) upsample(n *G.Node, in []*Value, out *Value) error {
	f, err := upsampleFactor(n.Op())
	if err != nil {
		return err
	}
	x := in[0]
	if len(x.Shape) != 4 || out.Size != x.Size*f*f {
		return fmt.Errorf("Upsample2D by %d of %v into %v", f, x.Shape, out.Shape)
	}
	rows, w := x.Shape[:3].TotalSize(), x.Shape[3]
	l.Emit(backend.Copy{Shape: []int{rows, f, w, f}, Src: x.Operand(), SrcStrides: []int{w, 0, 1, 0},
		Dst: out.Operand(), DstStrides: []int{f * w * f, w * f, f, 1}})
	return nil
}

// upsampleGrad lowers Upsample2D's gradient (arguments x, the result, its
// gradient): each f x f block of the gradient summed, along its rows and
// then down its columns.
func (l *Lowering) upsampleGrad(n *G.Node, in []*Value, out *Value) error {
	f, err := upsampleFactor(n.Op())
	if err != nil {
		return err
	}
	x, dy := in[0], in[2]
	if len(x.Shape) != 4 || dy.Size != x.Size*f*f || out.Size != x.Size {
		return fmt.Errorf("Upsample2D's gradient by %d of %v from %v", f, x.Shape, dy.Shape)
	}
	rows, w := x.Shape[:3].TotalSize(), x.Shape[3]
	tmp := backend.At(l.NewBuffer(out.Buf.Type, rows*f*w, false, n.Name()+".rows"), 0)
	l.Emit(backend.Reduce{Op: backend.Sum, Outer: rows * f * w, Mid: f, Inner: 1, Src: dy.Operand(), Dst: tmp})
	l.Emit(backend.Reduce{Op: backend.Sum, Outer: rows, Mid: f, Inner: w, Src: tmp, Dst: out.Operand()})
	return nil
}

// upsampleFactor returns how many times Upsample2D repeats each pixel
// along each axis: its op's stride plus one.
func upsampleFactor(op G.Op) (int, error) {
	s, err := gorgoniaop.IntField(op, "stride")
	if err != nil {
		return 0, err
	}
	if s < 0 {
		return 0, fmt.Errorf("Upsample2D with stride %d", s)
	}
	return s + 1, nil
}

// sparsemax lowers Sparsemax along the last axis. Along another axis
// gorgonia v0.9.18 computes it wrong (its Do transposes with an invalid
// pattern and never back, and its gradient op sums along the last axis of
// a matrix whatever the axis), so the compiler refuses it.
func (l *Lowering) sparsemax(n *G.Node, in []*Value, out *Value) error {
	axis, err := gorgoniaop.IntField(n.Op(), "axis")
	if err != nil {
		return err
	}
	x := in[0]
	d := len(x.Shape)
	if d == 0 || (axis != -1 && axis != d-1) {
		return fmt.Errorf("sparsemax along axis %d of shape %v: the compiler takes sparsemax along the last axis only, the only axis along which gorgonia v0.9.18 computes it and its gradient right; transpose the axis to the end first", axis, x.Shape)
	}
	cols := x.Shape[d-1]
	l.Emit(backend.Sparsemax{Rows: x.Size / cols, Cols: cols, Src: x.Operand(), Dst: out.Operand()})
	return nil
}

// sparsemaxGrad lowers sparsemax's gradient (arguments the sparsemax y and
// the gradient of y), along y's last axis.
func (l *Lowering) sparsemaxGrad(n *G.Node, in []*Value, out *Value) error {
	y, dy := in[0], in[1]
	if len(y.Shape) == 0 || dy.Size != y.Size || out.Size != y.Size {
		return fmt.Errorf("sparsemax's gradient of %v from %v", y.Shape, dy.Shape)
	}
	cols := y.Shape[len(y.Shape)-1]
	l.Emit(backend.SparsemaxGrad{Rows: y.Size / cols, Cols: cols, Y: y.Operand(), DY: dy.Operand(), DX: out.Operand()})
	return nil
}

// between lowers MinBetween and MaxBetween: elementwise.
func (l *Lowering) between(n *G.Node, in []*Value, out *Value) error {
	a, b := in[0], in[1]
	if a.Size != out.Size || b.Size != out.Size {
		return fmt.Errorf("%v of shapes %v and %v", n.Op(), a.Shape, b.Shape)
	}
	op := backend.Min2
	if gorgoniaop.OpName(n.Op()) == gorgoniaop.MaxBetween {
		op = backend.Max2
	}
	l.Emit(backend.Zip{Op: op, N: out.Size, A: a.Operand(), B: b.Operand(), Dst: out.Operand()})
	return nil
}

// ctc reads the CTC loss's sizes from its arguments (log-probabilities,
// targets, input lengths, target lengths).
func ctc(n *G.Node, in []*Value) (backend.CTC, error) {
	lp, targets, il, tl := in[0], in[1], in[2], in[3]
	for _, v := range in[1:4] {
		if v.Buf.Type != backend.Int32 {
			return backend.CTC{}, fmt.Errorf("CTCLoss: targets and lengths hold %v, want integers", v.Buf.Type)
		}
	}
	if len(lp.Shape) != 3 {
		return backend.CTC{}, fmt.Errorf("CTCLoss of log-probabilities of shape %v, want (time, batch, labels)", lp.Shape)
	}
	c := backend.CTC{Time: lp.Shape[0], Batch: lp.Shape[1], Labels: lp.Shape[2], Entries: targets.Size}
	if il.Size != c.Batch || tl.Size != c.Batch {
		return c, fmt.Errorf("CTCLoss of a batch of %d with %d input lengths and %d target lengths", c.Batch, il.Size, tl.Size)
	}
	switch len(targets.Shape) {
	case 1:
	case 2:
		if targets.Shape[0] != c.Batch {
			return c, fmt.Errorf("CTCLoss of a batch of %d with targets of shape %v", c.Batch, targets.Shape)
		}
		c.Width = targets.Shape[1]
	default:
		return c, fmt.Errorf("CTCLoss with targets of shape %v, want a vector or a matrix", targets.Shape)
	}
	reduction, err := gorgoniaop.IntField(n.Op(), "reduction")
	if err != nil {
		return c, err
	}
	if reduction != int(G.ReductionMean) && reduction != int(G.ReductionSum) {
		return c, fmt.Errorf("CTCLoss with reduction %d", reduction)
	}
	c.Mean = reduction == int(G.ReductionMean)
	return c, nil
}

// ctcLoss lowers CTCLoss (on the CPU only: its kernel has no CUDA
// implementation yet, and the CUDA backend refuses it at Compile).
func (l *Lowering) ctcLoss(n *G.Node, in []*Value, out *Value) error {
	k, err := ctc(n, in)
	if err != nil {
		return err
	}
	l.Emit(backend.CTCLoss{CTC: k, LogProbs: in[0].Operand(), Targets: in[1].Operand(), InputLengths: in[2].Operand(),
		TargetLengths: in[3].Operand(), Loss: out.Operand()})
	return nil
}

// ctcLossGrad lowers CTCLoss's gradient (the loss's arguments and the
// gradient of the loss).
func (l *Lowering) ctcLossGrad(n *G.Node, in []*Value, out *Value) error {
	k, err := ctc(n, in)
	if err != nil {
		return err
	}
	if in[4].Size != 1 || out.Size != in[0].Size {
		return fmt.Errorf("CTCLoss's gradient from a gradient of %v", in[4].Shape)
	}
	l.Emit(backend.CTCLossGrad{CTC: k, LogProbs: in[0].Operand(), Targets: in[1].Operand(), InputLengths: in[2].Operand(),
		TargetLengths: in[3].Operand(), GradOut: in[4].Operand(), DX: out.Operand()})
	return nil
}

// yolo lowers YOLOv3's decoding outside training. Gorgonia's training mode
// (YOLOv3 given targets) matches boxes to targets by IoU on the host in
// float32 and defines no gradient: the compiler refuses it.
func (l *Lowering) yolo(n *G.Node, in []*Value, out *Value) error {
	op := n.Op()
	train, err := gorgoniaop.BoolField(op, "trainMode")
	if err != nil {
		return err
	}
	if train {
		return fmt.Errorf("YOLOv3 in training mode (given targets): gorgonia v0.9.18 matches its boxes to the targets on the host, in float32, and defines no gradient for it; the compiler takes YOLOv3 without targets (decoding) only")
	}
	f := gorgoniaop.FieldsOf(op)
	masks, netSize, classes := f.Ints("masks"), f.Int("dimensions"), f.Int("numClasses")
	if err := f.Err(); err != nil {
		return err
	}
	af := gorgoniaop.Field(op, "anchors")
	if af.Kind() != reflect.Slice || af.Type().Elem().Kind() != reflect.Float32 {
		return fmt.Errorf("op %T has no []float32 field \"anchors\" (gorgonia's internals changed?)", op)
	}
	x := in[0]
	boxes, attrs := len(masks), 5+classes
	if len(x.Shape) != 4 || boxes == 0 || x.Shape[1] != boxes*attrs || x.Shape[2] != x.Shape[3] || x.Shape[2] == 0 {
		return fmt.Errorf("YOLOv3 of %d boxes of %d attributes on a grid of shape %v, want (batch, %d, grid, grid)", boxes, attrs, x.Shape, boxes*attrs)
	}
	grid := x.Shape[2]
	for _, m := range masks {
		if m < 0 || m >= af.Len()/2 {
			return fmt.Errorf("YOLOv3 mask %v for %d anchors", masks, af.Len()/2)
		}
	}
	stride := netSize / grid
	if stride < 1 {
		return fmt.Errorf("YOLOv3 of a network of size %d on a grid of %d", netSize, grid)
	}
	// Gorgonia takes the anchors of the first len(masks) pairs (not those
	// the masks name), divided by the stride in the data's type.
	anchors := l.NewBuffer(out.Buf.Type, 2*boxes, true, n.Name()+".anchors")
	a32, a64 := make([]float32, 2*boxes), make([]float64, 2*boxes)
	for i := range a32 {
		v := float32(af.Index(i).Float())
		a32[i], a64[i] = v/float32(stride), float64(v)/float64(stride)
	}
	anchors.Init = a64
	if out.Buf.Type == backend.Float32 {
		anchors.Init = a32
	}
	if out.Size != x.Size {
		return fmt.Errorf("YOLOv3 of %v into %v", x.Shape, out.Shape)
	}
	l.Emit(backend.YOLODecode{Batch: x.Shape[0], Boxes: boxes, Attrs: attrs, Grid: grid, Stride: float64(stride),
		Anchors: backend.At(anchors, 0), Src: x.Operand(), Dst: out.Operand()})
	return nil
}

// compare lowers a comparison whose result is booleans (gorgonia's
// elemBinOp with retSame false): 0 or 1 in an Int32 buffer.
func (l *Lowering) compare(n *G.Node, bop backend.BinaryOp, in []*Value, out *Value) error {
	a, b := in[0], in[1]
	aScalar, bScalar, ok := scalars(a, b, out)
	if !ok {
		return fmt.Errorf("comparison %v of shapes %v and %v into %v", n.Op(), a.Shape, b.Shape, out.Shape)
	}
	l.Emit(backend.Compare{Op: bop, N: out.Size, A: a.Operand(), B: b.Operand(), AScalar: aScalar, BScalar: bScalar, Dst: out.Operand()})
	return nil
}
