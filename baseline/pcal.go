package baseline

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
)

// PCAL is the parallelizable column-wise augmented Lagrangian method (Gao,
// Liu and Yuan 2019) for smooth problems: with the multipliers in closed
// form, Lambda = sym(X^T G), a step is
// X <- X - eta (G - X Lambda + beta_k X (X^T X - I)), after which every
// column is scaled to unit norm (the column-wise constraints). X stays
// near, not on, the manifold.
//
// To first order the step changes E = X^T X - I by
// eta (E Lambda + Lambda E - 2 beta_k E), which grows when beta_k is below
// Lambda's largest eigenvalue (on 60 x 60 Procrustes with a fixed beta = 1,
// ||E|| reached 59 in 200 steps at any step size). So beta_k is the given
// beta plus Lambda's largest eigenvalue when positive (estimated by a few
// shifted power iterations), in the spirit of Gao et al.'s requirement that
// the penalty dominate the multipliers.
type PCAL[T Float] struct {
	infeasible[T]     // penalty is beta
	lam           []T // p x p
	u, w          []float64
}

// NewPCAL returns PCAL for n x p weights with step size lr and penalty
// weight beta > 0.
func NewPCAL[T Float](n, p int, lr, beta float64) (*PCAL[T], error) {
	in, err := newInfeasible[T]("PCAL", n, p, lr, beta)
	if err != nil {
		return nil, err
	}
	u := make([]float64, p)
	for i := range u {
		u[i] = 1 / math.Sqrt(float64(p))
	}
	return &PCAL[T]{infeasible: in, lam: make([]T, p*p), u: u, w: make([]float64, p)}, nil
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
	// beta_k (X^T X - I) - Lambda, then dir = G + X (that).
	rho := o.power(0)
	beta := T(o.penalty + max(0, o.power(rho)-rho))
	for i := range o.xtx {
		o.xtx[i] = beta*o.xtx[i] - o.lam[i]
	}
	copy(o.dir, grad)
	linalg.Gemm(false, false, n, p, p, 1, x, p, o.xtx, p, 1, o.dir, p)
	o.descend(x)
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

// power estimates the largest eigenvalue of the symmetric Lambda + shift I
// by power iteration: with shift 0 its spectral radius, with shift equal to
// the radius its largest eigenvalue plus the shift.
func (o *PCAL[T]) power(shift float64) float64 {
	p := o.p
	var rho float64
	for i := range o.u {
		o.u[i] = 1 / math.Sqrt(float64(p))
	}
	for it := 0; it < 10; it++ {
		for i := 0; i < p; i++ {
			s := shift * o.u[i]
			row := o.lam[i*p : i*p+p]
			for j, v := range row {
				s += float64(v) * o.u[j]
			}
			o.w[i] = s
		}
		rho = linalg.Norm(o.w)
		if rho == 0 {
			return 0
		}
		for i, v := range o.w {
			o.u[i] = v / rho
		}
	}
	return rho
}
