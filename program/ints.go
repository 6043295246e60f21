package program

import (
	"fmt"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
	"math"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// Integer and boolean values. A program keeps integers (ByIndices' indices,
// CTCLoss's targets and lengths) and booleans (the results of comparisons
// built with retSame false) in Int32 buffers, booleans as 0 and 1. An
// integer leaf is an input (SetInput takes []int, []int32, []int64 or, for
// a boolean one, []bool) or a constant; Read reads such values into
// []int32, []int, []int64 or []bool. Only the ops of intOperands take them.

// dtypeOf returns the buffer type of a node's values.
func dtypeOf(dt tensor.Dtype) (backend.DType, bool) {
	if d, ok := dtypes[dt]; ok {
		return d, true
	}
	switch dt {
	case tensor.Int, tensor.Int32, tensor.Int64, tensor.Bool:
		return backend.Int32, true
	}
	return 0, false
}

// isFloat reports whether a node of type dt holds floats.
func isFloat(dt tensor.Dtype) bool { return dt == tensor.Float32 || dt == tensor.Float64 }

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
func checkInts(n *G.Node, name gorgoniaop.OpType, in []*val) error {
	allowed := intOperands[name]
	for i, v := range in {
		if v.vb.dt == backend.Int32 && !slices.Contains(allowed.args, i) {
			return fmt.Errorf("program: node %q (op %v): argument %d holds integers or booleans, which the compiler takes only as ByIndices' indices, CTCLoss's targets and lengths, and Reshape's argument", n.Name(), n.Op(), i)
		}
	}
	if dt, ok := nodeDtype(n); ok && !isFloat(dt) && !allowed.result {
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
	n, ok := hostLen(data)
	if !ok {
		return nil, fmt.Errorf("program: %q holds %T, want integers or booleans", name, data)
	}
	out := make([]int32, n)
	return out, fillInt32(name, out, data)
}

// fillInt32 converts integers or booleans into dst, refusing an integer
// outside the range of int32.
func fillInt32(name string, dst []int32, data any) error {
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

// intScratch returns the program's host buffer for the integer values of
// v, made once.
func (p *Program) intScratch(v *val) []int32 {
	if p.ints == nil {
		p.ints = map[*val][]int32{}
	}
	s, ok := p.ints[v]
	if !ok {
		s = make([]int32, v.size)
		p.ints[v] = s
	}
	return s
}

// setInts copies integers or booleans into the integer input v.
func (p *Program) setInts(n *G.Node, v *val, data any) error {
	if l, ok := hostLen(data); !ok || l != v.size {
		return fmt.Errorf("program: input %q takes %d integers ([]int, []int32, []int64 or []bool), got %T of %d", n.Name(), v.size, data, l)
	}
	if d, ok := data.([]int32); ok {
		return p.be.CopyIn(v.vb.phys, v.vb.physOff+v.off, d)
	}
	s := p.intScratch(v)
	if err := fillInt32(n.Name(), s, data); err != nil {
		return err
	}
	return p.be.CopyIn(v.vb.phys, v.vb.physOff+v.off, s)
}

// readInts reads the integer or boolean value v into dst.
func (p *Program) readInts(n *G.Node, v *val, dst any) error {
	if l, ok := hostLen(dst); !ok || l != v.size {
		return fmt.Errorf("program: node %q has %d integers or booleans, reading into %T of %d (want []int32, []int, []int64 or []bool)", n.Name(), v.size, dst, l)
	}
	if d, ok := dst.([]int32); ok {
		return p.be.CopyOut(d, v.vb.phys, v.vb.physOff+v.off)
	}
	s := p.intScratch(v)
	if err := p.be.CopyOut(s, v.vb.phys, v.vb.physOff+v.off); err != nil {
		return err
	}
	switch d := dst.(type) {
	case []int:
		for i, x := range s {
			d[i] = int(x)
		}
	case []int64:
		for i, x := range s {
			d[i] = int64(x)
		}
	case []bool:
		for i, x := range s {
			d[i] = x != 0
		}
	default:
		return fmt.Errorf("program: node %q holds integers or booleans, reading into %T (want []int32, []int, []int64 or []bool)", n.Name(), dst)
	}
	return nil
}
