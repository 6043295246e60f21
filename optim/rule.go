package optim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/orthonet/orthonet/internal/update"
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
	// Host slice of the value's element type, or a Factored of it, which
	// only RSDM takes; on a device nil. The value does not move.
	Prepare(grad Gradient, lr float64) error
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

// Rules is the table of rules that a command names: orthonet's, each
// defined in a file of its own (rsdm.go, rgd.go, ...), in the order train's
// usage names them, then those added by Register. ParseRuleFlags and
// RuleNames read it, and optim/optflag defines the flags of its rules'
// Settings (Configurable). Adding a rule to it is the one edit outside the
// rule's file that makes it a built-in rule (docs/extending/rule.md).
var Rules = []Rule{RSDMConfig{}, RGDConfig{}, RiemannianAdamConfig{}, SGDConfig{}, AdamConfig{}, AdamWConfig{}}

// RuleSettings are the settings ParseRule gives the rule it names; each
// rule takes those it has, by its method with (see settable).
//
// Deprecated: a rule declares its settings (Configurable); build it with
// ParseRuleFlags(name, map[string]string{"r": "8", ...}), whose keys are
// the settings' flag names.
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
//
// Deprecated: use ParseRuleFlags, which reads each rule's own Settings and
// checks their values.
func ParseRule(name string, s RuleSettings) (Rule, error) {
	r, err := parse("rule", name, Rules)
	if c, ok := r.(settable); ok {
		r = c.with(s)
	}
	return r, err
}

// settable is a rule of Rules that takes settings from RuleSettings: its
// with, beside its Config, returns it with those it has.
type settable interface{ with(RuleSettings) Rule }

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

// bind builds the stepper of p with the constructor of its element type:
// for a constrained weight, on its manifold; for another parameter, of its
// size.
func bind(p Param, b Binding, f32 func(manifold.Manifold[float32], int) (twoPhase[float32], error),
	f64 func(manifold.Manifold[float64], int) (twoPhase[float64], error)) (Stepper, error) {
	switch v := p.Value.(type) {
	case Host[float32]:
		return bindTyped(p, b, v, f32)
	case Host[float64]:
		return bindTyped(p, b, v, f64)
	}
	return nil, fmt.Errorf("optim: %s: value %T, want optim.Host[float32] or optim.Host[float64]", p.describe(), p.Value)
}

// onManifold adapts build, the constructor of a constrained weight's
// optimizer with settings c, to bind.
func onManifold[T Float, C any, O twoPhase[T]](build func(manifold.Manifold[T], C) (O, error), c C) func(manifold.Manifold[T], int) (twoPhase[T], error) {
	return func(m manifold.Manifold[T], _ int) (twoPhase[T], error) { return build(m, c) }
}

// ofSize adapts build, the constructor of an unconstrained parameter's
// optimizer with settings c, to bind.
func ofSize[T Float, C any, O twoPhase[T]](build func(int, C) (O, error), c C) func(manifold.Manifold[T], int) (twoPhase[T], error) {
	return func(_ manifold.Manifold[T], n int) (twoPhase[T], error) { return build(n, c) }
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

func (s *optStepper[T]) Prepare(grad Gradient, lr float64) error {
	if lr != s.lr {
		if err := s.o.SetLR(lr); err != nil {
			return err
		}
		s.lr = lr
	}
	switch g := grad.(type) {
	case Host[T]:
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
	update.Decay(s.x, s.lr, s.decay) // decoupled: w <- (1 - lr wd) w, then the update
	s.o.commit(s.x, s.g)
	return nil
}

func (s *optStepper[T]) Abort()                  { s.o.abort() }
func (s *optStepper[T]) State() State            { return s.o.State() }
func (s *optStepper[T]) SetState(st State) error { return s.o.SetState(st) }
