package manifold

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Kind is the kind of manifold a constrained weight lives on, whatever its
// shape and element type: Float32 and Float64 make the manifold of n x p
// points (n >= p) for each element type. StiefelKind and GrassmannKind are
// orthonet's; a type of one's own that implements Kind puts a weight on any
// Manifold. Layers mark their weights with a Kind (package param), and
// the optimizers build the weight's Manifold from it (Of).
type Kind interface {
	// String names the manifold in messages.
	String() string
	// Float32 returns the manifold of n x p float32 points.
	Float32(n, p int) (Manifold[float32], error)
	// Float64 returns the manifold of n x p float64 points.
	Float64(n, p int) (Manifold[float64], error)
}

var (
	_ Kind = StiefelKind{}
	_ Kind = GrassmannKind{}
)

// StiefelKind is the Stiefel manifold St(n,p) of n x p weights with
// orthonormal columns (W^T W = I), or, for a weight with fewer rows than
// columns, orthonormal rows (W W^T = I, a point of St(p,n) transposed).
type StiefelKind struct {
	// Retraction is the retraction of RGD and Riemannian Adam; the zero
	// value is QR.
	Retraction Retraction
}

// String returns "stiefel", with the retraction when it is not QR.
func (s StiefelKind) String() string { return named("stiefel", s.Retraction) }

// Float32 returns St(n,p) for float32 points.
func (s StiefelKind) Float32(n, p int) (Manifold[float32], error) {
	return builtin[float32](false, n, p, s.Retraction)
}

// Float64 returns St(n,p) for float64 points.
func (s StiefelKind) Float64(n, p int) (Manifold[float64], error) {
	return builtin[float64](false, n, p, s.Retraction)
}

// GrassmannKind is the Grassmann manifold Gr(n,p) of p-dimensional
// subspaces of R^n, each held as an n x p weight with orthonormal columns
// (n >= p).
type GrassmannKind struct {
	// Retraction is the retraction of RGD and Riemannian Adam; the zero
	// value is QR.
	Retraction Retraction
}

// String returns "grassmann", with the retraction when it is not QR.
func (g GrassmannKind) String() string { return named("grassmann", g.Retraction) }

// Float32 returns Gr(n,p) for float32 points.
func (g GrassmannKind) Float32(n, p int) (Manifold[float32], error) {
	return builtin[float32](true, n, p, g.Retraction)
}

// Float64 returns Gr(n,p) for float64 points.
func (g GrassmannKind) Float64(n, p int) (Manifold[float64], error) {
	return builtin[float64](true, n, p, g.Retraction)
}

func named(name string, r Retraction) string {
	if r == QR {
		return name
	}
	return fmt.Sprintf("%s (%v retraction)", name, r)
}

// builtin returns St(n,p), or Gr(n,p) when grassmann, with retraction r.
func builtin[T Float](grassmann bool, n, p int, r Retraction) (Manifold[T], error) {
	if grassmann {
		g, err := NewGrassmann[T](n, p)
		if err != nil {
			return nil, err
		}
		g.Retraction = r
		return g, nil
	}
	st, err := NewStiefel[T](n, p)
	if err != nil {
		return nil, err
	}
	st.Retraction = r
	return st, nil
}

// MatrixOf returns the matrix view of a weight of the given shape, the
// matrix a Kind constrains: a matrix as it is, a tensor of more axes (a
// convolution kernel of shape (out, in, kh, kw)) as its first axis by the
// product of the rest, which is its row-major layout, so the view copies
// nothing. A scalar or vector has no matrix view (ok false).
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

// Of returns the manifold of kind k of a rows x cols weight with elements
// of type T, of its column-orthonormal view: the weight, or its transpose
// when it has fewer rows than columns (wide reports which).
//
// The errors of Of, Orthonormalize and Feasibility say what is wrong with
// the matrix but not which weight it is: their callers (packages optim and
// param) add that, and their package's name, before them.
func Of[T Float](k Kind, rows, cols int) (m Manifold[T], wide bool, err error) {
	if k == nil {
		return nil, false, fmt.Errorf("no manifold kind for a %d x %d weight", rows, cols)
	}
	n, p := rows, cols
	if wide = n < p; wide {
		if _, ok := k.(GrassmannKind); ok {
			return nil, false, fmt.Errorf("marked Grassmann but is %d x %d: a subspace needs n >= p (a wide Stiefel weight has orthonormal rows)", n, p)
		}
		n, p = p, n // W^T has orthonormal columns
	}
	var mm any
	if linalg.Is32[T]() {
		mm, err = k.Float32(n, p)
	} else {
		mm, err = k.Float64(n, p)
	}
	if err != nil {
		return nil, false, err
	}
	m, _ = mm.(Manifold[T])
	if m == nil {
		return nil, false, fmt.Errorf("the %v manifold gave none for %d x %d points", k, n, p)
	}
	if mn, mp := m.Dims(); mn != n || mp != p {
		return nil, false, fmt.Errorf("the %v manifold of %d x %d points has points of %d x %d", k, n, p, mn, mp)
	}
	return m, wide, nil
}

// Orthonormalize puts w, a rows x cols weight of kind k, on its manifold
// (Of): it replaces the weight by the Q factor of its QR decomposition (of
// its transpose for a wide weight), with the signs that make diag(R) > 0,
// the point of the manifold nearest a weight that has drifted off it. A
// weight of any finite starting values (Gaussian, Xavier, a loaded matrix)
// becomes a point within Tolerance of the manifold.
func Orthonormalize[T Float](k Kind, rows, cols int, w []T) error {
	m, x, wide, err := columnView(k, rows, cols, w)
	if err != nil {
		return err
	}
	if err := m.Orthonormalize(x); err != nil {
		return err
	}
	if f := m.Feasibility(x); !(f <= Tolerance(m)) {
		return fmt.Errorf("still %.3g from the %v manifold after orthonormalizing", f, k)
	}
	if wide {
		linalg.Transpose(w, x, cols, rows)
	}
	return nil
}

// Feasibility returns how far w, a rows x cols weight of kind k, is from
// its manifold: ||X^T X - I||_F of its column-orthonormal view X (the
// weight, or its transpose when it is wide), in float64.
func Feasibility[T Float](k Kind, rows, cols int, w []T) (float64, error) {
	m, x, _, err := columnView(k, rows, cols, w)
	if err != nil {
		return 0, err
	}
	return m.Feasibility(x), nil
}

// columnView returns the manifold of w, a rows x cols weight of kind k,
// and the weight's column-orthonormal view on it: w itself, or a copy of
// its transpose when the weight is wide (then wide is true).
func columnView[T Float](k Kind, rows, cols int, w []T) (m Manifold[T], x []T, wide bool, err error) {
	if m, wide, err = Of[T](k, rows, cols); err != nil {
		return nil, nil, false, err
	}
	if err := checkLen("w", w, rows, cols); err != nil {
		return nil, nil, false, err
	}
	x = w
	if wide {
		x = make([]T, len(w))
		linalg.Transpose(x, w, rows, cols)
	}
	return m, x, wide, nil
}

// Tolerance is how far from m (in Feasibility) a point may be and still be
// taken as on it: 1e-4 sqrt(p) for float32 points, 1e-8 sqrt(p) for
// float64 ones, of m's n x p points.
func Tolerance[T Float](m Manifold[T]) float64 {
	_, k := m.Dims()
	if linalg.Is32[T]() {
		return 1e-4 * math.Sqrt(float64(k))
	}
	return 1e-8 * math.Sqrt(float64(k))
}
