// Package manifold provides the Stiefel manifold St(n,p) of column-orthonormal
// n x p matrices and the Grassmann manifold Gr(n,p) of p-dimensional subspaces
// of R^n, both with the Euclidean metric, their retractions, and the random
// samplers that the submanifold method of Han, Poirion and Takeda (ICML 2025,
// section 4) draws its submanifolds from.
//
// Points and tangent vectors are row-major slices of length n*p. A manifold
// value carries its shape and a workspace, so its methods do not allocate
// after the first call; for the same reason a value is not safe for
// concurrent use.
package manifold

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// Float is the element type of points and tangent vectors.
type Float interface {
	float32 | float64
}

// Manifold is a matrix manifold whose points are n x p row-major matrices
// with orthonormal columns.
type Manifold[T Float] interface {
	// Dims returns the shape n x p of a point.
	Dims() (n, p int)
	// Proj writes into dst the projection of v onto the tangent space at x
	// (for a quotient manifold, onto the horizontal space). With the
	// Euclidean metric it also maps a Euclidean gradient to the Riemannian
	// gradient.
	Proj(dst, x, v []T) error
	// Retract writes into dst the retraction of the tangent vector v at x.
	Retract(dst, x, v []T) error
	// Random writes into dst a point drawn from the uniform (Haar) measure.
	Random(dst []T, rng *rand.Rand) error
	// Feasibility returns ||X^T X - I||_F, the distance of x from the
	// manifold's defining constraint.
	Feasibility(x []T) float64
	// Orthonormalize replaces x by the Q factor of its QR decomposition (with
	// diag(R) > 0), a point of the manifold that is within O(eps) of x when x
	// has drifted by eps.
	Orthonormalize(x []T) error
}

// Retraction selects a retraction of the Stiefel manifold (paper, section 2).
type Retraction int

const (
	// QR is qf(X + V), with column signs chosen so that diag(R) > 0.
	QR Retraction = iota
	// Polar is (X + V)(I + V^T V)^(-1/2).
	Polar
	// Cayley is (I - W/2)^(-1)(I + W/2) X with W skew-symmetric and W X = V,
	// computed in O(np^2) through the Woodbury identity.
	Cayley
	// Exp is the exponential map of the embedded (Euclidean) metric.
	Exp
)

// Retractions lists every Retraction, for tables and tests.
var Retractions = []Retraction{QR, Polar, Cayley, Exp}

// retractionNames are the retractions' names, by Retraction.
var retractionNames = [...]string{QR: "qr", Polar: "polar", Cayley: "cayley", Exp: "exp"}

// String returns the retraction's name: qr, polar, cayley or exp.
func (r Retraction) String() string {
	if r >= 0 && int(r) < len(retractionNames) {
		return retractionNames[r]
	}
	return fmt.Sprintf("Retraction(%d)", int(r))
}

// ParseRetraction returns the Retraction named s ("qr", "polar", "cayley" or
// "exp").
func ParseRetraction(s string) (Retraction, error) {
	for _, r := range Retractions {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("manifold: unknown retraction %q (want qr, polar, cayley or exp)", s)
}

// ErrShape reports an argument whose length does not match the manifold.
var ErrShape = errors.New("manifold: shape mismatch")

func checkDims(n, p int) error {
	switch {
	case p < 1:
		return fmt.Errorf("manifold: p = %d, want p >= 1", p)
	case n < p:
		return fmt.Errorf("manifold: n = %d < p = %d, want n >= p", n, p)
	}
	return nil
}

func checkLen[T Float](name string, a []T, n, p int) error {
	if len(a) != n*p {
		return fmt.Errorf("%w: %s has %d entries, want %d x %d = %d", ErrShape, name, len(a), n, p, n*p)
	}
	return nil
}
