package optim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/orthonet/orthonet/manifold"
)

// Rule is an update rule, the strategy a Group steps its parameters by:
// it builds the Stepper of each parameter when the Solver is built.
// RSDMConfig, RGDConfig and RiemannianAdamConfig step constrained weights;
// SGDConfig, AdamConfig and AdamWConfig the unconstrained parameters; a
// type of one's own that implements Rule goes into Group.Rule as they do.
type Rule interface {
	// String returns the rule's name, which ParseRule reads for orthonet's
	// rules.
	String() string
	// Constrained reports whether the rule steps weights on a manifold
	// (true) or unconstrained parameters (false).
	Constrained() bool
	// Stepper returns the stepper of p, bound to p.Value. For a
	// constrained weight p is its column-orthonormal view (n >= p, see
	// ManifoldOf), which the Solver keeps in step with a wide weight.
	Stepper(p Param, b Binding) (Stepper, error)
}

// Binding is what a Rule builds a stepper from besides the parameter.
type Binding struct {
	// Index is the parameter's position in the Solver's list (RSDM seeds
	// each weight's sampler from its seed and Index).
	Index int
	// WeightDecay is the group's decoupled weight decay.
	WeightDecay float64
}

// Stepper steps one parameter, in two phases so that a Solver updates
// every parameter or none: Prepare computes the step into workspaces and
// may fail, Commit applies it and cannot, Abort undoes what Prepare
// advanced (a sampler's draw).
type Stepper interface {
	// Prepare computes the step of size lr (finite, >= 0) along grad: a
	// []float32 or []float64 like the value, or a Factored of its type,
	// which only RSDM takes. The value does not move.
	Prepare(grad any, lr float64) error
	// Commit moves the value by the prepared step. It fails only on a
	// device, which reports what it met enqueuing the step's work.
	Commit() error
	// Abort undoes a Prepare whose step will not be taken.
	Abort()
	// State returns a copy of what the next step depends on.
	State() State
	// SetState restores a State; on error nothing changes.
	SetState(State) error
}

// Rules lists orthonet's rules, the names ParseRule reads.
var Rules = []Rule{RSDMConfig{}, RGDConfig{}, RiemannianAdamConfig{}, SGDConfig{}, AdamConfig{}, AdamWConfig{}}

// RuleSettings are the settings ParseRule gives the rule it names; each
// rule takes those it has.
type RuleSettings struct {
	// SubmanifoldSize, Sampling and Seed are RSDM's.
	SubmanifoldSize int
	Sampling        Sampler
	Seed            uint64
	// Momentum is RGD's and SGD's.
	Momentum float64
}

// ParseRule returns the rule of Rules whose String is name, with the
// settings s that it takes.
func ParseRule(name string, s RuleSettings) (Rule, error) {
	r, err := parse("rule", name, Rules)
	if c, ok := r.(interface{ with(RuleSettings) Rule }); ok {
		r = c.with(s)
	}
	return r, err
}

// parse returns the one of items whose String is name.
func parse[E fmt.Stringer](what, name string, items []E) (E, error) {
	var names []string
	for _, it := range items {
		if it.String() == name {
			return it, nil
		}
		names = append(names, it.String())
	}
	var none E
	return none, fmt.Errorf("optim: unknown %s %q, want one of %s", what, name, strings.Join(names, ", "))
}

// RuleNames returns the names of Rules that step constrained weights
// (constrained) or unconstrained parameters.
func RuleNames(constrained bool) []string {
	var out []string
	for _, r := range Rules {
		if r.Constrained() == constrained {
			out = append(out, r.String())
		}
	}
	return out
}

// String returns "rsdm".
func (RSDMConfig) String() string { return "rsdm" }

// Constrained returns true.
func (RSDMConfig) Constrained() bool { return true }

func (c RSDMConfig) with(s RuleSettings) Rule {
	c.SubmanifoldSize, c.Sampling, c.Seed = s.SubmanifoldSize, s.Sampling, s.Seed
	return c
}

// Stepper returns RSDM for p, its sampler seeded from Seed and b.Index.
// Its LR is ignored: the Solver gives each step its group's.
func (c RSDMConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR, c.Seed = 0, WeightSeed(c.Seed, b.Index)
	return bind(p, b, func(m manifold.Manifold[float32], _ int) (twoPhase[float32], error) { return NewRSDM(m, c) },
		func(m manifold.Manifold[float64], _ int) (twoPhase[float64], error) { return NewRSDM(m, c) })
}

// String returns "rgd".
func (RGDConfig) String() string { return "rgd" }

// Constrained returns true.
func (RGDConfig) Constrained() bool { return true }

func (c RGDConfig) with(s RuleSettings) Rule { c.Momentum = s.Momentum; return c }

// Stepper returns RGD for p; LR is ignored.
func (c RGDConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	return bind(p, b, func(m manifold.Manifold[float32], _ int) (twoPhase[float32], error) { return NewRGD(m, c) },
		func(m manifold.Manifold[float64], _ int) (twoPhase[float64], error) { return NewRGD(m, c) })
}

// String returns "radam".
func (RiemannianAdamConfig) String() string { return "radam" }

// Constrained returns true.
func (RiemannianAdamConfig) Constrained() bool { return true }

