package baseline

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
)

// PCAL is the parallelizable column-wise augmented Lagrangian method (Gao,
// Liu and Yuan 2019) for smooth problems: with the multipliers in closed
// form, Lambda = sym(X^T G), a step is
// X <- X - eta (G - X Lambda + beta X (X^T X - I)), after which every column
// is scaled to unit norm (the column-wise constraints). X stays near, not
// on, the manifold.
type PCAL[T Float] struct {
	n, p     int
	lr, beta float64
	xtx, lam []T // p x p
	dir      []T // n x p
}

// NewPCAL returns PCAL for n x p weights with step size lr and penalty
// weight beta > 0.
func NewPCAL[T Float](n, p int, lr, beta float64) (*PCAL[T], error) {
	if err := checkDims(n, p); err != nil {
		return nil, err
	}
	if err := checkLR(lr); err != nil {
		return nil, err
	}
	if !(beta > 0) {
		return nil, fmt.Errorf("baseline: PCAL penalty %v, want > 0", beta)
	}
	return &PCAL[T]{n: n, p: p, lr: lr, beta: beta, xtx: make([]T, p*p), lam: make([]T, p*p), dir: make([]T, n*p)}, nil
}

// Step takes one PCAL step.
func (o *PCAL[T]) Step(x, grad []T) error {
	if err := checkStep(o.n, o.p, x, grad); err != nil {
		return err
	}
	n, p := o.n, o.p
	linalg.Mul(true, false, p, p, n, x, grad, o.lam)
	for i := 0; i < p; i++ {
		for j := i + 1; j < p; j++ {
			s := (o.lam[i*p+j] + o.lam[j*p+i]) / 2
			o.lam[i*p+j], o.lam[j*p+i] = s, s
		}
	}
	linalg.Mul(true, false, p, p, n, x, x, o.xtx)
	for i := 0; i < p; i++ {
		o.xtx[i*p+i]--
	}
	// beta (X^T X - I) - Lambda, then dir = G + X (that).
	beta := T(o.beta)
	for i := range o.xtx {
		o.xtx[i] = beta*o.xtx[i] - o.lam[i]
	}
	copy(o.dir, grad)
	linalg.Gemm(false, false, n, p, p, 1, x, p, o.xtx, p, 1, o.dir, p)
	lr := T(o.lr)
	for i, d := range o.dir {
		x[i] -= lr * d
	}
	for j := 0; j < p; j++ {
		var s float64
		for i := 0; i < n; i++ {
			v := float64(x[i*p+j])
			s += v * v
		}
		if s == 0 {
			return fmt.Errorf("baseline: PCAL column %d vanished", j)
		}
		inv := T(1 / math.Sqrt(s))
		for i := 0; i < n; i++ {
			x[i*p+j] *= inv
		}
	}
	return nil
}
