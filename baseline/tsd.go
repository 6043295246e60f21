package baseline

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/orthonet/orthonet/internal/linalg"
)

// TSD is tangent subspace descent on St(n,p) (Gutman and Ho-Nguyen 2023)
// with Givens coordinates in the frame Q = [X X_perp]: a step sweeps the
// p(p-1)/2 rotations of two columns of X and the p(n-p) rotations of a
// column of X with a column of X_perp, each by -eta times the derivative
// along it, with G the gradient given to Step. For n = p it is RCD acting
// on columns. The frame is completed once (O(n^3)) and then rotated along
// with X; a sweep costs O(n^2 p).
type TSD[T Float] struct {
	n, p  int
	lr    float64
	frame []float64 // n x n: row k is column k of Q
	gt    []float64 // p x n: G^T
	xt    []T       // x as last written, to notice outside changes
}

// NewTSD returns TSD for n x p weights with step size lr.
func NewTSD[T Float](n, p int, lr float64) (*TSD[T], error) {
	if err := checkNew(n, p, lr); err != nil {
		return nil, err
	}
	return &TSD[T]{n: n, p: p, lr: lr, frame: make([]float64, n*n), gt: make([]float64, p*n)}, nil
}

// complete builds the frame from x: its columns, then an orthonormal basis
// of their complement from a full QR.
func (o *TSD[T]) complete(x []T) {
	n, p := o.n, o.p
	xd := mat.NewDense(n, p, nil)
	for i := 0; i < n; i++ {
		for k := 0; k < p; k++ {
			xd.Set(i, k, float64(x[i*p+k]))
			o.frame[k*n+i] = float64(x[i*p+k])
		}
	}
	var qr mat.QR
	qr.Factorize(xd)
	var q mat.Dense
	qr.QTo(&q)
	for k := p; k < n; k++ {
		for i := 0; i < n; i++ {
			o.frame[k*n+i] = q.At(i, k)
		}
	}
	o.xt = append(o.xt[:0], x...)
}

// Step takes one sweep over all p(2n-p-1)/2 coordinates.
func (o *TSD[T]) Step(x, grad []T) error {
	if err := checkStep(o.n, o.p, x, grad); err != nil {
		return err
	}
	n, p := o.n, o.p
	same := len(o.xt) == len(x)
	for i := 0; same && i < len(x); i++ {
		same = o.xt[i] == x[i]
	}
	if !same {
		o.complete(x)
	}
	for i := 0; i < n; i++ {
		for k := 0; k < p; k++ {
			o.gt[k*n+i] = float64(grad[i*p+k])
		}
	}
	for i := 0; i < p; i++ {
		qi, gi := o.frame[i*n:i*n+n], o.gt[i*n:i*n+n]
		for j := i + 1; j < n; j++ {
			qj := o.frame[j*n : j*n+n]
			// Rotating columns i, j of Q: q_i' = -q_j, q_j' = q_i.
			d := -linalg.Dot(gi, qj)
			if j < p {
				d += linalg.Dot(o.gt[j*n:j*n+n], qi)
			}
			s, c := math.Sincos(-o.lr * d)
			rotate(qi, qj, c, -s)
		}
	}
	for i := 0; i < n; i++ {
		for k := 0; k < p; k++ {
			x[i*p+k] = T(o.frame[k*n+i])
		}
	}
	o.xt = append(o.xt[:0], x...)
	return nil
}
