package optim

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Sampling selects how RSDM draws the r-dimensional submanifold of a step.
type Sampling int

const (
	// Permutation picks r distinct rows uniformly (RSDM-P): a step reads and
	// writes only those rows, O(r^2 p + r^3).
	Permutation Sampling = iota
	// Orthogonal takes r rows of a Haar-random orthogonal matrix (RSDM-O):
	// every row moves, O(npr).
	Orthogonal
	// Blocks partitions the rows at random into ceil(n/r) blocks of r and
	// visits each block once per pass, so that every pass covers every row
	// (the paper's Algorithm 2, which converges deterministically). When r
	// does not divide n the last block of a pass overlaps the one before it.
	Blocks
)

// String returns the sampling's short name: perm, orth or blocks.
func (s Sampling) String() string {
	switch s {
	case Permutation:
		return "perm"
	case Orthogonal:
		return "orth"
	case Blocks:
		return "blocks"
	}
	return fmt.Sprintf("Sampling(%d)", int(s))
}

// RSDMConfig holds the options of RSDM.
type RSDMConfig struct {
	// LR is the step size eta. Required, > 0.
	LR float64
	// SubmanifoldSize is r, the dimension of the orthogonal group O(r) that a
	// step moves in. Required, 2 <= r <= n.
	SubmanifoldSize int
	// Sampling draws the submanifold. The default is Permutation.
	Sampling Sampling
	// Retraction on O(r) for the inner update. The default is QR.
	Retraction manifold.Retraction
	// Momentum is the coefficient beta of RSDM-momentum (the paper's
	// Algorithm 3), in [0, 1). The default 0 gives plain RSDM.
	Momentum float64
	// InnerSteps is S, the number of consecutive steps taken in one sampled
	// submanifold before a new one is drawn (Algorithm 3). The default 1
	// draws a new submanifold every step.
	InnerSteps int
	// Seed seeds the sampler; the same seed gives the same steps.
	Seed uint64
	// ReorthEvery re-orthonormalizes the weight (QR with sign fix, O(np^2))
	// every ReorthEvery steps. A step multiplies rows of X by an orthogonal
	// matrix that is orthogonal only to rounding, so ||X^T X - I|| drifts.
	// In float32 on a 256 x 128 weight with random gradients we measured
	// 2e-5 after 10,000 permutation steps and ~1e-4 after 2,000 orthogonal
	// ones, which update every row. 0 selects the default: every 1000 steps
	// for float32 (under 1% of the step cost at r = 300, n = p = 1024), never
	// for float64, whose drift stays near 1e-12. A negative value disables it.
	ReorthEvery int
}

// RSDM is the Riemannian random submanifold descent method (the paper's
// Algorithms 1-3). Each step moves X only inside the orbit of a random
// r-dimensional subgroup: X <- U(Y) X with U(Y) = P^T diag(Y, I) P and
// Y = R_I(-eta grad F~(I)) on O(r). It works on any quotient of O(n) whose
// points are orthonormal n x p frames: Stiefel and Grassmann.
type RSDM[T Float] struct {
	cfg    RSDMConfig
	m      manifold.Manifold[T]
	n, p   int
	r      int
	reorth int

	src   *rand.PCG
	rng   *rand.Rand
	perm  *manifold.Permutation
	haar  *manifold.HaarRows[T]
	inner *manifold.Stiefel[float64] // O(r)
	qr    linalg.QR[float64]

	steps int // steps taken
	phase int // inner step within the current submanifold

	saved     rsdmSaved // the sampler before the step under way
	orderPrev []int     // the Blocks order before a reshuffle
	reorthNow bool      // the step under way re-orthonormalizes
	scratch   []T       // n x p: the re-orthonormalized point
	fa, fc    []T       // K x r: A P^T and B (PX)^T of a factored gradient

	idx   []int // sampled rows (Permutation, Blocks)
	order []int // current pass's row order (Blocks)
	block int   // next block in order (Blocks)
	pmat  []T   // r x n sampled rows (Orthogonal)
	px0   []T   // r x p: P X at the first inner step
	pxc   []T   // r x p: P X now
	pg    []T   // r x p: P G
	b     []T   // r x r
	omega []float64
	y     []float64 // r x r current Y
	yprev []float64
	ynew  []float64
	v     []float64
	tmp   []float64
	yt    []T       // r x r in T
	upd   []T       // r x p
	wide  []float64 // AddMul's workspace
}

var _ Optimizer[float64] = (*RSDM[float64])(nil)

