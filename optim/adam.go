package optim

import (
	"fmt"
)

// Adam, the rule "adam" of unconstrained parameters (AdamW, in adamw.go,
// is Adam with a default weight decay), described once
// (AdamConfig.Describe): optim/device steps it from its description (the
// kernel backend.AdamStep).

// AdamConfig holds the options of Adam; as a Rule it steps unconstrained
// parameters, with its group's decoupled weight decay.
type AdamConfig struct {
	// LR is the step size, finite and >= 0.
	LR float64
	// Beta1 and Beta2 are the decay rates of the moments, in [0, 1); zero
	// values select 0.9 and 0.999.
	Beta1, Beta2 float64
	// Eps is added to the root of the second moment; zero selects 1e-8.
	Eps float64
}

var _ Rule = AdamConfig{}

// String returns "adam", the name ParseRule reads and its States' Kind
// (AdamW's too).
func (AdamConfig) String() string { return "adam" }

// Constrained returns false.
func (AdamConfig) Constrained() bool { return false }

// Stepper returns Adam for p, with the group's weight decay; LR is
// ignored.
func (c AdamConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	if err := c.defaults(); err != nil {
		return nil, err
	}
	return BindDescribed(p, b, c)
}

var _ Described = AdamConfig{}

// Describe writes Adam's step, which the host and optim/device both run:
// the group's decoupled weight decay, then Adam's moments and step with
// bias correction at the step count t (StepBlocks.Adam).
func (c AdamConfig) Describe(b StepBlocks) error { return c.describe(b, b.WeightDecay()) }

// describe writes Adam's step with the weight decay decay.
func (c AdamConfig) describe(b StepBlocks, decay float64) error {
	if err := c.defaults(); err != nil {
		return err
	}
	b.Counter(StateStepCount)
	m, v := b.Buffer(StateFirstMoment), b.Buffer(StateSecondMoment)
	b.Decay(decay)
	b.Adam(m, v, c.Beta1, c.Beta2, c.Eps)
	return nil
}

// defaults fills in the zero settings and checks every setting.
func (c *AdamConfig) defaults() error {
	if err := checkLR(c.LR); err != nil {
		return err
	}
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	if !(c.Beta1 < 1 && c.Beta2 < 1 && c.Beta1 >= 0 && c.Beta2 >= 0 && c.Eps > 0) {
		return fmt.Errorf("optim: Adam betas %v, %v and eps %v: want betas in [0, 1) and eps > 0", c.Beta1, c.Beta2, c.Eps)
	}
	return nil
}

// Adam is Adam with bias correction (Kingma and Ba 2015) for an
// unconstrained parameter. The moments are updated in float64 and stored in
// the parameter's element type. Its step is AdamConfig.Describe's; its
// State holds the step count (StateStepCount) and, once a step has been
// taken, the moments (StateFirstMoment, StateSecondMoment).
type Adam[T Float] struct {
	*described[T]
	cfg AdamConfig
}

// NewAdam returns Adam for parameters of n entries.
func NewAdam[T Float](n int, cfg AdamConfig) (*Adam[T], error) {
	if n < 1 {
		return nil, fmt.Errorf("optim: Adam for %d entries, want at least 1", n)
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d, err := newDescribed[T](nil, n, cfg, 0)
	if err != nil {
		return nil, err
	}
	d.lr = cfg.LR
	return &Adam[T]{described: d, cfg: cfg}, nil
}

// Config returns the optimizer's settings, with the defaults filled in.
func (o *Adam[T]) Config() AdamConfig { return o.cfg }

// Step updates w from its gradient g. On error w is unchanged.
func (o *Adam[T]) Step(w, g []T) error { return step[T](o, checkPlain(o.n, w, g), w, g) }
