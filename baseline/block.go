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
	block[T]           // its idx are the columns C
	xc, gc   []float64 // n x r
	xtg      []float64 // p x r
	s        []float64 // r x r
	x64      []float64 // n x p
}

// NewRSSM returns RSSM for n x p weights, r columns a step (2 <= r <= p),
// step size lr, sampling from seed.
func NewRSSM[T Float](n, p, r int, lr float64, seed uint64) (*RSSM[T], error) {
	b, err := newBlock[T]("RSSM", n, p, r, 1, p, "columns", lr, rand.New(rand.NewPCG(seed, 0x5353)))
	if err != nil {
		return nil, err
	}
	return &RSSM[T]{block: b,
		xc: make([]float64, n*r), gc: make([]float64, n*r), xtg: make([]float64, p*r), s: make([]float64, r*r), x64: make([]float64, n*p)}, nil
}

// Step moves r random columns of x.
func (o *RSSM[T]) Step(x, grad []T) error {
	if err := o.draw(x, grad); err != nil {
		return err
	}
	n, p, r := o.n, o.p, o.r
	linalg.Convert(o.x64, x)
	for i := 0; i < n; i++ {
		for k, c := range o.idx {
			o.xc[i*r+k] = float64(x[i*p+c])
			o.gc[i*r+k] = float64(grad[i*p+c])
		}
	}
	// X^T G_C (p x r); its rows C are X_C^T G_C.
	linalg.Mul(true, false, p, r, n, o.x64, o.gc, o.xtg)
	for a, ca := range o.idx {
		for b, cb := range o.idx {
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
		for k, c := range o.idx {
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
	block[T]           // its idx are the rows B
	xb, gb   []float64 // r x p
	m, v     []float64 // r x r
	upd      []float64 // r x p
}

// NewOBCD returns OBCD for n x p weights, r rows a step (2 <= r <= n), step
// size lr, sampling from seed.
func NewOBCD[T Float](n, p, r int, lr float64, seed uint64) (*OBCD[T], error) {
	b, err := newBlock[T]("OBCD", n, p, r, 2, n, "rows", lr, rand.New(rand.NewPCG(seed, 0x4f42)))
	if err != nil {
		return nil, err
	}
	return &OBCD[T]{block: b,
		xb: make([]float64, r*p), gb: make([]float64, r*p), m: make([]float64, r*r), v: make([]float64, r*r), upd: make([]float64, r*p)}, nil
}

// Step moves r random rows of x.
func (o *OBCD[T]) Step(x, grad []T) error {
	if err := o.draw(x, grad); err != nil {
		return err
	}
	p, r := o.p, o.r
	for k, row := range o.idx {
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
	for k, row := range o.idx {
		for j := 0; j < p; j++ {
			x[row*p+j] = T(o.upd[k*p+j])
		}
	}
	return nil
}

// block is what RSSM and OBCD share: the weights' shape n x p, the step
// size, and the r indices (columns or rows) a step draws.
type block[T Float] struct {
	n, p, r int
	lr      float64
	rng     *rand.Rand
	perm    *manifold.Permutation
	idx     []int // this step's indices
}

// newBlock checks method's shape, step size and r (in [minR, m]), and
// returns a block that draws r of the m columns or rows (what) a step from
// rng.
func newBlock[T Float](method string, n, p, r, minR, m int, what string, lr float64, rng *rand.Rand) (block[T], error) {
	if err := checkNew(n, p, lr); err != nil {
		return block[T]{}, err
	}
	if r < minR || r > m {
		return block[T]{}, fmt.Errorf("baseline: %s draws r = %d of %d %s", method, r, m, what)
	}
	perm, err := manifold.NewPermutation(m, r)
	if err != nil {
		return block[T]{}, err
	}
	return block[T]{n: n, p: p, r: r, lr: lr, rng: rng, perm: perm, idx: make([]int, r)}, nil
}

// draw checks a step's arguments and draws its indices into idx.
func (b *block[T]) draw(x, grad []T) error {
	if err := checkStep(b.n, b.p, x, grad); err != nil {
		return err
	}
	return b.perm.Sample(b.idx, b.rng)
}
