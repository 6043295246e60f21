package baseline

import (
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
)

// RCD is Riemannian coordinate descent on St(n,p) by Givens rotations of
// pairs of rows (Han et al. 2024): a step sweeps every pair i < j in order
// and rotates rows i and j of X by the angle -eta <G, (E_ij - E_ji) X>, the
// derivative along that coordinate, with G the gradient given to Step.
// Every rotation keeps X exactly on the manifold; a sweep costs O(n^2 p).
type RCD[T Float] struct {
	n, p int
	lr   float64
}

// NewRCD returns RCD for n x p weights with step size lr.
func NewRCD[T Float](n, p int, lr float64) (*RCD[T], error) {
	if err := checkNew(n, p, lr); err != nil {
		return nil, err
	}
	return &RCD[T]{n: n, p: p, lr: lr}, nil
}

// Step takes one sweep over all n(n-1)/2 coordinates.
func (o *RCD[T]) Step(x, grad []T) error {
	if err := checkStep(o.n, o.p, x, grad); err != nil {
		return err
	}
	n, p := o.n, o.p
	for i := 0; i < n; i++ {
		xi, gi := x[i*p:i*p+p], grad[i*p:i*p+p]
		for j := i + 1; j < n; j++ {
			xj, gj := x[j*p:j*p+p], grad[j*p:j*p+p]
			d := linalg.Dot(gi, xj) - linalg.Dot(gj, xi)
			s, c := math.Sincos(-o.lr * d)
			rotate(xi, xj, T(c), T(s))
		}
	}
	return nil
}

// rotate sets a, b = c a + s b, -s a + c b.
func rotate[T Float](a, b []T, c, s T) {
	b = b[:len(a)]
	for k, u := range a {
		v := b[k]
		a[k] = c*u + s*v
		b[k] = c*v - s*u
	}
}
