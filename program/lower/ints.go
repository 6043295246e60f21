package lower

import (
	"fmt"
	"math"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
)

// Integer and boolean values. A program keeps integers (ByIndices' indices,
// CTCLoss's targets and lengths) and booleans (the results of comparisons
// built with retSame false) in Int32 buffers, booleans as 0 and 1. An
// integer leaf is an input (SetInput takes []int, []int32, []int64 or, for
// a boolean one, []bool) or a constant; Read reads such values into
// []int32, []int, []int64 or []bool. Only the ops of intOperands take them.

var dtypes = map[tensor.Dtype]backend.DType{tensor.Float32: backend.Float32, tensor.Float64: backend.Float64}

// DTypeOf returns the buffer type of a node's values of type dt: Float32,
// Float64, or Int32 for integers and booleans.
func DTypeOf(dt tensor.Dtype) (backend.DType, bool) {
	if d, ok := dtypes[dt]; ok {
		return d, true
	}
	switch dt {
	case tensor.Int, tensor.Int32, tensor.Int64, tensor.Bool:
		return backend.Int32, true
	}
	return 0, false
}

// IsFloat reports whether a node of type dt holds floats.
func IsFloat(dt tensor.Dtype) bool { return dt == tensor.Float32 || dt == tensor.Float64 }

// intOperands lists the ops that take integer or boolean operands: the
// positions of their arguments that may be integers, and whether their
// result may be. Every other op takes floats only, but constants (which
// may be integers) and Reshape (a view of whatever it reshapes).
var intOperands = map[gorgoniaop.OpType]struct {
	args   []int
	result bool
}{
	gorgoniaop.ByIndicesOp:       {args: []int{1}},
	gorgoniaop.ByIndicesOpDiffOp: {args: []int{2}},
	gorgoniaop.CtcLossOp:         {args: []int{1, 2, 3}},
	gorgoniaop.CtcLossDiffOp:     {args: []int{1, 2, 3}},
	gorgoniaop.ElemBinOp:         {result: true}, // a comparison with retSame false
}

// checkInts refuses an op that is given integer or boolean operands where
// it takes floats.
func checkInts(n *G.Node, name gorgoniaop.OpType, in []*Value) error {
	allowed := intOperands[name]
	for i, v := range in {
		if v.Buf.Type == backend.Int32 && !slices.Contains(allowed.args, i) {
			return fmt.Errorf("program: node %q (op %v): argument %d holds integers or booleans, which the compiler takes only as ByIndices' indices, CTCLoss's targets and lengths, and Reshape's argument", n.Name(), n.Op(), i)
		}
	}
	if dt, ok := nodeDtype(n); ok && !IsFloat(dt) && !allowed.result {
		return fmt.Errorf("program: node %q (op %v) gives %v values: the compiler gives integers or booleans only as comparisons with retSame false", n.Name(), n.Op(), dt)
	}
	return nil
}

// nodeDtype returns the element type of n's values, if it has one: the
// statements of gorgonia's tape machine (Set, Read) have no type, and
// their Dtype panics.
func nodeDtype(n *G.Node) (dt tensor.Dtype, ok bool) {
	if n.Type() == nil {
		return dt, false
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return n.Dtype(), true
}

// intData returns a leaf's integer or boolean value as []int32, checking
// that each integer fits.
func intData(name string, data any) ([]int32, error) {
	switch d := data.(type) {
	case []int32:
		return append([]int32(nil), d...), nil
	case int32:
		return []int32{d}, nil
	case int:
		return toInt32(name, []int{d})
	case int64:
		return toInt32(name, []int64{d})
	case bool:
		return toInt32(name, []bool{d})
	}
	return toInt32(name, data)
}

// toInt32 converts []int, []int64 or []bool to a new []int32.
func toInt32(name string, data any) ([]int32, error) {
	n, ok := HostLen(data)
	if !ok {
		return nil, fmt.Errorf("program: %q holds %T, want integers or booleans", name, data)
	}
	out := make([]int32, n)
	return out, FillInt32(name, out, data)
}

// FillInt32 converts integers or booleans into dst, refusing an integer
// outside the range of int32.
func FillInt32(name string, dst []int32, data any) error {
	switch d := data.(type) {
	case []int32:
		copy(dst, d)
	case []int:
		for i, v := range d {
			if v < math.MinInt32 || v > math.MaxInt32 {
				return fmt.Errorf("program: %q: entry %d is %d, outside the range of int32", name, i, v)
			}
			dst[i] = int32(v)
		}
	case []int64:
		for i, v := range d {
			if v < math.MinInt32 || v > math.MaxInt32 {
				return fmt.Errorf("program: %q: entry %d is %d, outside the range of int32", name, i, v)
			}
			dst[i] = int32(v)
		}
	case []bool:
		for i, v := range d {
			dst[i] = 0
			if v {
				dst[i] = 1
			}
		}
	default:
		return fmt.Errorf("program: %q takes []int, []int32, []int64 or []bool, got %T", name, data)
	}
	return nil
}

// HostData returns a copy of a leaf's value as a host slice: []float32,
// []float64, or, for integers and booleans, []int32.
func HostData(n *G.Node) (any, error) {
	data, ok, err := gorgoniaop.FloatData(n)
	switch {
	case err != nil:
		return nil, fmt.Errorf("program: %w", err)
	case ok:
		return data, nil
	case !IsFloat(n.Dtype()):
		return intData(n.Name(), n.Value().Data())
	}
	return nil, fmt.Errorf("program: leaf %q holds %T, want float32 or float64 values", n.Name(), n.Value().Data())
}

// HostLen returns the length of a host slice of values a program takes
// or gives: []float32, []float64, []int32, []int, []int64 or []bool.
func HostLen(a any) (int, bool) {
	switch d := a.(type) {
	case []float32:
		return len(d), true
	case []float64:
		return len(d), true
	case []int32:
		return len(d), true
	case []int:
		return len(d), true
	case []int64:
		return len(d), true
	case []bool:
		return len(d), true
	}
	return 0, false
}
