// Package fused defines orthonet's fused layers as Gorgonia ops: softmax
// cross-entropy, layer normalization, the core of multi-head attention,
// GELU, and a bias added before an activation. Each is one node where the
// same function built from Gorgonia's own ops takes several to dozens, so
// a compiled program (package program) runs one kernel for it instead of
// many. gorgonia.Grad differentiates through them (their backward passes
// are ops of this package too). Each op carries its lowering (Lowering):
// the backend kernel that computes it, which compiled programs run and
// whose CPU implementation its Do runs for Gorgonia's tape machine
// (backend.RunHost), so that the math of a fused layer is written once for
// the host (in package backend, beside its CUDA kernels). The package
// imports no backend: only the kernels of package backend.
//
// Every op has one output. Where a backward pass yields several gradients
// (attention, layer norm's scale and shift) they come packed in one tensor
// that gorgonia.Slice takes apart.
package fused

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// base holds the methods every op of the package shares.
type base struct{}

func (base) ReturnsPtr() bool     { return false }
func (base) CallsExtern() bool    { return false }
func (base) OverwritesInput() int { return -1 }

// InferShape returns the shape of the first argument, the result's unless
// the op defines its own.
func (base) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return resultShape(in, tensor.Shape.Clone)
}

// hashOf hashes an op by its String, which names its kind and parameters.
func hashOf(s fmt.Stringer) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s.String()))
	return h.Sum32()
}

// hashWriter is what WriteHash writes to.
type hashWriter = hash.Hash

func writeHash(h hashWriter, s fmt.Stringer) { _, _ = h.Write([]byte(s.String())) }

// matrixType is the type of an op from n matrices to a matrix (a scalar
// when scalarOut is set) of the same element type.
func matrixType(n int, scalarOut bool) hm.Type {
	a := hm.TypeVariable('a')
	t := G.TensorType{Dims: 2, Of: a}
	args := make([]hm.Type, 0, n+1)
	for i := 0; i < n; i++ {
		args = append(args, t)
	}
	if scalarOut {
		args = append(args, a)
	} else {
		args = append(args, t)
	}
	return hm.NewFnType(args...)
}

// resultShape returns the shape of an op's result, result of the shape
// of its first argument, once every argument is known to have a shape.
func resultShape(in []G.DimSizer, result func(first tensor.Shape) tensor.Shape) (tensor.Shape, error) {
	for i, d := range in {
		if _, ok := d.(tensor.Shape); !ok {
			return nil, fmt.Errorf("fused: argument %d has no shape (%T)", i, d)
		}
	}
	return result(in[0].(tensor.Shape)), nil
}

// Every op of the package carries its lowering.
var (
	_ Lowering = (*SoftmaxCrossEntropyOp)(nil)
	_ Lowering = (*SoftmaxCrossEntropyGradOp)(nil)
	_ Lowering = (*LayerNormOp)(nil)
	_ Lowering = (*LayerNormGradOp)(nil)
	_ Lowering = (*LayerNormParamGradOp)(nil)
	_ Lowering = (*AttentionOp)(nil)
	_ Lowering = (*AttentionGradOp)(nil)
	_ Lowering = (*GELUOp)(nil)
	_ Lowering = (*GELUGradOp)(nil)
	_ Lowering = (*BiasActOp)(nil)
	_ Lowering = (*BiasActGradOp)(nil)
)

// Lowering is an op that one backend kernel computes: compiled programs
// (package program) lower it to that kernel, and its Do runs the kernel's
// CPU implementation. Every op of this package is one; an op of another
// package that implements it is lowered the same way.
type Lowering interface {
	G.Op
	// Kernel returns the kernel that writes the op's result into out from
	// its arguments in, whose shapes are given (a scalar's is empty).
	Kernel(shapes [][]int, in []backend.Operand, out backend.Operand) backend.Kernel
}

