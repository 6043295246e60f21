package optim

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Manifold is an alias of manifold.Kind, the kind of manifold a
// constrained weight lives on; it moved to package manifold so that layers
// mark their weights without importing the optimizers.
//
// Deprecated: write manifold.Kind.
type Manifold = manifold.Kind

// Stiefel is an alias of manifold.StiefelKind.
//
// Deprecated: write manifold.StiefelKind.
type Stiefel = manifold.StiefelKind

// Grassmann is an alias of manifold.GrassmannKind.
//
// Deprecated: write manifold.GrassmannKind.
type Grassmann = manifold.GrassmannKind

// ManifoldOf returns the manifold of a constrained weight with elements of
// type T, of its column-orthonormal view: the weight, or its transpose when
// it has fewer rows than columns (wide reports which). See manifold.Of.
func ManifoldOf[T Float](p Param) (m manifold.Manifold[T], wide bool, err error) {
	n, k, err := p.matrix()
	if err != nil {
		return nil, false, err
	}
	if m, wide, err = manifold.Of[T](p.Manifold, n, k); err != nil {
		return nil, false, fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	return m, wide, nil
}

// matrix returns the matrix view of a constrained weight, or why it has
// none.
func (p Param) matrix() (rows, cols int, err error) {
	if p.Manifold == nil {
		return 0, 0, fmt.Errorf("optim: %s is not constrained", p.describe())
	}
	rows, cols, ok := p.Matrix()
	if !ok {
		return 0, 0, fmt.Errorf("optim: %s: marked as constrained but has shape %v, want a matrix or a tensor of 3 or more axes (a convolution kernel, taken as a matrix of its first axis by the rest)", p.describe(), p.Shape)
	}
	return rows, cols, nil
}

// Param is a parameter: the Solver updates Value in place from its
// gradient. Value and the gradient are Host slices of float32 or float64
// (or, with Options.Device, a device's memory: optim/device.Operand), of
// one element type, with as many entries as Shape holds.
type Param struct {
	Name  string
	Shape []int
	// Manifold is the kind of manifold the value lives on
	// (manifold.StiefelKind, manifold.GrassmannKind or one's own); nil for
	// an unconstrained parameter.
	Manifold manifold.Kind
	Value    Value
	// Grad is the gradient. GradFunc, when set, is called for it at every
	// Step instead (the gradient of a Gorgonia node exists only after its
	// graph has run).
	Grad     Value
	GradFunc func() (Value, error)
	// GradA and GradB, when set, give the gradient of an n x p weight as
	// the product GradA^T GradB of a GradK x n and a GradK x p matrix (see
	// Factored); Grad is then ignored. Only RSDM steps such a weight.
	GradA, GradB Value
	GradK        int
}

// Value is the memory of a parameter's value or gradient: a Host slice,
// or a device's memory (optim/device.Operand) that a Device steps.
type Value interface {
	// Len returns the number of elements.
	Len() int
	// Float32 reports whether the elements are float32 (else float64).
	Float32() bool
}

// Gradient is what a Stepper's Prepare steps along: a Host slice of the
// value's element type, a Factored of it (which only RSDM takes), or nil
// for a stepper on a device, which reads the gradient where it lives.
type Gradient interface {
	// Float32 reports whether the elements are float32 (else float64).
	Float32() bool
}

// Host is a Value in host memory, a slice that the Solver reads or updates
// in place: Host[float32](w) wraps w without a copy.
type Host[T Float] []T

var (
	_ Value    = Host[float32](nil)
	_ Gradient = Factored[float64]{}
)

// Len returns len(h).
func (h Host[T]) Len() int { return len(h) }

// Float32 reports whether T is float32.
func (Host[T]) Float32() bool { return isFloat32[T]() }

// Float32 reports whether T is float32.
func (Factored[T]) Float32() bool { return isFloat32[T]() }

func isFloat32[T Float]() bool {
	var z T
	_, ok := any(z).(float32)
	return ok
}

// Constrained reports whether p lives on a manifold.
func (p Param) Constrained() bool { return p.Manifold != nil }

// Rows returns the rows of the parameter's matrix view (see Matrix), 0
// when it has none.
func (p Param) Rows() int {
	n, _, _ := p.Matrix()
	return n
}

// Matrix returns the parameter as the rows x cols matrix a manifold
// constrains (manifold.MatrixOf of its shape): a matrix as it is, a tensor
// of more axes (a convolution kernel of shape (out, in, kh, kw)) as its
// first axis by the product of the rest. A scalar or vector has no matrix
// view (ok false).
func (p Param) Matrix() (rows, cols int, ok bool) {
	return manifold.MatrixOf(p.Shape)
}

// MatrixOf returns the matrix view of a shape, as Param.Matrix does.
//
// Deprecated: write manifold.MatrixOf.
func MatrixOf(shape []int) (rows, cols int, ok bool) { return manifold.MatrixOf(shape) }

// ParamInfo names a parameter of a Solver and gives its shape and whether
// its elements are float32 (nil when unknown).
type ParamInfo struct {
	Name    string
	Shape   []int
	Float32 *bool
}

// factored is a Factored gradient of either element type, as a Param
// gives it.
type factored struct {
	a, b Value
	k    int
}

// Float32 reports whether the factors' elements are float32.
func (f factored) Float32() bool { return f.a.Float32() }

// floats returns the length of a Host slice and the bytes of its elements,
// 4 or 8; 0 and 0 for anything else (nil, a device's memory).
func floats(v Value) (n, bytes int) {
	switch v := v.(type) {
	case Host[float32]:
		return len(v), 4
	case Host[float64]:
		return len(v), 8
	}
	return 0, 0
}

// check checks the parameter's shape, value and (when they are given now)
// gradient or factors.
func (p Param) check() error {
	size := 1
	for _, d := range p.Shape {
		if d < 0 {
			return fmt.Errorf("optim: parameter %q has shape %v", p.Name, p.Shape)
		}
		size *= d
	}
	vn, vb := floats(p.Value)
	if vb == 0 {
		return fmt.Errorf("optim: parameter %q: value %T, want optim.Host[float32] or optim.Host[float64]", p.Name, p.Value)
	}
	if vn != size {
		return fmt.Errorf("optim: parameter %q of shape %v: value has %d entries", p.Name, p.Shape, vn)
	}
	switch {
	case p.GradA != nil:
		rows, cols, ok := p.Matrix()
		if !p.Constrained() || !ok {
			return fmt.Errorf("optim: parameter %q of shape %v has a factored gradient; only a constrained matrix may", p.Name, p.Shape)
		}
		an, ab := floats(p.GradA)
		bn, bb := floats(p.GradB)
		if ab != vb || bb != vb {
			return fmt.Errorf("optim: parameter %q: value %T with gradient factors %T and %T", p.Name, p.Value, p.GradA, p.GradB)
		}
		if p.GradK < 1 || an != p.GradK*rows || bn != p.GradK*cols {
			return fmt.Errorf("optim: parameter %q of shape %v: gradient factors of %d and %d entries for K = %d", p.Name, p.Shape, an, bn, p.GradK)
		}
	case p.GradFunc != nil:
	default:
		gn, gb := floats(p.Grad)
		if gb != vb {
			return fmt.Errorf("optim: parameter %q: value %T but gradient %T", p.Name, p.Value, p.Grad)
		}
		if gn != size {
			return fmt.Errorf("optim: parameter %q of shape %v: gradient has %d entries", p.Name, p.Shape, gn)
		}
	}
	return nil
}

// describe names a parameter in errors: "weight" for a constrained one.
func (p Param) describe() string {
	if p.Constrained() {
		return fmt.Sprintf("weight %q", p.Name)
	}
	return fmt.Sprintf("parameter %q", p.Name)
}

// gradient returns the parameter's gradient for this step: its slice, its
// factors, or what GradFunc returns (checked against the value).
func (p *Param) gradient() (Gradient, error) {
	switch {
	case p.GradA != nil:
		return factored{a: p.GradA, b: p.GradB, k: p.GradK}, nil
	case p.GradFunc != nil:
		g, err := p.GradFunc()
		if err != nil {
			return nil, fmt.Errorf("optim: gradient of %s: %w", p.describe(), err)
		}
		gn, gb := floats(g)
		vn, vb := floats(p.Value) // a slice, as check required
		if gn != vn || gb != vb {
			return nil, fmt.Errorf("optim: gradient of %s is a %T of %d entries, want %d like its value %T", p.describe(), g, gn, vn, p.Value)
		}
		return g, nil
	}
	return p.Grad, nil
}

// finiteAny reports whether every entry of a gradient (or of both of its
// factors) is finite.
func finiteAny(g Gradient) bool {
	switch d := g.(type) {
	case factored:
		return finiteAny(d.a) && finiteAny(d.b)
	case Host[float32]:
		return linalg.Finite(d)
	case Host[float64]:
		return linalg.Finite(d)
	}
	return true
}

// Orthonormalize puts the value of a constrained weight on its manifold:
// it replaces the weight by the Q factor of its QR decomposition (of its
// transpose for a wide weight), with the signs that make diag(R) > 0, the
// point of the manifold nearest a weight that has drifted off it. A weight
// of any finite starting values (Gaussian, Xavier, a loaded matrix)
// becomes a point that NewSolver accepts.
func (p Param) Orthonormalize() error {
	switch v := p.Value.(type) {
	case Host[float32]:
		return orthonormalize(p, v)
	case Host[float64]:
		return orthonormalize(p, v)
	}
	return fmt.Errorf("optim: parameter %q: value %T, want optim.Host[float32] or optim.Host[float64]", p.Name, p.Value)
}

func orthonormalize[T Float](p Param, v []T) error {
	rows, cols, err := p.matrix()
	if err != nil {
		return err
	}
	if len(v) != rows*cols {
		return fmt.Errorf("optim: %s of shape %v: value has %d entries", p.describe(), p.Shape, len(v))
	}
	if err := manifold.Orthonormalize(p.Manifold, rows, cols, v); err != nil {
		return fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	return nil
}

// Feasibility returns how far the value of a constrained weight is from its
// manifold: ||X^T X - I||_F of its column-orthonormal view X (the weight, or
// its transpose when it is wide), in float64.
func (p Param) Feasibility() (float64, error) {
	switch v := p.Value.(type) {
	case Host[float32]:
		return feasibility(p, v)
	case Host[float64]:
		return feasibility(p, v)
	}
	return 0, fmt.Errorf("optim: parameter %q: value %T, want optim.Host[float32] or optim.Host[float64]", p.Name, p.Value)
}

func feasibility[T Float](p Param, v []T) (float64, error) {
	rows, cols, err := p.matrix()
	if err != nil {
		return 0, err
	}
	if len(v) != rows*cols {
		return 0, fmt.Errorf("optim: %s of shape %v: value has %d entries", p.describe(), p.Shape, len(v))
	}
	f, err := manifold.Feasibility(p.Manifold, rows, cols, v)
	if err != nil {
		return 0, fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	return f, nil
}
