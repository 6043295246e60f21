package optim

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Riemannian Adam, the rule "radam" of constrained weights; it has no
// device stepper.

// RiemannianAdamConfig holds the options of RiemannianAdam, those of Adam.
type RiemannianAdamConfig AdamConfig

var _ Rule = RiemannianAdamConfig{}

// String returns "radam", the name ParseRule reads and its States' Kind.
func (RiemannianAdamConfig) String() string { return "radam" }

// Constrained returns true.
func (RiemannianAdamConfig) Constrained() bool { return true }

// Stepper returns Riemannian Adam for p; LR is ignored.
func (c RiemannianAdamConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	return bind(p, b, onManifold(NewRiemannianAdam[float32], c), onManifold(NewRiemannianAdam[float64], c))
}

// RiemannianAdam is Adam on a matrix manifold (Bécigneul and Ganea, ICLR
// 2019), as geoopt's RiemannianAdam does it for the Stiefel manifold with
// the Euclidean metric: the Riemannian gradient g = P_X(G) feeds the first
// moment m and, entry by entry, the second moment v; the point moves to
// R_X(-lr m^ / (sqrt(v^) + eps)) with the bias-corrected moments m^ and v^,
// and the first moment is carried to the new point by tangent projection.
type RiemannianAdam[T Float] struct {
	cfg  RiemannianAdamConfig
	m    manifold.Manifold[T]
	n, p int
	t    int
	mom  []T // first moment; nil before the first step
	sq   []T // second moment
	// The step under way, formed by prepare.
	rg, dir, next, momNext, sqNext []T
}

var _ Optimizer[float64] = (*RiemannianAdam[float64])(nil)

// NewRiemannianAdam returns Riemannian Adam on m.
func NewRiemannianAdam[T Float](m manifold.Manifold[T], cfg RiemannianAdamConfig) (*RiemannianAdam[T], error) {
	if m == nil {
		return nil, fmt.Errorf("optim: Riemannian Adam needs a manifold")
	}
	ac := AdamConfig(cfg)
	if err := ac.defaults(); err != nil {
		return nil, err
	}
	cfg = RiemannianAdamConfig(ac)
	n, p := m.Dims()
	return &RiemannianAdam[T]{cfg: cfg, m: m, n: n, p: p}, nil
}

// Step takes one step from x along the Euclidean gradient grad. On error
// neither x nor the moments have changed.
func (o *RiemannianAdam[T]) Step(x, grad []T) error {
	return step[T](o, checkStep(o.n, o.p, x, grad), x, grad)
}

func (o *RiemannianAdam[T]) prepare(x, grad []T) error {
	size := len(x)
	o.rg = linalg.Grow(o.rg, size)
	o.dir = linalg.Grow(o.dir, size)
	o.next = linalg.Grow(o.next, size)
	o.momNext = linalg.Grow(o.momNext, size)
	o.sqNext = linalg.Grow(o.sqNext, size)
	if err := o.m.Proj(o.rg, x, grad); err != nil {
		return err
	}
	t := o.t + 1
	b1, b2, eps := o.cfg.Beta1, o.cfg.Beta2, o.cfg.Eps
	c1 := 1 - math.Pow(b1, float64(t))
	c2 := 1 - math.Pow(b2, float64(t))
	step := o.cfg.LR / c1
	for i, g := range o.rg {
		var m0, v0 float64
		if o.mom != nil {
			m0, v0 = float64(o.mom[i]), float64(o.sq[i])
		}
		gi := float64(g)
		m := b1*m0 + (1-b1)*gi
		v := b2*v0 + (1-b2)*gi*gi
		o.momNext[i], o.sqNext[i] = T(m), T(v)
		o.dir[i] = T(-step * m / (math.Sqrt(v/c2) + eps))
	}
	if err := o.m.Retract(o.next, x, o.dir); err != nil {
		return fmt.Errorf("optim: Riemannian Adam: %w", err)
	}
	// The first moment travels to the new point by tangent projection.
	return o.m.Proj(o.momNext, o.next, o.momNext)
}

func (o *RiemannianAdam[T]) commit(x, _ []T) {
	copy(x, o.next)
	if o.mom == nil {
		o.mom, o.sq = make([]T, len(x)), make([]T, len(x))
	}
	o.mom, o.momNext = o.momNext, o.mom
	o.sq, o.sqNext = o.sqNext, o.sq
	o.t++
}

func (o *RiemannianAdam[T]) abort() {}

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *RiemannianAdam[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// State returns a copy of the optimizer's state: the step count
// (StateStepCount) and, once a step has been taken, the moments
// (StateFirstMoment, StateSecondMoment).
func (o *RiemannianAdam[T]) State() State {
	return momentState(RiemannianAdamConfig{}.String(), o.t, o.mom, o.sq)
}

// SetState restores a state returned by State of a Riemannian Adam with the
// same configuration and weight shape. On error the optimizer is unchanged.
func (o *RiemannianAdam[T]) SetState(st State) error {
	return restoreMoments(st, RiemannianAdamConfig{}.String(), o.n*o.p, &o.t, &o.mom, &o.sq)
}
