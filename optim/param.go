package optim

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Manifold makes the manifold a constrained weight lives on, for the
// weight's element type: Float32 and Float64 return it for an n x p point
// with n >= p (a wide weight, n < p, is stepped as its transpose). Stiefel
// and Grassmann are orthonet's; a type of one's own that implements
// Manifold puts a weight on any manifold of manifold.Manifold.
type Manifold interface {
	// String names the manifold in messages.
	String() string
	// Float32 returns the manifold of n x p float32 points.
	Float32(n, p int) (manifold.Manifold[float32], error)
	// Float64 returns the manifold of n x p float64 points.
	Float64(n, p int) (manifold.Manifold[float64], error)
}

var _ Manifold = Stiefel{} // and Grassmann, by ManifoldOf's type assertion

// Stiefel is the Stiefel manifold St(n,p) of n x p weights with orthonormal
// columns (W^T W = I), or, for a weight with fewer rows than columns,
// orthonormal rows (W W^T = I, a point of St(p,n) transposed).
type Stiefel struct {
	// Retraction is the retraction of RGD and Riemannian Adam; the zero
	// value is QR.
	Retraction manifold.Retraction
}

// String returns "stiefel", with the retraction when it is not QR.
func (s Stiefel) String() string { return named("stiefel", s.Retraction) }

// Float32 returns St(n,p) for float32 points.
func (s Stiefel) Float32(n, p int) (manifold.Manifold[float32], error) {
	return builtin[float32](false, n, p, s.Retraction)
}

// Float64 returns St(n,p) for float64 points.
func (s Stiefel) Float64(n, p int) (manifold.Manifold[float64], error) {
	return builtin[float64](false, n, p, s.Retraction)
}

// Grassmann is the Grassmann manifold Gr(n,p) of p-dimensional subspaces
// of R^n, each held as an n x p weight with orthonormal columns (n >= p).
type Grassmann struct {
	// Retraction is the retraction of RGD and Riemannian Adam; the zero
	// value is QR.
	Retraction manifold.Retraction
}

// String returns "grassmann", with the retraction when it is not QR.
func (g Grassmann) String() string { return named("grassmann", g.Retraction) }

// Float32 returns Gr(n,p) for float32 points.
func (g Grassmann) Float32(n, p int) (manifold.Manifold[float32], error) {
	return builtin[float32](true, n, p, g.Retraction)
}

// Float64 returns Gr(n,p) for float64 points.
func (g Grassmann) Float64(n, p int) (manifold.Manifold[float64], error) {
	return builtin[float64](true, n, p, g.Retraction)
}

func named(name string, r manifold.Retraction) string {
	if r == manifold.QR {
		return name
	}
	return fmt.Sprintf("%s (%v retraction)", name, r)
}

// builtin returns St(n,p), or Gr(n,p) when grassmann, with retraction r.
func builtin[T Float](grassmann bool, n, p int, r manifold.Retraction) (manifold.Manifold[T], error) {
	if grassmann {
		g, err := manifold.NewGrassmann[T](n, p)
		if err != nil {
			return nil, err
		}
		g.Retraction = r
		return g, nil
	}
	st, err := manifold.NewStiefel[T](n, p)
	if err != nil {
		return nil, err
	}
	st.Retraction = r
	return st, nil
}

