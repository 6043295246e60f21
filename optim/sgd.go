package optim

import (
	"fmt"
)

// SGD, the rule "sgd" of unconstrained parameters, described once
// (SGDConfig.Describe): optim/device steps it from its description (the
// kernel backend.SGDStep).

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
	if err := checkMomentum(c.Momentum); err != nil {
		return nil, err
	}
	return BindDescribed(p, b, c)
}

var _ Described = SGDConfig{}

// Describe writes SGD's step, which the host and optim/device both run:
// the group's decoupled weight decay X <- (1 - eta wd) X, then with
// momentum mu mom <- mu mom + G and X <- X - eta mom (PyTorch's heavy
// ball), else X <- X - eta G.
func (c SGDConfig) Describe(b StepBlocks) error {
	if err := checkMomentum(c.Momentum); err != nil {
		return err
	}
	mom := None
	if c.Momentum != 0 {
		mom = b.Buffer(StateMomentum)
	}
	b.Decay(b.WeightDecay())
	b.SGD(mom, c.Momentum)
	return nil
}

// SGD is stochastic gradient descent for an unconstrained parameter, with
// optional heavy-ball momentum as PyTorch's SGD has it: v = mu v + g,
// w -= lr v. Its step is SGDConfig.Describe's; its State holds the
// momentum buffer (StateMomentum) once a step with momentum was taken.
type SGD[T Float] struct{ *described[T] }

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
	d, err := newDescribed[T](nil, n, cfg, 0)
	if err != nil {
		return nil, err
	}
	d.lr = cfg.LR
	return &SGD[T]{d}, nil
}

// Step updates w from its gradient g. On error w is unchanged.
func (o *SGD[T]) Step(w, g []T) error { return step[T](o, checkPlain(o.n, w, g), w, g) }