// rsdmSaved is what abort restores.
type rsdmSaved struct {
	src   rand.PCG
	block int
	order bool // orderPrev holds the order before this step's reshuffle
}

// NewRSDM returns RSDM for weights on m (a Stiefel or Grassmann manifold).
func NewRSDM[T Float](m manifold.Manifold[T], cfg RSDMConfig) (*RSDM[T], error) {
	if m == nil {
		return nil, fmt.Errorf("optim: RSDM needs a manifold")
	}
	n, p := m.Dims()
	r := cfg.SubmanifoldSize
	switch {
	case r < 2:
		return nil, fmt.Errorf("optim: RSDM submanifold size r = %d, want r >= 2 (O(1) has no tangent directions)", r)
	case r > n:
		return nil, fmt.Errorf("optim: RSDM submanifold size r = %d exceeds the %d rows of the weight", r, n)
	}
	if err := checkLR(cfg.LR); err != nil {
		return nil, err
	}
	if err := checkMomentum(cfg.Momentum); err != nil {
		return nil, err
	}
	if cfg.InnerSteps < 0 {
		return nil, fmt.Errorf("optim: RSDM inner steps %d, want >= 1 (0 means 1)", cfg.InnerSteps)
	}
	if cfg.InnerSteps == 0 {
		cfg.InnerSteps = 1
	}
	if cfg.Momentum > 0 && cfg.InnerSteps == 1 {
		return nil, fmt.Errorf("optim: RSDM momentum needs InnerSteps > 1: momentum acts within one submanifold (Algorithm 3)")
	}
	inner, err := manifold.NewStiefel[float64](r, r)
	if err != nil {
		return nil, err
	}
	inner.Retraction = cfg.Retraction
	o := &RSDM[T]{cfg: cfg, m: m, n: n, p: p, r: r, inner: inner}
	o.reorth = cfg.ReorthEvery
	if o.reorth == 0 && linalg.Is32[T]() {
		o.reorth = 1000
	}
	o.src = rand.NewPCG(cfg.Seed, 0x5244534d) // "RSDM"
	o.rng = rand.New(o.src)
	switch cfg.Sampling {
	case Permutation:
		if o.perm, err = manifold.NewPermutation(n, r); err != nil {
			return nil, err
		}
	case Orthogonal:
		if o.haar, err = manifold.NewHaarRows[T](n, r); err != nil {
			return nil, err
		}
		o.pmat = make([]T, r*n)
	case Blocks:
		o.order, o.orderPrev = make([]int, n), make([]int, n)
		o.block = -1
	default:
		return nil, fmt.Errorf("optim: unknown sampling %v", cfg.Sampling)
	}
	o.idx = make([]int, r)
	rr, rp := r*r, r*p
	o.px0, o.pxc, o.pg, o.upd = make([]T, rp), make([]T, rp), make([]T, rp), make([]T, rp)
	o.b, o.yt = make([]T, rr), make([]T, rr)
	o.omega, o.y, o.yprev, o.ynew, o.v, o.tmp = make([]float64, rr), make([]float64, rr), make([]float64, rr),
		make([]float64, rr), make([]float64, rr), make([]float64, rr)
	return o, nil
}

// NewCoordinateDescent returns Riemannian coordinate descent: RSDM with
// permutation sampling and r = 2, where every step rotates two random rows of
// X by a Givens rotation (the remark at the end of the paper's section 4).
func NewCoordinateDescent[T Float](m manifold.Manifold[T], lr float64, seed uint64) (*RSDM[T], error) {
	return NewRSDM(m, RSDMConfig{LR: lr, SubmanifoldSize: 2, Sampling: Permutation, Seed: seed})
}

// Steps returns the number of steps taken.
func (o *RSDM[T]) Steps() int { return o.steps }

// Step takes one RSDM step from x along the Euclidean gradient grad. It reads
// only the sampled rows of grad under Permutation and Blocks sampling, but
// checks all of grad for NaN and Inf. On error neither x nor the optimizer's
// state (sampler, counters, inner loop) has changed.
func (o *RSDM[T]) Step(x, grad []T) error {
	if err := checkStep(o.n, o.p, x, grad); err != nil {
		return err
	}
	if err := o.prepare(x, grad); err != nil {
		o.abort()
		return err
	}
	o.commit(x, grad)
	return nil
}

// prepare computes the step from x along grad into the optimizer's
// workspaces, leaving x untouched; commit applies it and abort undoes the
// sampler's advance. Splitting the step lets a Solver update every
// parameter or none.
func (o *RSDM[T]) prepare(x, grad []T) error { return o.prepareFrom(x, grad, Factored[T]{}) }