// Do runs op's kernel on the host over copies of the values of its
// arguments (of one float type) and returns its result: the Do of a
// Lowering op. It runs the kernel's CPU implementation on one thread
// (backend.RunHost), as a CPU backend of one thread would.
func Do(op Lowering, vals ...G.Value) (G.Value, error) {
	if len(vals) != op.Arity() {
		return nil, fmt.Errorf("fused: %v takes %d arguments, got %d", op, op.Arity(), len(vals))
	}
	in, shapes, dims, dt, err := hostArgs(op, vals)
	if err != nil {
		return nil, err
	}
	shape, err := op.InferShape(dims...)
	if err != nil {
		return nil, err
	}
	n := max(shape.TotalSize(), 1)
	res := any(make([]float64, n))
	if dt == backend.Float32 {
		res = make([]float32, n)
	}
	out, err := backend.HostSlice(res)
	if err != nil {
		return nil, err
	}
	if err := backend.RunHost(op.Kernel(shapes, in, backend.At(out, 0))); err != nil {
		return nil, fmt.Errorf("fused: %v: %w", op, err)
	}
	if shape.IsScalar() {
		if r, ok := res.([]float32); ok {
			return G.NewF32(r[0]), nil
		}
		return G.NewF64(res.([]float64)[0]), nil
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(res)), nil
}

// hostArgs copies the values of op's arguments into host buffers and
// returns them as operands, with their shapes and their element type (one
// for all).
func hostArgs(op Lowering, vals []G.Value) ([]backend.Operand, [][]int, []G.DimSizer, backend.DType, error) {
	var dt backend.DType
	shapes, dims := make([][]int, len(vals)), make([]G.DimSizer, len(vals))
	in := make([]backend.Operand, len(vals))
	for i, v := range vals {
		data, err := floatCopy(op, i, v)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		buf, err := backend.HostSlice(data)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		if i > 0 && buf.DType() != dt {
			return nil, nil, nil, 0, fmt.Errorf("fused: %v: arguments of mixed element types", op)
		}
		dt = buf.DType()
		shapes[i], dims[i], in[i] = []int(v.Shape()), v.Shape(), backend.At(buf, 0)
	}
	return in, shapes, dims, dt, nil
}

// floatCopy returns a copy of the data of value v, argument i of op, as a
// slice of float32 or float64 (a scalar's of one element).
func floatCopy(op Lowering, i int, v G.Value) (any, error) {
	switch x := v.Data().(type) {
	case []float32:
		return append([]float32(nil), x...), nil
	case []float64:
		return append([]float64(nil), x...), nil
	case float32:
		return []float32{x}, nil
	case float64:
		return []float64{x}, nil
	default:
		return nil, fmt.Errorf("fused: %v: argument %d holds %T, want float32 or float64", op, i, x)
	}
}

// arg is an argument of an op and what messages call it.
type arg struct {
	what string
	n    *G.Node
}

// checkMatrices returns an error unless every argument is a matrix of a
// float type.
func checkMatrices(args ...arg) error {
	for _, a := range args {
		n := a.n
		if n == nil {
			return fmt.Errorf("fused: %s is nil", a.what)
		}
		if n.Dims() != 2 {
			return fmt.Errorf("fused: %s %q has shape %v, want a matrix", a.what, n.Name(), n.Shape())
		}
		if dt := n.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
			return fmt.Errorf("fused: %s %q holds %v, want float32 or float64", a.what, n.Name(), dt)
		}
	}
	return nil
}

// sameType returns an error unless every node has the element type of the
// first.
func sameType(ns ...*G.Node) error {
	for _, n := range ns[1:] {
		if n.Dtype() != ns[0].Dtype() {
			return fmt.Errorf("fused: %q holds %v but %q %v", n.Name(), n.Dtype(), ns[0].Name(), ns[0].Dtype())
		}
	}
	return nil
}

// rows takes rows lo to hi of a matrix node m (hi - lo rows), keeping it a
// matrix.
func rows(m *G.Node, lo, hi int) (*G.Node, error) {
	s, err := G.Slice(m, G.S(lo, hi))
	if err != nil {
		return nil, err
	}
	if hi-lo == 1 { // a single row is sliced to a vector
		return G.Reshape(s, tensor.Shape{1, m.Shape()[1]})
	}
	return s, nil
}
