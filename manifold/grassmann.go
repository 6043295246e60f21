package manifold

import "fmt"

// Grassmann is the manifold Gr(n,p) of p-dimensional subspaces of R^n,
// represented as the quotient St(n,p)/O(p): a point is any n x p matrix with
// orthonormal columns spanning the subspace, and tangent vectors are
// horizontal (X^T V = 0). RSDM runs on it unchanged (paper, section 5.5).
type Grassmann[T Float] struct {
	// Retraction used by Retract. The zero value is QR. Every Stiefel
	// retraction, applied to a horizontal vector, is a retraction of the
	// quotient.
	Retraction Retraction

	frame[T]
}

var _ Manifold[float64] = (*Grassmann[float64])(nil)

// NewGrassmann returns Gr(n,p). It fails unless 1 <= p <= n.
func NewGrassmann[T Float](n, p int) (*Grassmann[T], error) {
	if err := checkDims(n, p); err != nil {
		return nil, err
	}
	return &Grassmann[T]{frame: frame[T]{n: n, p: p}}, nil
}

// String names the manifold and its dimensions: "Grassmann(n, p)".
func (g *Grassmann[T]) String() string { return fmt.Sprintf("Grassmann(%d, %d)", g.n, g.p) }

// Proj writes (I - X X^T) v into dst, the horizontal projection at x; applied
// to a Euclidean gradient it gives the Riemannian gradient of the quotient.
// dst may alias v.
func (g *Grassmann[T]) Proj(dst, x, v []T) error { return g.proj(dst, x, v, false) }

// Retract writes R_x(v) into dst using g.Retraction. dst may alias x or v.
func (g *Grassmann[T]) Retract(dst, x, v []T) error { return g.retract(g.Retraction, dst, x, v) }
