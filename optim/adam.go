package optim

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/update"
)

// Adam, the rule "adam" of unconstrained parameters (AdamW, in adamw.go,
// is Adam with a default weight decay). Its device stepper is
// optim/device's adam.go (the kernel backend.AdamStep).

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
	return bind(p, b, ofSize(NewAdam[float32], c), ofSize(NewAdam[float64], c))
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
// the parameter's element type.
type Adam[T Float] struct {
	cfg  AdamConfig
	n    int
	m, v []T // nil before the first step
	t    int
}

// NewAdam returns Adam for parameters of n entries.
func NewAdam[T Float](n int, cfg AdamConfig) (*Adam[T], error) {
	if n < 1 {
		return nil, fmt.Errorf("optim: Adam for %d entries, want at least 1", n)
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Adam[T]{cfg: cfg, n: n}, nil
}

// Config returns the optimizer's settings, with the defaults filled in.
func (o *Adam[T]) Config() AdamConfig { return o.cfg }

// Step updates w from its gradient g. On error w is unchanged.
func (o *Adam[T]) Step(w, g []T) error { return step[T](o, checkPlain(o.n, w, g), w, g) }

func (o *Adam[T]) prepare(_, _ []T) error { return nil }
func (o *Adam[T]) abort()                 {}

func (o *Adam[T]) commit(w, g []T) {
	if o.m == nil {
		o.m, o.v = make([]T, len(w)), make([]T, len(w))
	}
	o.t++
	c1, c2 := update.AdamCorrections(o.cfg.Beta1, o.cfg.Beta2, float64(o.t))
	update.Adam(w, g, o.m, o.v, o.cfg.LR, o.cfg.Beta1, o.cfg.Beta2, o.cfg.Eps, c1, c2)
}

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *Adam[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// State returns a copy of the optimizer's state: the step count
// (StateStepCount) and, once a step has been taken, the moments
// (StateFirstMoment, StateSecondMoment).
func (o *Adam[T]) State() State { return momentState(AdamConfig{}.String(), o.t, o.m, o.v) }

// SetState restores a state returned by State of an Adam with the same
// configuration and size. On error the optimizer is unchanged.
func (o *Adam[T]) SetState(st State) error {
	return restoreMoments(st, AdamConfig{}.String(), o.n, &o.t, &o.m, &o.v)
}
