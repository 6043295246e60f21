package manifold

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Stiefel is the manifold St(n,p) = {X in R^(n x p) : X^T X = I_p} with the
// Euclidean metric. Square Stiefel manifolds (n = p) are the orthogonal group
// O(n).
type Stiefel[T Float] struct {
	// Retraction used by Retract. The zero value is QR.
	Retraction Retraction

	frame[T]
}

var _ Manifold[float64] = (*Stiefel[float64])(nil)

// NewStiefel returns St(n,p). It fails unless 1 <= p <= n.
func NewStiefel[T Float](n, p int) (*Stiefel[T], error) {
	if err := checkDims(n, p); err != nil {
		return nil, err
	}
	return &Stiefel[T]{frame: frame[T]{n: n, p: p}}, nil
}

// String names the manifold and its dimensions: "Stiefel(n, p)".
func (s *Stiefel[T]) String() string { return fmt.Sprintf("Stiefel(%d, %d)", s.n, s.p) }

// Proj writes v - X sym(X^T v) into dst, the tangent projection at x; applied
// to a Euclidean gradient it gives the Riemannian gradient. dst may alias v.
func (s *Stiefel[T]) Proj(dst, x, v []T) error { return s.proj(dst, x, v, true) }

// Retract writes R_x(v) into dst using s.Retraction. dst may alias x or v.
func (s *Stiefel[T]) Retract(dst, x, v []T) error { return s.retract(s.Retraction, dst, x, v) }

// frame holds what Stiefel and Grassmann share: the shape of an orthonormal
// n x p frame and the workspace of the operations on it.
type frame[T Float] struct {
	n, p int
	ws   retractWork[T]
}

// Dims returns n and p.
func (f *frame[T]) Dims() (n, p int) { return f.n, f.p }

// Random writes a Haar-distributed point into dst: the Q factor, sign-fixed,
// of an n x p matrix of independent standard normals.
func (f *frame[T]) Random(dst []T, rng *rand.Rand) error {
	if err := checkLen("dst", dst, f.n, f.p); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = T(rng.NormFloat64())
	}
	return f.ws.qr.QF(f.n, f.p, dst)
}

// Feasibility returns ||X^T X - I||_F, computed in float64. It returns +Inf
// if x has the wrong length.
func (f *frame[T]) Feasibility(x []T) float64 { return f.ws.feasibility(f.n, f.p, x) }

// Orthonormalize replaces x by qf(x), the point of the manifold within
// O(eps) of an x that has drifted by eps (and, on the Grassmann manifold, a
// basis of the same subspace); it fails if x has a NaN or Inf entry.
func (f *frame[T]) Orthonormalize(x []T) error {
	if err := checkLen("x", x, f.n, f.p); err != nil {
		return err
	}
	if err := f.ws.qr.QF(f.n, f.p, x); err != nil {
		return fmt.Errorf("manifold: orthonormalize: %w", err)
	}
	return nil
}

// proj writes v - X M into dst, M = X^T v, symmetrized where sym: the
// Stiefel manifold's tangent projection (sym) or the Grassmann manifold's
// horizontal one. dst may alias v.
func (f *frame[T]) proj(dst, x, v []T, sym bool) error {
	if err := f.check3(dst, x, v); err != nil {
		return err
	}
	n, p := f.n, f.p
	w := &f.ws
	w.pp = linalg.Grow(w.pp, p*p)
	linalg.Mul(true, false, p, p, n, x, v, w.pp) // X^T V
	if sym {
		symmetrize(p, w.pp)
	}
	copy(dst, v)
	linalg.Gemm(false, false, n, p, p, -1, x, p, w.pp, p, 1, dst, p)
	return nil
}

// retract writes R_x(v) into dst by retraction r. dst may alias x or v.
func (f *frame[T]) retract(r Retraction, dst, x, v []T) error {
	if err := f.check3(dst, x, v); err != nil {
		return err
	}
	return f.ws.retract(r, f.n, f.p, dst, x, v)
}

func (f *frame[T]) check3(dst, x, v []T) error {
	for _, a := range []struct {
		name string
		m    []T
	}{{"dst", dst}, {"x", x}, {"v", v}} {
		if err := checkLen(a.name, a.m, f.n, f.p); err != nil {
			return err
		}
	}
	return nil
}

// symmetrize replaces the p x p matrix a by (a + a^T)/2.
func symmetrize[T Float](p int, a []T) {
	for i := 0; i < p; i++ {
		for j := i + 1; j < p; j++ {
			m := (a[i*p+j] + a[j*p+i]) / 2
			a[i*p+j], a[j*p+i] = m, m
		}
	}
}
