package optim

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/update"
)

// SGD, the rule "sgd" of unconstrained parameters. Its device stepper is
// optim/device's sgd.go (the kernel backend.SGDStep).

// SGDConfig holds the options of SGD; as a Rule it steps unconstrained
// parameters, with its group's decoupled weight decay.
type SGDConfig struct {
	// LR is the step size, finite and >= 0.
	LR float64
	// Momentum is the heavy-ball coefficient mu in [0, 1); the default 0
	// gives plain gradient descent.
	Momentum float64
}

var _ Configurable = SGDConfig{}

// String returns "sgd", the name ParseRule reads and its States' Kind.
func (SGDConfig) String() string { return "sgd" }

// Constrained returns false.
func (SGDConfig) Constrained() bool { return false }

// Settings returns SGD's flag "momentum" (Momentum, 0.9 by default).
func (SGDConfig) Settings() []Setting {
	return []Setting{NewSetting("momentum", 0.9, "SGD momentum of the unconstrained parameters",
		func(c *SGDConfig, beta float64) error { c.Momentum = beta; return checkMomentumSetting(beta) })}
}

func (c SGDConfig) with(s RuleSettings) Rule { c.Momentum = s.Momentum; return c }

// Stepper returns SGD for p, with the group's weight decay; LR is ignored.
func (c SGDConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	return bind(p, b, ofSize(NewSGD[float32], c), ofSize(NewSGD[float64], c))
}

// SGD is stochastic gradient descent for an unconstrained parameter, with
// optional heavy-ball momentum as PyTorch's SGD has it: v = mu v + g,
// w -= lr v.
type SGD[T Float] struct {
	cfg SGDConfig
	n   int
	mom []T // nil before the first step with momentum
}

// NewSGD returns SGD for parameters of n entries.
func NewSGD[T Float](n int, cfg SGDConfig) (*SGD[T], error) {
	if n < 1 {
		return nil, fmt.Errorf("optim: SGD for %d entries, want at least 1", n)
	}
	if err := checkLR(cfg.LR); err != nil {
		return nil, err
	}
	if err := checkMomentum(cfg.Momentum); err != nil {
		return nil, err
	}
	return &SGD[T]{cfg: cfg, n: n}, nil
}

// Step updates w from its gradient g. On error w is unchanged.
func (o *SGD[T]) Step(w, g []T) error { return step[T](o, checkPlain(o.n, w, g), w, g) }

func (o *SGD[T]) prepare(_, _ []T) error { return nil }
func (o *SGD[T]) abort()                 {}

func (o *SGD[T]) commit(w, g []T) {
	if o.cfg.Momentum != 0 && o.mom == nil {
		o.mom = make([]T, len(w))
	}
	update.SGD(w, g, o.mom, T(o.cfg.LR), T(o.cfg.Momentum))
}

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *SGD[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// State returns a copy of the optimizer's state: the momentum buffer
// (StateMomentum), once a step with momentum has been taken.
func (o *SGD[T]) State() State { return momentumState(SGDConfig{}.String(), o.mom) }

// SetState restores a state returned by State of an SGD with the same
// configuration and size. On error the optimizer is unchanged.
func (o *SGD[T]) SetState(st State) error {
	return restoreMomentum(st, SGDConfig{}.String(), o.cfg.Momentum, &o.mom, o.n)
}