// ManifoldOf returns the manifold of a constrained weight with elements of
// type T, of its column-orthonormal view: the weight, or its transpose when
// it has fewer rows than columns (wide reports which).
func ManifoldOf[T Float](p Param) (m manifold.Manifold[T], wide bool, err error) {
	if p.Manifold == nil {
		return nil, false, fmt.Errorf("optim: %s is not constrained", p.describe())
	}
	n, k, ok := p.Matrix()
	if !ok {
		return nil, false, fmt.Errorf("optim: %s: marked as constrained but has shape %v, want a matrix or a tensor of 3 or more axes (a convolution kernel, taken as a matrix of its first axis by the rest)", p.describe(), p.Shape)
	}
	if wide = n < k; wide {
		if _, ok := p.Manifold.(Grassmann); ok {
			return nil, false, fmt.Errorf("optim: %s: marked Grassmann but is %d x %d: a subspace needs n >= p (a wide Stiefel weight has orthonormal rows)", p.describe(), n, k)
		}
		n, k = k, n // W^T has orthonormal columns
	}
	var mm any
	if linalg.Is32[T]() {
		mm, err = p.Manifold.Float32(n, k)
	} else {
		mm, err = p.Manifold.Float64(n, k)
	}
	if err != nil {
		return nil, false, fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	m, _ = mm.(manifold.Manifold[T])
	if m == nil {
		return nil, false, fmt.Errorf("optim: %s: the %v manifold gave none for %d x %d points", p.describe(), p.Manifold, n, k)
	}
	if mn, mp := m.Dims(); mn != n || mp != k {
		return nil, false, fmt.Errorf("optim: %s: the %v manifold of %d x %d points has points of %d x %d", p.describe(), p.Manifold, n, k, mn, mp)
	}
	return m, wide, nil
}

// Param is a parameter in host memory: the Solver updates Value in place
// from its gradient. Value and the gradient are []float32 or []float64 with
// as many entries as Shape holds.
type Param struct {
	Name  string
	Shape []int
	// Manifold is the manifold the value lives on (Stiefel, Grassmann or
	// one's own); nil for an unconstrained parameter.
	Manifold Manifold
	Value    any
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
func (p Param) Constrained() bool { return p.Manifold != nil }

// Rows returns the rows of the parameter's matrix view (see Matrix), 0
// when it has none.
func (p Param) Rows() int {
	n, _, _ := p.Matrix()
	return n
}

// Matrix returns the parameter as the rows x cols matrix a manifold
// constrains: a matrix as it is, a tensor of more axes (a convolution
// kernel of shape (out, in, kh, kw)) as its first axis by the product of
// the rest, which is its row-major layout, so the view copies nothing. A
// scalar or vector has no matrix view (ok false).
func (p Param) Matrix() (rows, cols int, ok bool) {
	return MatrixOf(p.Shape)
}

// MatrixOf returns the matrix view of a shape, as Param.Matrix does.
func MatrixOf(shape []int) (rows, cols int, ok bool) {
	if len(shape) < 2 {
		return 0, 0, false
	}
	cols = 1
	for _, d := range shape[1:] {
		cols *= d
	}
	return shape[0], cols, true
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

// floats returns the length of a []float32 or []float64 and the bytes of
// its elements, 4 or 8; 0 and 0 for anything else.
func floats(a any) (n, bytes int) {
	switch v := a.(type) {
	case []float32:
		return len(v), 4
	case []float64:
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
		return fmt.Errorf("optim: parameter %q: value %T, want []float32 or []float64", p.Name, p.Value)
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
func (p *Param) gradient() (any, error) {
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

// Orthonormalize puts the value of a constrained weight on its manifold:
// it replaces the weight by the Q factor of its QR decomposition (of its
// transpose for a wide weight), with the signs that make diag(R) > 0, the
// point of the manifold nearest a weight that has drifted off it. A weight
// of any finite starting values (Gaussian, Xavier, a loaded matrix)
// becomes a point that NewSolver accepts.
func (p Param) Orthonormalize() error {
	switch v := p.Value.(type) {
	case []float32:
		return orthonormalize(p, v)
	case []float64:
		return orthonormalize(p, v)
	}
	return fmt.Errorf("optim: parameter %q: value %T, want []float32 or []float64", p.Name, p.Value)
}

func orthonormalize[T Float](p Param, v []T) error {
	m, wide, err := ManifoldOf[T](p)
	if err != nil {
		return err
	}
	rows, cols, _ := p.Matrix()
	if len(v) != rows*cols {
		return fmt.Errorf("optim: %s of shape %v: value has %d entries", p.describe(), p.Shape, len(v))
	}
	x := v
	if wide {
		x = make([]T, len(v))
		transpose(x, v, rows, cols)
	}
	if err := m.Orthonormalize(x); err != nil {
		return fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	if f := m.Feasibility(x); !(f <= feasibilityTol[T](m)) {
		return fmt.Errorf("optim: %s: still %.3g from the %v manifold after orthonormalizing", p.describe(), f, p.Manifold)
	}
	if wide {
		transpose(v, x, cols, rows)
	}
	return nil
}

// Feasibility returns how far the value of a constrained weight is from its
// manifold: ||X^T X - I||_F of its column-orthonormal view X (the weight, or
// its transpose when it is wide), in float64.
func (p Param) Feasibility() (float64, error) {
	switch v := p.Value.(type) {
	case []float32:
		return feasibility(p, v)
	case []float64:
		return feasibility(p, v)
	}
	return 0, fmt.Errorf("optim: parameter %q: value %T, want []float32 or []float64", p.Name, p.Value)
}

func feasibility[T Float](p Param, v []T) (float64, error) {
	m, wide, err := ManifoldOf[T](p)
	if err != nil {
		return 0, err
	}
	rows, cols, _ := p.Matrix()
	if len(v) != rows*cols {
		return 0, fmt.Errorf("optim: %s of shape %v: value has %d entries", p.describe(), p.Shape, len(v))
	}
	x := v
	if wide {
		x = make([]T, len(v))
		transpose(x, v, rows, cols)
	}
	return m.Feasibility(x), nil
}

// feasibilityTol is how far from m a weight that NewSolver takes may be.
func feasibilityTol[T Float](m manifold.Manifold[T]) float64 {
	_, k := m.Dims()
	if linalg.Is32[T]() {
		return 1e-4 * math.Sqrt(float64(k))
	}
	return 1e-8 * math.Sqrt(float64(k))
}
