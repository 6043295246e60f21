package optim

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// RGD, the rule "rgd" of constrained weights. Its device stepper is
// optim/device's rgd.go.

// RGDConfig holds the options of Riemannian gradient descent, those of
// SGD: the step size eta (LR) and the heavy-ball coefficient beta
// (Momentum; 0 gives plain RGD), whose buffer is carried to each new point
// by tangent projection.
type RGDConfig SGDConfig

var _ Configurable = RGDConfig{}

// String returns "rgd", the name ParseRule reads and its States' Kind.
func (RGDConfig) String() string { return "rgd" }

// Constrained returns true.
func (RGDConfig) Constrained() bool { return true }

// Settings returns RGD's flag "rgd-momentum" (Momentum, 0.9 by default).
func (RGDConfig) Settings() []Setting {
	return []Setting{NewSetting("rgd-momentum", 0.9, "momentum of RGD on the orthogonal weights",
		func(c *RGDConfig, beta float64) error { c.Momentum = beta; return checkMomentumSetting(beta) })}
}

func (c RGDConfig) with(s RuleSettings) Rule { c.Momentum = s.Momentum; return c }

// Stepper returns RGD for p; LR is ignored.
func (c RGDConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	return bind(p, b, onManifold(NewRGD[float32], c), onManifold(NewRGD[float64], c))
}

// RGD is Riemannian gradient descent, X <- R_X(-eta m) with m the Riemannian
// gradient, or with momentum m <- beta m + grad F(X). The retraction is the
// manifold's own (for example manifold.Stiefel.Retraction).
type RGD[T Float] struct {
	cfg  RGDConfig
	m    manifold.Manifold[T]
	n, p int
	rg   []T
	next []T
	mom  []T // nil before the first step
	// momNext is the momentum prepare computed.
	momNext []T
}

// NewRGD returns RGD on m.
func NewRGD[T Float](m manifold.Manifold[T], cfg RGDConfig) (*RGD[T], error) {
	if m == nil {
		return nil, fmt.Errorf("optim: RGD needs a manifold")
	}
	if err := checkLR(cfg.LR); err != nil {
		return nil, err
	}
	if err := checkMomentum(cfg.Momentum); err != nil {
		return nil, err
	}
	n, p := m.Dims()
	return &RGD[T]{cfg: cfg, m: m, n: n, p: p}, nil
}

// Step takes one RGD step from x along the Euclidean gradient grad. On
// error neither x nor the momentum has changed.
func (o *RGD[T]) Step(x, grad []T) error { return step[T](o, checkStep(o.n, o.p, x, grad), x, grad) }

// prepare computes the next point (and momentum) into workspaces.
func (o *RGD[T]) prepare(x, grad []T) error {
	o.rg = linalg.Grow(o.rg, len(x))
	if err := o.m.Proj(o.rg, x, grad); err != nil {
		return err
	}
	dir := o.rg
	if o.cfg.Momentum > 0 {
		o.momNext = linalg.Grow(o.momNext, len(x))
		b := T(o.cfg.Momentum)
		for i, g := range o.rg {
			var prev T // the momentum is zero before the first step
			if o.mom != nil {
				prev = o.mom[i]
			}
			o.momNext[i] = b*prev + g
		}
		dir = o.momNext
	}
	lr := T(o.cfg.LR)
	for i, d := range dir {
		o.rg[i] = -lr * d
	}
	o.next = linalg.Grow(o.next, len(x))
	if err := o.m.Retract(o.next, x, o.rg); err != nil {
		return fmt.Errorf("optim: RGD: %w", err)
	}
	if o.cfg.Momentum > 0 {
		// The momentum travels to the new point by tangent projection.
		return o.m.Proj(o.momNext, o.next, o.momNext)
	}
	return nil
}

// commit moves x to the point prepare computed.
func (o *RGD[T]) commit(x, _ []T) {
	copy(x, o.next)
	if o.cfg.Momentum > 0 {
		o.mom, o.momNext = o.momNext, o.mom
	}
}

func (o *RGD[T]) abort() {}

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *RGD[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// State returns a copy of the optimizer's state: the momentum buffer
// (StateMomentum), once a step with momentum has been taken.
func (o *RGD[T]) State() State { return momentumState(RGDConfig{}.String(), o.mom) }

// SetState restores a state returned by State of an RGD with the same
// configuration and weight shape. On error the optimizer is unchanged.
func (o *RGD[T]) SetState(s State) error {
	return restoreMomentum(s, RGDConfig{}.String(), o.cfg.Momentum, &o.mom, o.n*o.p)
}
