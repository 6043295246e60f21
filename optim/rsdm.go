package optim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// RSDM, the rule "rsdm" of constrained weights. Its step is described once
// (Describe: the block StepBlocks.Submanifold), from which the host's
// stepper (RSDM, below) and optim/device's are built.

// RSDMConfig holds the options of RSDM.
type RSDMConfig struct {
	// LR is the step size eta, finite and >= 0.
	LR float64
	// SubmanifoldSize is r, the dimension of the orthogonal group O(r) that a
	// step moves in. Required, 2 <= r <= n.
	SubmanifoldSize int
	// Sampling draws the submanifolds: Permutation (nil selects it),
	// Orthogonal, Blocks or a Sampler of one's own.
	Sampling Sampler
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

var (
	_ Configurable = RSDMConfig{}
	_ FactoredRule = RSDMConfig{}
	_ Described    = RSDMConfig{}
)

// String returns "rsdm", the name ParseRule reads and its States' Kind.
func (RSDMConfig) String() string { return "rsdm" }

// Constrained returns true.
func (RSDMConfig) Constrained() bool { return true }

// Settings returns RSDM's flags: "r" (SubmanifoldSize, 300 by default),
// "sampling" (a name of Samplers, perm by default) and "seed" (Seed, 1 by
// default).
func (RSDMConfig) Settings() []Setting {
	var names []string
	for _, s := range Samplers {
		names = append(names, s.String())
	}
	return []Setting{
		NewSetting("r", 300, "RSDM submanifold size r (2 <= r <= rows of every orthogonal weight)",
			func(c *RSDMConfig, r int) error {
				if r < 2 {
					return fmt.Errorf("RSDM's submanifold size must be at least 2 (and at most the rows of every orthogonal weight)")
				}
				c.SubmanifoldSize = r
				return nil
			}),
		NewSetting("sampling", Permutation.String(),
			"RSDM submanifold sampling: "+strings.Join(names, ", ")+" (perm: rows, orth: Haar rows, blocks: covering blocks of rows)",
			func(c *RSDMConfig, name string) error {
				i := slices.Index(names, name)
				if i < 0 {
					return fmt.Errorf("unknown sampler, want one of %s", strings.Join(names, ", "))
				}
				c.Sampling = Samplers[i]
				return nil
			}),
		NewSetting("seed", uint64(1), "seed of RSDM's samplers (each weight's drawn from it and the weight's index)",
			func(c *RSDMConfig, seed uint64) error { c.Seed = seed; return nil }),
	}
}

// FactorsGradients returns SubmanifoldSize and true: RSDM steps a weight
// along its gradient's factors, at a cost that grows with r.
func (c RSDMConfig) FactorsGradients() (r int, ok bool) { return c.SubmanifoldSize, true }

func (c RSDMConfig) with(s RuleSettings) Rule {
	c.SubmanifoldSize, c.Sampling, c.Seed = s.SubmanifoldSize, s.Sampling, s.Seed
	return c
}

// Describe writes RSDM's step: one StepBlocks.Submanifold step with c's
// settings.
func (c RSDMConfig) Describe(b StepBlocks) error {
	b.Submanifold(c)
	return nil
}

// Stepper returns RSDM for p, built from its description (BindDescribed),
// its sampler seeded from Seed and b.Index. Its LR is ignored: the Solver
// gives each step its group's.
func (c RSDMConfig) Stepper(p Param, b Binding) (Stepper, error) { return BindDescribed(p, b, c) }

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
	draws Draws                      // the sampler's draws for this weight
	sub   *Submanifold               // the last draw
	apply applier[T]                 // moves matrices in and out of sub
	inner *manifold.Stiefel[float64] // O(r)
	qr    linalg.QR[float64]

	steps int // steps taken

	saved     rand.PCG // the random source before the step under way
	reorthNow bool     // the step under way re-orthonormalizes
	scratch   []T      // n x p: the re-orthonormalized point
	fa, fc    []T      // K x r: A P^T and B (PX)^T of a factored gradient

	px0   []T // r x p: P X at the first inner step
	pxc   []T // r x p: P X now
	pg    []T // r x p: P G
	b     []T // r x r: P G (PX)^T
	omega []float64
	y     []float64 // r x r current Y
	yprev []float64
	ynew  []float64
	v     []float64
	tmp   []float64

	// split makes prepare stop at b = P G (PX)^T, which then lies in the
	// data-parallel Solver's buffer that the ranks sum (reduce.go).
	split bool
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
		return nil, fmt.Errorf("optim: RSDM submanifold size r = %d exceeds the %d rows of the weight (of its transpose, when it is wide): the largest r it takes is %d", r, n, n)
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
	if err := checkFrames(m, n, p); err != nil {
		return nil, err
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
	if cfg.Sampling == nil {
		o.cfg.Sampling = Permutation
	}
	if o.draws, err = o.cfg.Sampling.Start(n, r); err != nil {
		return nil, fmt.Errorf("optim: RSDM's %v sampler: %w", o.cfg.Sampling, err)
	}
	o.apply, o.sub = newApplier[T](o.cfg.Sampling, n, p, r)
	rr, rp := r*r, r*p
	o.px0, o.pxc, o.pg = make([]T, rp), make([]T, rp), make([]T, rp)
	o.b = make([]T, rr)
	o.omega, o.y, o.yprev, o.ynew, o.v, o.tmp = make([]float64, rr), make([]float64, rr), make([]float64, rr),
		make([]float64, rr), make([]float64, rr), make([]float64, rr)
	return o, nil
}

// checkFrames refuses a manifold whose points are not orthonormal n x p
// frames (X^T X = I): RSDM's step X <- U X keeps X^T X as it is, so on
// other points it need not descend. It checks a point that m draws.
func checkFrames[T Float](m manifold.Manifold[T], n, p int) error {
	x := make([]T, n*p)
	if err := m.Random(x, rand.New(rand.NewPCG(1, 2))); err != nil {
		return fmt.Errorf("optim: RSDM: drawing a point of %s to check that its points are orthonormal frames: %w", manifoldName(m), err)
	}
	if d := linalg.GramError(n, p, x, make([]float64, n*p+p*p)); !(d <= manifold.Tolerance(m)) {
		return fmt.Errorf("optim: RSDM steps weights whose points are orthonormal frames (X^T X = I: the Stiefel and Grassmann manifolds), "+
			"and a point of %s has ||X^T X - I||_F = %.3g; RGD and Riemannian Adam step it by its projection and retraction", manifoldName(m), d)
	}
	return nil
}

// manifoldName names m in a message: its String, else its type.
func manifoldName(m any) string {
	if s, ok := m.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("the manifold %T", m)
}

// NewCoordinateDescent returns Riemannian coordinate descent: RSDM with
// permutation sampling and r = 2, where every step rotates two random rows of
// X by a Givens rotation (the remark at the end of the paper's section 4).
func NewCoordinateDescent[T Float](m manifold.Manifold[T], lr float64, seed uint64) (*RSDM[T], error) {
	return NewRSDM(m, RSDMConfig{LR: lr, SubmanifoldSize: 2, Sampling: Permutation, Seed: seed})
}

// Steps returns the number of steps taken.
func (o *RSDM[T]) Steps() int { return o.steps }

// ReorthEvery returns how many steps apart the weight is
// re-orthonormalized (0: never), RSDMConfig.ReorthEvery with its default
// filled in.
func (o *RSDM[T]) ReorthEvery() int { return max(o.reorth, 0) }

// Draw is the first part of a step that another implementation takes (a
// device's): it draws the submanifold of the next step, as Step would
// (the same P for the same seed), and returns it. Undraw undoes it, for a
// step that fails before it moves the weight; Advance counts the step once
// it has moved it.
func (o *RSDM[T]) Draw() (*Submanifold, error) {
	o.saved = *o.src
	if o.phase() == 0 {
		if err := o.draws.Draw(o.rng, o.sub); err != nil {
			o.abort()
			return nil, fmt.Errorf("optim: RSDM's %v sampler: %w", o.cfg.Sampling, err)
		}
	}
	return o.sub, nil
}

// Undraw returns the sampler to where it was before the last Draw.
func (o *RSDM[T]) Undraw() { o.abort() }

// Advance counts a step taken from the last Draw.
func (o *RSDM[T]) Advance() { o.steps++ }

// phase returns the inner step within the current submanifold: 0 when the
// next step draws a new one.
func (o *RSDM[T]) phase() int { return o.steps % o.cfg.InnerSteps }

// Step takes one RSDM step from x along the Euclidean gradient grad. It reads
// only the sampled rows of grad under Permutation and Blocks sampling, but
// checks all of grad for NaN and Inf. On error neither x nor the optimizer's
// state (sampler, counters, inner loop) has changed.
func (o *RSDM[T]) Step(x, grad []T) error { return step[T](o, checkStep(o.n, o.p, x, grad), x, grad) }

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

// prepare computes the step from x along grad (the inner update Y_new) into
// the optimizer's workspaces, leaving x untouched; commit moves x by it and
// abort undoes the sampler's advance. Splitting the step lets a Solver update every
// parameter or none.
func (o *RSDM[T]) prepare(x, grad []T) error { return o.prepareFrom(x, grad, Factored[T]{}) }

// prepareFactored is prepare for a gradient given by its factors.
func (o *RSDM[T]) prepareFactored(x []T, g Factored[T]) error { return o.prepareFrom(x, nil, g) }

// prepareFrom computes one step of the paper's Algorithm 1 from x along
// grad (along fg when grad is nil) into workspaces; commit moves x:
//
//	3: sample the submanifold P and start at Y = I
//	4: Omega = skew(P G (PX)^T), the Riemannian gradient of F~ at I (eq. 3)
//	5: Y_new = R_I(-eta Omega)
//	6: X <- U(Y_new) X (commit)
//
// With InnerSteps = S > 1 (Algorithm 3) the S - 1 steps after a draw stay
// in its submanifold. A split step stops at b = P G (PX)^T, linear in G,
// which the ranks of a data-parallel Solver sum before finish (reduce.go).
func (o *RSDM[T]) prepareFrom(x, grad []T, fg Factored[T]) error {
	if _, err := o.Draw(); err != nil { // line 3, at the first step of a submanifold
		return err
	}
	if o.phase() == 0 {
		o.apply.project(o.px0, x)
		copy(o.pxc, o.px0)
		linalg.Identity(o.r, o.y)
		linalg.Identity(o.r, o.yprev)
	} else {
		o.apply.project(o.pxc, x)
	}
	if grad != nil {
		o.projectedGradient(grad)
	} else {
		o.factoredProduct(fg)
	}
	if o.split {
		return nil
	}
	return o.finish(x)
}

// finish goes on from b = P G (PX)^T: line 4's skew part, then line 5, at
// the first inner step from Y = I, at the later ones (Algorithm 3) from
// the current Y: Y_new = R_Y(-eta Omega Y) plus, with momentum beta,
// beta P_Y(Y - Y_prev) in the direction (line 7).
func (o *RSDM[T]) finish(x []T) error {
	skewPart(o.r, o.omega, o.b)
	if !linalg.Finite(o.omega) { // overflow in the product of finite factors
		return ErrNotFinite
	}
	if o.phase() == 0 {
		for i, w := range o.omega {
			o.v[i] = -o.cfg.LR * w
		}
		return o.retractAndForm(x)
	}
	r := o.r
	linalg.Gemm(false, false, r, r, r, -o.cfg.LR, o.omega, r, o.y, r, 0, o.v, r)
	if o.cfg.Momentum != 0 {
		if err := o.addMomentum(); err != nil {
			return err
		}
	}
	return o.retractAndForm(x)
}

// retractAndForm sets Y_new = R_Y(V). The move X <- U(Y_new) X_0 waits for
// commit, unless this step also re-orthonormalizes: that point is formed
// aside, so that a failure leaves x as it was.
func (o *RSDM[T]) retractAndForm(x []T) error {
	if err := o.retract(); err != nil {
		return fmt.Errorf("optim: RSDM inner retraction: %w", err)
	}
	o.reorthNow = o.reorth > 0 && (o.steps+1)%o.reorth == 0
	if o.reorthNow {
		o.scratch = linalg.Grow(o.scratch, len(x))
		copy(o.scratch, x)
		o.apply.update(o.scratch, o.px0, o.y, o.ynew)
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
		o.apply.update(x, o.px0, o.y, o.ynew)
	}
	o.yprev, o.y, o.ynew = o.y, o.ynew, o.yprev
	o.steps++
}

// abort restores the sampler to where it was before prepare. Everything
// else prepare wrote is either recomputed by the next step or, at the first
// inner step, reset by it.
func (o *RSDM[T]) abort() {
	*o.src = o.saved
	if o.phase() == 0 { // prepare drew
		o.draws.Undraw()
	}
}

// projectedGradient sets b = P G (PX)^T.
func (o *RSDM[T]) projectedGradient(grad []T) {
	o.apply.project(o.pg, grad)
	linalg.Mul(false, true, o.r, o.r, o.p, o.pg, o.pxc, o.b)
}

// factoredProduct sets b = P G (PX)^T for G = A^T B as (A P^T)^T (B (PX)^T).
func (o *RSDM[T]) factoredProduct(g Factored[T]) {
	r, p, k := o.r, o.p, g.K
	o.fc = linalg.Grow(o.fc, k*r)
	o.fa = linalg.Grow(o.fa, k*r)
	linalg.Gemm(false, true, k, r, p, 1, g.B, p, o.pxc, p, 0, o.fc, r)
	o.apply.projectFactor(o.fa, g.A, k)
	linalg.Gemm(true, false, r, r, k, 1, o.fa, r, o.fc, r, 0, o.b, r)
}

// skewPart sets omega = (b - b^T) / 2 for r x r matrices.
func skewPart[T Float](r int, omega []float64, b []T) {
	for i := 0; i < r; i++ {
		for j := 0; j < r; j++ {
			omega[i*r+j] = (float64(b[i*r+j]) - float64(b[j*r+i])) / 2
		}
	}
}

// addMomentum adds Algorithm 3's momentum beta P_Y(Y - Y_prev) to the
// direction V.
func (o *RSDM[T]) addMomentum() error {
	for i := range o.tmp {
		o.tmp[i] = o.y[i] - o.yprev[i]
	}
	if err := o.inner.Proj(o.tmp, o.y, o.tmp); err != nil {
		return err
	}
	for i, d := range o.tmp {
		o.v[i] += o.cfg.Momentum * d
	}
	return nil
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

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *RSDM[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// The names of RSDM's own entries in its State. Its sampler's entries go
// under samplerPrefix (see State.Sampler), so that a sampler's names never
// meet these.
const (
	rsdmSteps  = "steps"   // counter: steps taken
	rsdmPhase  = "phase"   // counter of states written before it was derived from steps
	rsdmSource = "sampler" // random source: the sampler's rng
	// An unfinished inner loop (Algorithm 3): the drawn rows (zeros for a
	// dense draw, which states have always held), the dense draw, P X_0,
	// Y and Y_prev.
	rsdmRows, rsdmFrame, rsdmPX0, rsdmY, rsdmYPrev = "rows", "haar_rows", "px0", "y", "yprev"
)

// State returns a copy of the optimizer's state: its own entries, and its
// sampler's draws' (Draws.Save) under their own names in State.Sampler.
func (o *RSDM[T]) State() State {
	s := emptyState(RSDMConfig{}.String())
	s.Counters[rsdmSteps] = int64(o.steps)
	b, _ := o.src.MarshalBinary() // cannot fail
	s.Random[rsdmSource] = b
	sub := emptyState(s.Kind)
	o.draws.Save(sub)
	s.setSampler(sub)
	if o.phase() != 0 { // an inner loop (Algorithm 3) is under way
		if o.cfg.Sampling.Rows() {
			s.Buffers[rsdmRows] = ints64(o.sub.Rows)
		} else {
			s.Buffers[rsdmFrame] = append([]T(nil), o.apply.(*frameApplier[T]).rows...)
			// States have always held "rows", which readers before dense
			// samplers required; a dense draw has no rows to list.
			s.Buffers[rsdmRows] = make([]int64, o.r)
		}
		s.Buffers[rsdmPX0] = append([]T(nil), o.px0...)
		s.Buffers[rsdmY] = append([]float64(nil), o.y...)
		s.Buffers[rsdmYPrev] = append([]float64(nil), o.yprev...)
	}
	return s
}

// SetState restores a state returned by State of an RSDM with the same
// configuration and weight shape, or a state written before its sampler
// had names of its own (see samplerOf). On error the optimizer is
// unchanged.
func (o *RSDM[T]) SetState(s State) error {
	if err := s.check(RSDMConfig{}.String()); err != nil {
		return err
	}
	steps, err := s.counter(rsdmSteps, 0, 1<<62)
	if err != nil {
		return err
	}
	// The inner step is steps % InnerSteps. States written before it was
	// derived also hold it as the counter "phase".
	phase := steps % o.cfg.InnerSteps
	if v, ok := s.Counters[rsdmPhase]; ok && v != int64(phase) {
		return fmt.Errorf("optim: rsdm state: counter %q = %d, want %d (steps %d mod inner steps %d)", rsdmPhase, v, phase, steps, o.cfg.InnerSteps)
	}
	inLoop := phase != 0
	// Restore into copies first, so that a bad state changes nothing.
	src := new(rand.PCG)
	b, ok := s.Random[rsdmSource]
	if !ok {
		return fmt.Errorf("optim: rsdm state has no random source %q", rsdmSource)
	}
	if err := src.UnmarshalBinary(b); err != nil {
		return fmt.Errorf("optim: rsdm state: random source %q: %w", rsdmSource, err)
	}
	restoreDraws, err := o.draws.Load(samplerOf(s))
	if err != nil {
		return err
	}
	restoreSub := func() {}
	px0 := make([]T, len(o.px0))
	y, yprev := make([]float64, len(o.y)), make([]float64, len(o.yprev))
	if inLoop {
		if restoreSub, err = o.loadDraw(s); err != nil {
			return err
		}
		if _, err := buffer(s, rsdmPX0, px0, false); err != nil {
			return err
		}
		if _, err := buffer(s, rsdmY, y, false); err != nil {
			return err
		}
		if _, err := buffer(s, rsdmYPrev, yprev, false); err != nil {
			return err
		}
	}
	*o.src = *src
	o.steps = steps
	restoreDraws()
	restoreSub()
	if inLoop {
		copy(o.px0, px0)
		copy(o.y, y)
		copy(o.yprev, yprev)
	}
	return nil
}

// samplerOf returns the entries of s that RSDM's sampler saved: those
// under samplerPrefix, renamed back; in a state written before they had a
// prefix, which holds none, every entry but RSDM's own.
func samplerOf(s State) State {
	sub := s.Sampler()
	if len(sub.Counters)+len(sub.Random)+len(sub.Buffers) > 0 {
		return sub
	}
	sub = emptyState(s.Kind)
	for k, v := range s.Counters {
		if k != rsdmSteps && k != rsdmPhase {
			sub.Counters[k] = v
		}
	}
	for k, v := range s.Random {
		if k != rsdmSource {
			sub.Random[k] = v
		}
	}
	for k, v := range s.Buffers {
		switch k {
		case rsdmRows, rsdmFrame, rsdmPX0, rsdmY, rsdmYPrev:
		default:
			sub.Buffers[k] = v
		}
	}
	return sub
}

// loadDraw checks the drawn submanifold of an inner loop in s and returns
// the function that restores it.
func (o *RSDM[T]) loadDraw(s State) (func(), error) {
	if !o.cfg.Sampling.Rows() {
		f := o.apply.(*frameApplier[T])
		rows := make([]T, len(f.rows))
		if _, err := buffer(s, rsdmFrame, rows, false); err != nil {
			return nil, err
		}
		return func() { copy(f.rows, rows) }, nil
	}
	idx := make([]int64, o.r)
	if _, err := buffer(s, rsdmRows, idx, false); err != nil {
		return nil, err
	}
	for _, v := range idx {
		if v < 0 || v >= int64(o.n) {
			return nil, fmt.Errorf("optim: rsdm state: sampled row %d outside 0 to %d", v, o.n-1)
		}
	}
	return func() {
		for i, v := range idx {
			o.sub.Rows[i] = int(v)
		}
	}, nil
}