// Stepper returns Riemannian Adam for p; LR is ignored.
func (c RiemannianAdamConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	return bind(p, b, func(m manifold.Manifold[float32], _ int) (twoPhase[float32], error) { return NewRiemannianAdam(m, c) },
		func(m manifold.Manifold[float64], _ int) (twoPhase[float64], error) { return NewRiemannianAdam(m, c) })
}

// String returns "sgd".
func (SGDConfig) String() string { return "sgd" }

// Constrained returns false.
func (SGDConfig) Constrained() bool { return false }

func (c SGDConfig) with(s RuleSettings) Rule { c.Momentum = s.Momentum; return c }

// Stepper returns SGD for p, with the group's weight decay; LR is ignored.
func (c SGDConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	return bind(p, b, func(_ manifold.Manifold[float32], n int) (twoPhase[float32], error) { return NewSGD[float32](n, c) },
		func(_ manifold.Manifold[float64], n int) (twoPhase[float64], error) { return NewSGD[float64](n, c) })
}

// String returns "adam".
func (AdamConfig) String() string { return "adam" }

// Constrained returns false.
func (AdamConfig) Constrained() bool { return false }

// Stepper returns Adam for p, with the group's weight decay; LR is
// ignored.
func (c AdamConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	return bind(p, b, func(_ manifold.Manifold[float32], n int) (twoPhase[float32], error) { return NewAdam[float32](n, c) },
		func(_ manifold.Manifold[float64], n int) (twoPhase[float64], error) { return NewAdam[float64](n, c) })
}

// AdamWConfig is Adam with decoupled weight decay (Loshchilov and Hutter
// 2019) as a Rule: the group's WeightDecay, 0.01 when it is 0.
type AdamWConfig AdamConfig

// String returns "adamw".
func (AdamWConfig) String() string { return "adamw" }

// Constrained returns false.
func (AdamWConfig) Constrained() bool { return false }

// Stepper returns Adam for p with the group's weight decay (0.01 when it
// is 0); LR is ignored.
func (c AdamWConfig) Stepper(p Param, b Binding) (Stepper, error) {
	if b.WeightDecay == 0 {
		b.WeightDecay = 0.01
	}
	return AdamConfig(c).Stepper(p, b)
}

// bind builds the stepper of p with the constructor of its element type:
// for a constrained weight, on its manifold; for another parameter, of its
// size.
func bind(p Param, b Binding, f32 func(manifold.Manifold[float32], int) (twoPhase[float32], error),
	f64 func(manifold.Manifold[float64], int) (twoPhase[float64], error)) (Stepper, error) {
	switch v := p.Value.(type) {
	case []float32:
		return bindTyped(p, b, v, f32)
	case []float64:
		return bindTyped(p, b, v, f64)
	}
	return nil, fmt.Errorf("optim: %s: value %T, want []float32 or []float64", p.describe(), p.Value)
}

func bindTyped[T Float](p Param, b Binding, v []T, f func(manifold.Manifold[T], int) (twoPhase[T], error)) (Stepper, error) {
	var m manifold.Manifold[T]
	decay := b.WeightDecay
	if p.Constrained() {
		var err error
		if m, _, err = ManifoldOf[T](p); err != nil {
			return nil, err
		}
		decay = 0 // constrained weights take no weight decay
	}
	o, err := f(m, len(v))
	if err != nil {
		return nil, err
	}
	return &optStepper[T]{o: o, x: v, decay: decay}, nil
}

// twoPhase is an optimizer of this package whose step is split into
// prepare, commit and abort (see Stepper).
type twoPhase[T Float] interface {
	prepare(x, grad []T) error
	commit(x, grad []T)
	abort()
	State() State
	SetState(State) error
	SetLR(float64) error
}

// errFactoredRSDMOnly reports a factored gradient given to an optimizer
// other than RSDM.
var errFactoredRSDMOnly = errors.New("a factored gradient, which only RSDM steps")

// optStepper is the Stepper of an optimizer of this package, with the
// decoupled weight decay of its group.
type optStepper[T Float] struct {
	o         twoPhase[T]
	x, g      []T     // the value, and the gradient of the step under way
	lr, decay float64 // the step size and the decoupled weight decay
}

func (s *optStepper[T]) Prepare(grad any, lr float64) error {
	if lr != s.lr {
		if err := s.o.SetLR(lr); err != nil {
			return err
		}
		s.lr = lr
	}
	switch g := grad.(type) {
	case []T:
		s.g = g
		return s.o.prepare(s.x, g)
	case Factored[T]:
		fs, ok := s.o.(interface {
			prepareFactored(x []T, g Factored[T]) error
		})
		if !ok {
			return errFactoredRSDMOnly
		}
		s.g = nil // RSDM's commit does not read it
		return fs.prepareFactored(s.x, g)
	}
	return fmt.Errorf("optim: gradient %T for a value of %T", grad, s.x)
}

func (s *optStepper[T]) Commit() error {
	if s.decay > 0 && s.lr > 0 { // decoupled: w <- (1 - lr wd) w, then the update
		f := T(1 - s.lr*s.decay)
		for i := range s.x {
			s.x[i] *= f
		}
	}
	s.o.commit(s.x, s.g)
	return nil
}

func (s *optStepper[T]) Abort()                  { s.o.abort() }
func (s *optStepper[T]) State() State            { return s.o.State() }
func (s *optStepper[T]) SetState(st State) error { return s.o.SetState(st) }
