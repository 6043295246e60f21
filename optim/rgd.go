package optim

import (
	"fmt"

	"github.com/orthonet/orthonet/manifold"
)

// RGD, the rule "rgd" of constrained weights, described once
// (RGDConfig.Describe): optim/device steps it from its description.

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

var _ Described = RGDConfig{}

// Describe writes RGD's step, which the host and optim/device both run:
// rg = P_X(G); with momentum beta, mom = rg + beta mom, the direction;
// X <- R_X(-eta dir), the momentum carried to the new point by tangent
// projection.
func (c RGDConfig) Describe(b StepBlocks) error {
	rg, next := b.Buffer(""), b.Buffer("")
	b.Proj(rg, X, G)
	dir := rg
	if c.Momentum > 0 {
		mom := b.Buffer(StateMomentum)
		b.AddScaled(mom, rg, Coef{Value: c.Momentum}, mom)
		dir = mom
	}
	b.Retract(next, X, Coef{Value: -1, TimesLR: true}, dir)
	if c.Momentum > 0 {
		b.Proj(dir, next, dir)
	}
	b.Move(next)
	return nil
}

// RGD is Riemannian gradient descent, X <- R_X(-eta m) with m the Riemannian
// gradient, or with momentum m <- beta m + grad F(X). The retraction is the
// manifold's own (for example manifold.Stiefel.Retraction). Its step is
// RGDConfig.Describe's.
type RGD[T Float] struct {
	*described[T]
	p int
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
	d, err := newDescribed(m, 0, Described(cfg), 0)
	if err != nil {
		return nil, err
	}
	d.lr = cfg.LR
	_, p := m.Dims()
	return &RGD[T]{described: d, p: p}, nil
}

// Step takes one RGD step from x along the Euclidean gradient grad. On
// error neither x nor the momentum has changed.
func (o *RGD[T]) Step(x, grad []T) error {
	return step[T](o, checkStep(o.n/o.p, o.p, x, grad), x, grad)
}
