package baseline

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// RSSM is the randomized submanifold method of Cheung et al. (2024) for
// smooth problems, as the RSDM paper's appendix states it: a step draws r
// of the p columns, C, projects their partial gradient onto the tangent
// space, grad_C = X_C skew(X_C^T G_C) + (I - X X^T) G_C, and sets
// X_C <- polar(X_C - eta grad_C). It costs O(npr) a step.
type RSSM[T Float] struct {
	n, p, r int
	lr      float64
	rng     *rand.Rand
	perm    *manifold.Permutation
	cols    []int
	xc, gc  []float64 // n x r
	xtg     []float64 // p x r
	s       []float64 // r x r
	x64     []float64 // n x p
}

// NewRSSM returns RSSM for n x p weights, r columns a step (2 <= r <= p),
// step size lr, sampling from seed.
func NewRSSM[T Float](n, p, r int, lr float64, seed uint64) (*RSSM[T], error) {
	if err := checkNew(n, p, lr); err != nil {
		return nil, err
	}
	if r < 1 || r > p {
		return nil, fmt.Errorf("baseline: RSSM draws r = %d of %d columns", r, p)
	}
	perm, err := manifold.NewPermutation(p, r)
	if err != nil {
		return nil, err
	}
	return &RSSM[T]{n: n, p: p, r: r, lr: lr, rng: rand.New(rand.NewPCG(seed, 0x5353)), perm: perm, cols: make([]int, r),
		xc: make([]float64, n*r), gc: make([]float64, n*r), xtg: make([]float64, p*r), s: make([]float64, r*r), x64: make([]float64, n*p)}, nil
}

// Step moves r random columns of x.
func (o *RSSM[T]) Step(x, grad []T) error {
	if err := checkStep(o.n, o.p, x, grad); err != nil {
		return err
	}
	n, p, r := o.n, o.p, o.r
	if err := o.perm.Sample(o.cols, o.rng); err != nil {
		return err
	}
	linalg.Convert(o.x64, x)
	for i := 0; i < n; i++ {
		for k, c := range o.cols {
			o.xc[i*r+k] = float64(x[i*p+c])
			o.gc[i*r+k] = float64(grad[i*p+c])
		}
	}
	// X^T G_C (p x r); its rows C are X_C^T G_C.
	linalg.Mul(true, false, p, r, n, o.x64, o.gc, o.xtg)
	for a, ca := range o.cols {
		for b, cb := range o.cols {
			o.s[a*r+b] = (o.xtg[ca*r+b] - o.xtg[cb*r+a]) / 2
		}
	}
	// grad_C = G_C - X (X^T G_C) + X_C S; M = X_C - eta grad_C, in gc.
	linalg.Gemm(false, false, n, r, p, -1, o.x64, p, o.xtg, r, 1, o.gc, r)
	linalg.Gemm(false, false, n, r, r, 1, o.xc, r, o.s, r, 1, o.gc, r)
	for i, g := range o.gc {
		o.gc[i] = o.xc[i] - o.lr*g
	}
	if err := polar(o.xc, n, r, o.gc); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		for k, c := range o.cols {
			x[i*p+c] = T(o.xc[i*r+k])
		}
	}
	return nil
}

// OBCD is the orthogonality-constrained block coordinate descent of Yuan
// (2023), adapted to smooth problems as in the RSDM paper's appendix: a step
// draws r rows B and moves them by the orthogonal V that minimizes
// <V - I, G_B X_B^T> + ||V - I||^2 / (2 eta), V = polar(I - eta G_B X_B^T),
// X_B <- X_B + (V - I) X_B. Unlike RSDM-P's it uses the Euclidean, not the
// skew (Riemannian), part of G_B X_B^T. It costs O(r^2 p + r^3) a step.
type OBCD[T Float] struct {
	n, p, r int
	lr      float64
	rng     *rand.Rand
	perm    *manifold.Permutation
	rows    []int
	xb, gb  []float64 // r x p
	m, v    []float64 // r x r
	upd     []float64 // r x p
}

// NewOBCD returns OBCD for n x p weights, r rows a step (2 <= r <= n), step
// size lr, sampling from seed.
func NewOBCD[T Float](n, p, r int, lr float64, seed uint64) (*OBCD[T], error) {
	if err := checkNew(n, p, lr); err != nil {
		return nil, err
	}
	if r < 2 || r > n {
		return nil, fmt.Errorf("baseline: OBCD draws r = %d of %d rows", r, n)
	}
	perm, err := manifold.NewPermutation(n, r)
	if err != nil {
		return nil, err
	}
	return &OBCD[T]{n: n, p: p, r: r, lr: lr, rng: rand.New(rand.NewPCG(seed, 0x4f42)), perm: perm, rows: make([]int, r),
		xb: make([]float64, r*p), gb: make([]float64, r*p), m: make([]float64, r*r), v: make([]float64, r*r), upd: make([]float64, r*p)}, nil
}

// Step moves r random rows of x.
func (o *OBCD[T]) Step(x, grad []T) error {
	if err := checkStep(o.n, o.p, x, grad); err != nil {
		return err
	}
	p, r := o.p, o.r
	if err := o.perm.Sample(o.rows, o.rng); err != nil {
		return err
	}
	for k, row := range o.rows {
		for j := 0; j < p; j++ {
			o.xb[k*p+j] = float64(x[row*p+j])
			o.gb[k*p+j] = float64(grad[row*p+j])
		}
	}
	linalg.Mul(false, true, r, r, p, o.gb, o.xb, o.m)
	for i := range o.m {
		o.m[i] *= -o.lr
	}
	for i := 0; i < r; i++ {
		o.m[i*r+i]++
	}
	if err := polar(o.v, r, r, o.m); err != nil {
		return err
	}
	for i := 0; i < r; i++ {
		o.v[i*r+i]--
	}
	copy(o.upd, o.xb)
	linalg.Gemm(false, false, r, p, r, 1, o.v, r, o.xb, p, 1, o.upd, p)
	for k, row := range o.rows {
		for j := 0; j < p; j++ {
			x[row*p+j] = T(o.upd[k*p+j])
		}
	}
	return nil
}
