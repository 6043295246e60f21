// Package fused defines orthonet's fused layers as Gorgonia ops: softmax
// cross-entropy, layer normalization, the core of multi-head attention,
// GELU, and a bias added before an activation. Each is one node where the
// same function built from Gorgonia's own ops takes several to dozens, so
// a compiled program (package program) runs one kernel for it instead of
// many. gorgonia.Grad differentiates through them (their backward passes
// are ops of this package too), and Gorgonia's tape machine runs them: the
// Do methods are plain reference implementations in float64 (loops, and
// float64 products for attention's heads), against which the backends'
// kernels are tested.
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
)

// base holds the methods every op of the package shares.
type base struct{}

func (base) ReturnsPtr() bool     { return false }
func (base) CallsExtern() bool    { return false }
func (base) OverwritesInput() int { return -1 }

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

// shapes returns the shapes of the op's arguments.
func shapes(in []G.DimSizer) ([]tensor.Shape, error) {
	out := make([]tensor.Shape, len(in))
	for i, d := range in {
		s, ok := d.(tensor.Shape)
		if !ok {
			return nil, fmt.Errorf("fused: argument %d has no shape (%T)", i, d)
		}
		out[i] = s
	}
	return out, nil
}

// floats returns the values of a Gorgonia value in float64, and whether it
// was float32.
func floats(v G.Value) ([]float64, bool, error) {
	switch d := v.Data().(type) {
	case []float32:
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = float64(x)
		}
		return out, true, nil
	case []float64:
		return append([]float64(nil), d...), false, nil
	case float32:
		return []float64{float64(d)}, true, nil
	case float64:
		return []float64{d}, false, nil
	}
	return nil, false, fmt.Errorf("fused: value of %T, want float32 or float64", v.Data())
}

// args returns the values of the arguments in float64, checking that they
// share one element type.
func args(op fmt.Stringer, want int, vals []G.Value) ([][]float64, bool, error) {
	if len(vals) != want {
		return nil, false, fmt.Errorf("fused: %v takes %d arguments, got %d", op, want, len(vals))
	}
	out := make([][]float64, want)
	var is32 bool
	for i, v := range vals {
		f, s, err := floats(v)
		if err != nil {
			return nil, false, err
		}
		if i > 0 && s != is32 {
			return nil, false, fmt.Errorf("fused: %v: arguments of mixed element types", op)
		}
		out[i], is32 = f, s
	}
	return out, is32, nil
}

// tensorOf returns a dense tensor of shape holding v, in float32 when is32.
func tensorOf(v []float64, is32 bool, shape ...int) G.Value {
	if is32 {
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
}

// scalarOf returns a Gorgonia scalar holding v.
func scalarOf(v float64, is32 bool) G.Value {
	if is32 {
		return G.NewF32(float32(v))
	}
	return G.NewF64(v)
}

// checkMatrix returns an error unless n is a matrix of a float type.
func checkMatrix(what string, n *G.Node) error {
	if n == nil {
		return fmt.Errorf("fused: %s is nil", what)
	}
	if n.Dims() != 2 {
		return fmt.Errorf("fused: %s %q has shape %v, want a matrix", what, n.Name(), n.Shape())
	}
	if dt := n.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return fmt.Errorf("fused: %s %q holds %v, want float32 or float64", what, n.Name(), dt)
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