// prepareFactored is prepare for a gradient given by its factors.
func (o *RSDM[T]) prepareFactored(x []T, g Factored[T]) error { return o.prepareFrom(x, nil, g) }

// prepareFrom is prepare from grad, or from fg when grad is nil.
func (o *RSDM[T]) prepareFrom(x, grad []T, fg Factored[T]) error {
	o.saved = rsdmSaved{src: *o.src, block: o.block, order: false}
	r, p := o.r, o.p
	if o.phase == 0 {
		if err := o.sample(); err != nil {
			return err
		}
		o.project(o.px0, x)
		copy(o.pxc, o.px0)
		linalg.Identity(r, o.y)
		linalg.Identity(r, o.yprev)
	} else {
		o.project(o.pxc, x)
	}
	// Omega = skew(PG (PX)^T): the Riemannian gradient of F~ on O(r),
	// translated to the identity (equation (2); Algorithm 3 for Y != I).
	if grad != nil {
		o.project(o.pg, grad)
		linalg.Mul(false, true, r, r, p, o.pg, o.pxc, o.b)
	} else {
		o.factoredProduct(fg)
	}
	for i := 0; i < r; i++ {
		for j := 0; j < r; j++ {
			o.omega[i*r+j] = (float64(o.b[i*r+j]) - float64(o.b[j*r+i])) / 2
		}
	}
	if !linalg.Finite(o.omega) { // overflow in the product of finite factors
		return ErrNotFinite
	}
	// V = -eta Omega Y + beta P_Y(Y - Y_prev).
	if o.phase == 0 {
		for i, w := range o.omega {
			o.v[i] = -o.cfg.LR * w
		}
	} else {
		linalg.Gemm(false, false, r, r, r, -o.cfg.LR, o.omega, r, o.y, r, 0, o.v, r)
		if o.cfg.Momentum > 0 {
			for i := range o.tmp {
				o.tmp[i] = o.y[i] - o.yprev[i]
			}
			if err := o.inner.Proj(o.tmp, o.y, o.tmp); err != nil {
				return err
			}
			for i, d := range o.tmp {
				o.v[i] += o.cfg.Momentum * d
			}
		}
	}
	if err := o.retract(); err != nil {
		return fmt.Errorf("optim: RSDM inner retraction: %w", err)
	}
	o.correction()
	o.reorthNow = o.reorth > 0 && (o.steps+1)%o.reorth == 0
	if o.reorthNow {
		// The re-orthonormalized point is formed aside, so that a failure
		// leaves x as it was.
		o.scratch = linalg.Grow(o.scratch, len(x))
		copy(o.scratch, x)
		o.apply(o.scratch)
		if err := o.m.Orthonormalize(o.scratch); err != nil {
			return fmt.Errorf("optim: RSDM: %w", err)
		}
	}
	return nil
}

// commit applies the step that prepare computed.
func (o *RSDM[T]) commit(x, _ []T) {
	if o.reorthNow {
		copy(x, o.scratch)
	} else {
		o.apply(x)
	}
	o.yprev, o.y, o.ynew = o.y, o.ynew, o.yprev
	o.steps++
	if o.phase++; o.phase == o.cfg.InnerSteps {
		o.phase = 0
	}
}

// abort restores the sampler to where it was before prepare. Everything
// else prepare wrote is either recomputed by the next step or, at the first
// inner step, reset by it.
func (o *RSDM[T]) abort() {
	*o.src = o.saved.src
	o.block = o.saved.block
	if o.saved.order {
		copy(o.order, o.orderPrev)
	}
}

// StepFactored takes one RSDM step from x along the Euclidean gradient
// g.A^T g.B, without forming it: the gradient of a linear layer's weight
// over a batch of K examples is such a product, and a step needs only
// P G (PX)^T = (A P^T)^T (B (PX)^T), two products of K x r matrices instead
// of one of r x p by p x r. On error x and the state are unchanged.
func (o *RSDM[T]) StepFactored(x []T, g Factored[T]) error {
	if err := checkFactored(o.n, o.p, x, g); err != nil {
		return err
	}
	if err := o.prepareFactored(x, g); err != nil {
		o.abort()
		return err
	}
	o.commit(x, nil)
	return nil
}

