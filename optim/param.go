package optim

import (
	"errors"
	"fmt"

	"github.com/orthonet/orthonet/internal/linalg"
)

// errFactoredRSDMOnly reports a factored gradient given to an optimizer
// other than RSDM.
var errFactoredRSDMOnly = errors.New("a factored gradient, which only RSDM steps")

// Constraint says which manifold a Param lives on.
type Constraint int

const (
	// Euclidean is an unconstrained parameter (SGD, Adam or AdamW).
	Euclidean Constraint = iota
	// OnStiefel is an n x p weight on St(n,p): orthonormal columns when
	// n >= p, orthonormal rows (W W^T = I, a point of St(p,n) transposed)
	// when n < p.
	OnStiefel
	// OnGrassmann is an n x p weight (n >= p) on Gr(n,p).
	OnGrassmann
)

// String returns the constraint's name: euclidean, stiefel or grassmann.
func (c Constraint) String() string {
	switch c {
	case Euclidean:
		return "euclidean"
	case OnStiefel:
		return "stiefel"
	case OnGrassmann:
		return "grassmann"
	}
	return fmt.Sprintf("Constraint(%d)", int(c))
}

// Param is a parameter in host memory: the Solver updates Value in place
// from its gradient. Value and the gradient are []float32 or []float64 with
// as many entries as Shape holds.
type Param struct {
	Name       string
	Shape      []int
	Constraint Constraint
	Value      any
	// Grad is the gradient. GradFunc, when set, is called for it at every
	// Step instead (the gradient of a Gorgonia node exists only after its
	// graph has run).
	Grad     any
	GradFunc func() (any, error)
	// GradA and GradB, when set, give the gradient of an n x p weight as
	// the product GradA^T GradB of a GradK x n and a GradK x p matrix (see
	// Factored); Grad is then ignored. Only RSDM steps such a weight.
	GradA, GradB any
	GradK        int
}

// Constrained reports whether p lives on a manifold.
func (p Param) Constrained() bool { return p.Constraint != Euclidean }

// Rows returns the first axis of a matrix parameter (0 otherwise).
func (p Param) Rows() int {
	if len(p.Shape) != 2 {
		return 0
	}
	return p.Shape[0]
}

// ParamInfo names a parameter of a Solver and gives its shape and whether
// its elements are float32 (nil when unknown).
type ParamInfo struct {
	Name    string
	Shape   []int
	Float32 *bool
}

// factored is a Factored gradient of either element type.
type factored struct {
	a, b any
	k    int
}

func sliceLen(a any) (int, bool) {
	switch v := a.(type) {
	case []float32:
		return len(v), true
	case []float64:
		return len(v), true
	}
	return 0, false
}

func sameType(a, b any) bool {
	_, a32 := a.([]float32)
	_, b32 := b.([]float32)
	return a32 == b32
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
	vn, ok := sliceLen(p.Value)
	if !ok {
		return fmt.Errorf("optim: parameter %q: value %T, want []float32 or []float64", p.Name, p.Value)
	}
	if vn != size {
		return fmt.Errorf("optim: parameter %q of shape %v: value has %d entries", p.Name, p.Shape, vn)
	}
	if p.Constraint < Euclidean || p.Constraint > OnGrassmann {
		return fmt.Errorf("optim: parameter %q: unknown constraint %d", p.Name, p.Constraint)
	}
	switch {
	case p.GradA != nil:
		if p.Constraint == Euclidean || len(p.Shape) != 2 {
			return fmt.Errorf("optim: parameter %q of shape %v has a factored gradient; only a constrained matrix may", p.Name, p.Shape)
		}
		an, aok := sliceLen(p.GradA)
		bn, bok := sliceLen(p.GradB)
		if !aok || !bok || !sameType(p.Value, p.GradA) || !sameType(p.GradA, p.GradB) {
			return fmt.Errorf("optim: parameter %q: value %T with gradient factors %T and %T", p.Name, p.Value, p.GradA, p.GradB)
		}
		if p.GradK < 1 || an != p.GradK*p.Shape[0] || bn != p.GradK*p.Shape[1] {
			return fmt.Errorf("optim: parameter %q of shape %v: gradient factors of %d and %d entries for K = %d", p.Name, p.Shape, an, bn, p.GradK)
		}
	case p.GradFunc != nil:
	default:
		gn, ok := sliceLen(p.Grad)
		if !ok || !sameType(p.Value, p.Grad) {
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
func (p *Param) gradient() (any, error) {
	switch {
	case p.GradA != nil:
		return factored{a: p.GradA, b: p.GradB, k: p.GradK}, nil
	case p.GradFunc != nil:
		g, err := p.GradFunc()
		if err != nil {
			return nil, fmt.Errorf("optim: gradient of %s: %w", p.describe(), err)
		}
		gn, ok := sliceLen(g)
		vn, _ := sliceLen(p.Value)
		if !ok || gn != vn || !sameType(g, p.Value) {
			return nil, fmt.Errorf("optim: gradient of %s is a %T of %d entries, want %d like its value %T", p.describe(), g, gn, vn, p.Value)
		}
		return g, nil
	}
	return p.Grad, nil
}

// finiteAny reports whether every entry of a gradient (or of both of its
// factors) is finite.
func finiteAny(a any) bool {
	switch d := a.(type) {
	case factored:
		return finiteAny(d.a) && finiteAny(d.b)
	case []float32:
		return linalg.Finite(d)
	case []float64:
		return linalg.Finite(d)
	}
	return true
}
