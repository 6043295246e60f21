package gorgoniaop

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// Window is a slice's view of the tensor it slices.
type Window struct {
	Shape   tensor.Shape
	Strides []int
	Off     int
	// Contiguous: leading rows (the axes before the sliced one of length 1), step 1
	Contiguous bool
}

// SliceOf returns the window of a sliceOp (or of the slice inside a
// sliceIncrOp) on a tensor of shape.
func SliceOf(op G.Op, shape tensor.Shape) (Window, error) {
	axis, err := IntField(op, "along")
	if err != nil {
		return Window{}, err
	}
	if axis < 0 || axis >= len(shape) {
		return Window{}, fmt.Errorf("slice along axis %d of shape %v", axis, shape)
	}
	start, end, step := 0, shape[axis], 1
	f := Field(op, "Slice")
	if !f.IsValid() {
		return Window{}, fmt.Errorf("op %T has no Slice (gorgonia's internals changed?)", op)
	}
	if s, ok := op.(interface{ IsSlice() tensor.Slice }); ok && s.IsSlice() != nil {
		sl := s.IsSlice()
		start, end, step = sl.Start(), sl.End(), max(sl.Step(), 1)
	} else if !f.IsNil() {
		return Window{}, fmt.Errorf("op %T: cannot read its slice", op)
	}
	if start < 0 || end > shape[axis] || start >= end {
		return Window{}, fmt.Errorf("slice %d:%d of axis %d of shape %v", start, end, axis, shape)
	}
	w := Window{Shape: shape.Clone(), Strides: shape.CalcStrides(), Contiguous: shape[:axis].TotalSize() == 1 && step == 1}
	w.Off = start * w.Strides[axis]
	// tensor v0.9.23 takes (end - start) / step elements, rounded down
	// (tensor.Shape.S), where Python would round up.
	w.Shape[axis], w.Strides[axis] = (end-start)/step, w.Strides[axis]*step
	return w, nil
}

// The kinds of gorgonia's linAlgBinOp (its āBinaryOperator).
const (
	MatMul = iota
	MatVecMul
	VecDot
	OuterProd
	BatchedMatMul
)

// LinAlgOf reads a linAlgBinOp's kind and whether it transposes A and B.
func LinAlgOf(op G.Op) (kind int, tA, tB bool, err error) {
	f := FieldsOf(op)
	kind, tA, tB = f.Int("āBinaryOperator"), f.Bool("transA"), f.Bool("transB")
	return kind, tA, tB, f.Err()
}

// SoftmaxOf reads a softmaxOp's (or softmaxDiffOp's) settings for an
// argument of shape x: whether it is a log-softmax, and its axis (for -1,
// the one gorgonia's softmaxOp picks for the shape).
func SoftmaxOf(op G.Op, x tensor.Shape) (isLog bool, axis int, err error) {
	f := FieldsOf(op)
	isLog, axis = f.Bool("isLog"), f.Int("axis")
	if err := f.Err(); err != nil {
		return false, 0, err
	}
	if axis == -1 {
		axis = x.Dims() - 1
		if x.IsColVec() || (x.IsVector() && !x.IsRowVec()) {
			axis = 0
		}
	}
	if axis < 0 || axis >= x.Dims() {
		return false, 0, fmt.Errorf("softmax along axis %d of shape %v", axis, x)
	}
	return isLog, axis, nil
}

// SizeOf returns the value of a sizeOp (gorgonia.SizeOf) whose argument
// has shape x: the length of the op's axis, 1 for a scalar.
func SizeOf(op G.Op, x tensor.Shape) (float64, error) {
	axis, err := IntField(op, "axis")
	if err != nil {
		return 0, err
	}
	if len(x) == 0 {
		return 1, nil
	}
	if axis < 0 || axis >= len(x) {
		return 0, fmt.Errorf("size of axis %d of shape %v", axis, x)
	}
	return float64(x[axis]), nil
}

// TransposeOf reads a transposeOp's pattern for an argument of shape x: one
// axis of x for each axis of the result.
func TransposeOf(op G.Op, x tensor.Shape) ([]int, error) {
	pattern, err := IntsField(op, "pattern")
	if err != nil {
		return nil, err
	}
	if len(pattern) != len(x) {
		return nil, fmt.Errorf("transpose %v of shape %v", pattern, x)
	}
	return pattern, nil
}

// ConvGeomOf reads an im2colOp's (or col2imOp's, which embeds one)
// geometry for images of shape x.
func ConvGeomOf(op G.Op, x tensor.Shape) (backend.ConvGeom, error) {
	if len(x) != 4 {
		return backend.ConvGeom{}, fmt.Errorf("%v of shape %v, want (batch, channels, height, width)", op, x)
	}
	g := backend.ConvGeom{B: x[0], C: x[1], H: x[2], W: x[3]}
	var errs []error
	for _, f := range []struct {
		name string
		v    *int
	}{{"h", &g.KH}, {"w", &g.KW}, {"padH", &g.PadH}, {"padW", &g.PadW}, {"strideH", &g.StrideH},
		{"strideW", &g.StrideW}, {"dilationH", &g.DilH}, {"dilationW", &g.DilW}} {
		v, err := IntField(op, f.name)
		*f.v, errs = v, append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return g, err
	}
	return g, g.Check()
}

// ColShape returns the shape of gorgonia's im2col of geometry g.
func ColShape(g backend.ConvGeom) tensor.Shape {
	oh, ow := g.Out()
	return tensor.Shape{g.B, oh, ow, g.Patch()}
}

// PoolGeomOf reads the geometry of a maxPoolOp or avgPoolOp (or their
// gradients, which embed them) pooling x into pooled. The first window
// starts at the north and west paddings, or, when four were given, at the
// south and east ones (as gorgonia's loops read them).
func PoolGeomOf(op G.Op, x, pooled tensor.Shape) (backend.PoolGeom, error) {
	if len(x) != 4 || len(pooled) != 4 || x[0] != pooled[0] || x[1] != pooled[1] {
		return backend.PoolGeom{}, fmt.Errorf("%v pooling %v into %v", op, x, pooled)
	}
	g := backend.PoolGeom{B: x[0], C: x[1], H: x[2], W: x[3], OutH: pooled[2], OutW: pooled[3]}
	var errs []error
	for _, f := range []struct {
		name string
		v    *int
	}{{"h", &g.KH}, {"w", &g.KW}, {"strideH", &g.StrideH}, {"strideW", &g.StrideW}} {
		v, err := IntField(op, f.name)
		*f.v, errs = v, append(errs, err)
	}
	pads := map[bool][2]string{false: {"padNorth", "padWest"}, true: {"padSouth", "padEast"}}
	explicit, err := BoolField(op, "explicitPadding")
	errs = append(errs, err)
	g.PadH, err = IntField(op, pads[explicit][0])
	errs = append(errs, err)
	g.PadW, err = IntField(op, pads[explicit][1])
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return g, err
	}
	return g, g.Check()
}