// factoredProduct sets b = P G (PX)^T for G = A^T B.
func (o *RSDM[T]) factoredProduct(g Factored[T]) {
	r, p, n, k := o.r, o.p, o.n, g.K
	o.fc = linalg.Grow(o.fc, k*r)
	o.fa = linalg.Grow(o.fa, k*r)
	// C = B (PX)^T, K x r.
	linalg.Gemm(false, true, k, r, p, 1, g.B, p, o.pxc, p, 0, o.fc, r)
	// A P^T, K x r: the sampled columns of A, or its product with the Haar
	// rows.
	if o.cfg.Sampling == Orthogonal {
		linalg.Gemm(false, true, k, r, n, 1, g.A, n, o.pmat, n, 0, o.fa, r)
	} else {
		for j := 0; j < k; j++ {
			row, dst := g.A[j*n:(j+1)*n], o.fa[j*r:(j+1)*r]
			for i, c := range o.idx {
				dst[i] = row[c]
			}
		}
	}
	linalg.Gemm(true, false, r, r, k, 1, o.fa, r, o.fc, r, 0, o.b, r)
}

// retract sets Y_new = R_Y(V) on O(r). For the QR retraction it uses the
// Cholesky route: V is tangent at the orthogonal Y, so
// (Y + V)^T (Y + V) = I + V^T V has eigenvalues in [1, 1 + ||V||_F^2], a
// condition bound that lets linalg.QFGram pick the fast path safely.
func (o *RSDM[T]) retract() error {
	if o.cfg.Retraction != manifold.QR {
		return o.inner.Retract(o.ynew, o.y, o.v)
	}
	for i, v := range o.v {
		o.ynew[i] = o.y[i] + v
	}
	return o.qr.QFGram(o.r, o.ynew, 1+linalg.Dot(o.v, o.v))
}

// sample draws the submanifold of the next outer iteration.
func (o *RSDM[T]) sample() error {
	switch o.cfg.Sampling {
	case Permutation:
		return o.perm.Sample(o.idx, o.rng)
	case Orthogonal:
		return o.haar.Sample(o.pmat, o.rng)
	}
	// Blocks: a fresh random order of all rows at the start of each pass.
	nb := (o.n + o.r - 1) / o.r
	if o.block < 0 || o.block == nb {
		copy(o.orderPrev, o.order)
		o.saved.order = true
		for i := range o.order {
			o.order[i] = i
		}
		o.rng.Shuffle(o.n, func(i, j int) { o.order[i], o.order[j] = o.order[j], o.order[i] })
		o.block = 0
	}
	start := min(o.block*o.r, o.n-o.r)
	copy(o.idx, o.order[start:start+o.r])
	o.block++
	return nil
}

// project writes P a into dst (r x p): a gather of rows, or a product with
// the sampled Haar rows.
func (o *RSDM[T]) project(dst, a []T) {
	p := o.p
	if o.cfg.Sampling == Orthogonal {
		linalg.Mul(false, false, o.r, p, o.n, o.pmat, a, dst)
		return
	}
	for i, row := range o.idx {
		copy(dst[i*p:i*p+p], a[row*p:row*p+p])
	}
}

// correction forms the change of the sampled rows: for Permutation and
// Blocks the new rows U(Y_new) X_0 = X_0 + (Y_new - I) P X_0 (in upd), for
// Orthogonal (Y_new - Y) P X_0, which apply adds to X through P^T. X_0 is the
// point at the first inner step; with the current point X = U(Y) X_0 both
// forms add a small correction instead of multiplying by Y_new itself: in
// float32 the rounding of the correction is relative to its own small size,
// which keeps ||X^T X - I|| from drifting by eps * ||Y|| a step.
func (o *RSDM[T]) correction() {
	r, p := o.r, o.p
	if o.cfg.Sampling != Orthogonal {
		for i := range o.yt {
			o.yt[i] = T(o.ynew[i])
		}
		for i := 0; i < r; i++ {
			o.yt[i*r+i] = T(o.ynew[i*r+i] - 1)
		}
		copy(o.upd, o.px0)
		linalg.AddMul(r, p, r, o.yt, o.px0, o.upd, &o.wide)
		return
	}
	for i := range o.yt {
		o.yt[i] = T(o.ynew[i] - o.y[i])
	}
	linalg.Mul(false, false, r, p, r, o.yt, o.px0, o.upd)
}

// apply writes the step that correction formed into x.
func (o *RSDM[T]) apply(x []T) {
	p := o.p
	if o.cfg.Sampling != Orthogonal {
		for i, row := range o.idx {
			copy(x[row*p:row*p+p], o.upd[i*p:i*p+p])
		}
		return
	}
	linalg.Gemm(true, false, o.n, p, o.r, 1, o.pmat, o.n, o.upd, p, 1, x, p)
}
