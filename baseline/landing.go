package baseline

import "github.com/orthonet/orthonet/internal/linalg"

// Landing is the landing method for the Stiefel manifold (Ablin et al.
// 2023): X <- X - eta (skew(G X^T) X + lambda X (X^T X - I)). The first term
// is the relative gradient, tangent to the manifold's level sets; the second
// pulls X towards St(n,p) without a retraction. X stays near, not on, the
// manifold.
type Landing[T Float] struct {
	infeasible[T]     // penalty is lambda
	xtg           []T // p x p
}

// NewLanding returns the landing method for n x p weights with step size lr
// and penalty weight lambda > 0.
func NewLanding[T Float](n, p int, lr, lambda float64) (*Landing[T], error) {
	in, err := newInfeasible[T]("landing", n, p, lr, lambda)
	if err != nil {
		return nil, err
	}
	return &Landing[T]{infeasible: in, xtg: make([]T, p*p)}, nil
}

// Step takes one landing step.
func (o *Landing[T]) Step(x, grad []T) error {
	if err := checkStep(o.n, o.p, x, grad); err != nil {
		return err
	}
	n, p := o.n, o.p
	linalg.Mul(true, false, p, p, n, x, x, o.xtx)
	linalg.Mul(true, false, p, p, n, x, grad, o.xtg)
	// skew(G X^T) X = (G (X^T X) - X (X^T G)^T) / 2.
	linalg.Gemm(false, false, n, p, p, 0.5, grad, p, o.xtx, p, 0, o.dir, p)
	linalg.Gemm(false, true, n, p, p, -0.5, x, p, o.xtg, p, 1, o.dir, p)
	// + lambda X (X^T X - I).
	for i := 0; i < p; i++ {
		o.xtx[i*p+i]--
	}
	linalg.Gemm(false, false, n, p, p, T(o.penalty), x, p, o.xtx, p, 1, o.dir, p)
	o.descend(x)
	return nil
}
