// Package baseline holds the methods the RSDM paper compares against, on
// the same interface as package optim's (optim.Optimizer: Step(x, grad)
// moves an n x p row-major weight along its Euclidean gradient):
//
//   - Landing (Ablin and Peyré 2022; Ablin et al. 2023) and PCAL (Gao, Liu
//     and Yuan 2019): infeasible, retraction-free methods that pull X back
//     towards St(n,p) with a penalty instead of retracting;
//   - RCD (Han et al. 2024): Riemannian coordinate descent, one sweep of
//     Givens rotations over every pair of rows per step;
//   - TSD (Gutman and Ho-Nguyen 2023): tangent subspace descent, Givens
//     rotations in a frame [X X_perp] adapted to the point;
//   - RSSM (Cheung et al. 2024): projected Euclidean descent on a random
//     subset of columns;
//   - OBCD (Yuan 2023): a random block of rows moved by the orthogonal
//     matrix that minimizes a quadratic upper bound (adapted to smooth
//     problems as in the paper's appendix).
//
// The coordinate methods use the gradient given to Step for the whole sweep
// (computing a fresh gradient per rotation would cost a gradient per pair).
// Each is written from the cited paper's update rule, not from code.
package baseline

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// Float is the element type of weights and gradients.
type Float = manifold.Float

var (
	_ optim.Optimizer[float64] = (*Landing[float64])(nil)
	_ optim.Optimizer[float64] = (*PCAL[float64])(nil)
	_ optim.Optimizer[float64] = (*RCD[float64])(nil)
	_ optim.Optimizer[float64] = (*TSD[float64])(nil)
	_ optim.Optimizer[float64] = (*RSSM[float64])(nil)
	_ optim.Optimizer[float64] = (*OBCD[float64])(nil)
)

// checkNew refuses the settings every method's constructor takes: the
// weight's n x p (1 <= p <= n) and the step size lr (finite, > 0).
func checkNew(n, p int, lr float64) error {
	if n < 1 || p < 1 || p > n {
		return fmt.Errorf("%w: %d x %d, want 1 <= p <= n", manifold.ErrShape, n, p)
	}
	if !(lr > 0) || math.IsInf(lr, 1) {
		return fmt.Errorf("baseline: learning rate %v, want a finite value > 0", lr)
	}
	return nil
}

// infeasible is what the infeasible methods (Landing, PCAL) share: the
// n x p weight's shape, the step size, the weight of the penalty on
// X^T X - I, and the workspaces of the Gram matrix and of the step's
// direction.
type infeasible[T Float] struct {
	n, p        int
	lr, penalty float64
	xtx         []T // p x p
	dir         []T // n x p
}

// newInfeasible checks the settings of the infeasible method named name
// and allocates its workspaces.
func newInfeasible[T Float](name string, n, p int, lr, penalty float64) (infeasible[T], error) {
	if err := checkNew(n, p, lr); err != nil {
		return infeasible[T]{}, err
	}
	if !(penalty > 0) {
		return infeasible[T]{}, fmt.Errorf("baseline: %s penalty %v, want > 0", name, penalty)
	}
	return infeasible[T]{n: n, p: p, lr: lr, penalty: penalty, xtx: make([]T, p*p), dir: make([]T, n*p)}, nil
}

// descend moves x by -lr times the direction.
func (o *infeasible[T]) descend(x []T) {
	lr := T(o.lr)
	for i, d := range o.dir {
		x[i] -= lr * d
	}
}

func checkStep[T Float](n, p int, x, grad []T) error {
	if len(x) != n*p || len(grad) != n*p {
		return fmt.Errorf("%w: weight %d and gradient %d entries, want %d x %d", manifold.ErrShape, len(x), len(grad), n, p)
	}
	if !linalg.Finite(grad) {
		return optim.ErrNotFinite
	}
	return nil
}

// polar writes into dst (m x k, m >= k) the orthonormal factor U V^T of the
// SVD of a (m x k): the nearest matrix with orthonormal columns.
func polar(dst []float64, m, k int, a []float64) error {
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(m, k, a), mat.SVDThin) {
		return fmt.Errorf("baseline: SVD did not converge")
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	out := mat.NewDense(m, k, dst)
	out.Mul(&u, v.T())
	return nil
}
