package optim

import (
	"math"
	"slices"
	"testing"
)

// signConfig is a throwaway built-in rule added as docs/extending/rule.md
// says: everything in one file (this one, as a rule's own file would be),
// then one entry in Rules (which the test appends). It is sign descent
// with momentum for unconstrained parameters: m = mu m + g, w -= lr sign(m),
// its momentum from RuleSettings.Momentum. It has no device stepper:
// optim/device refuses every rule that its table lacks, naming it
// (TestDeviceRefuses, "own rule"), and optim/device's extend_rule_test.go
// adds a device stepper to that table the same way.
type signConfig struct {
	LR, Momentum float64
}

var _ Rule = signConfig{}

func (signConfig) String() string             { return "signsgd" }
func (signConfig) Constrained() bool          { return false }
func (c signConfig) with(s RuleSettings) Rule { c.Momentum = s.Momentum; return c }
func (c signConfig) Stepper(p Param, b Binding) (Stepper, error) {
	return bind(p, b, ofSize(newSign[float32], c), ofSize(newSign[float64], c))
}

// sign is the host stepper of signConfig.
type sign[T Float] struct {
	cfg signConfig
	mom []T
}

func newSign[T Float](n int, c signConfig) (*sign[T], error) {
	if err := checkMomentum(c.Momentum); err != nil {
		return nil, err
	}
	return &sign[T]{cfg: c, mom: make([]T, n)}, nil
}

func (o *sign[T]) prepare(_, _ []T) error { return nil }
func (o *sign[T]) abort()                 {}
func (o *sign[T]) commit(w, g []T) {
	lr, mu := T(o.cfg.LR), T(o.cfg.Momentum)
	for i := range w {
		o.mom[i] = mu*o.mom[i] + g[i]
		switch {
		case o.mom[i] > 0:
			w[i] -= lr
		case o.mom[i] < 0:
			w[i] += lr
		}
	}
}
func (o *sign[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }
func (o *sign[T]) State() State           { return momentumState(signConfig{}.String(), o.mom) }
func (o *sign[T]) SetState(st State) error {
	return restoreMomentum(st, signConfig{}.String(), o.cfg.Momentum, &o.mom, len(o.mom))
}

// TestAddBuiltinRule adds signConfig to Rules as a built-in rule joins it
// and checks that it is one: train's names list it, ParseRule finds it by
// name with its setting, and a Solver steps a parameter by it (with the
// group's weight decay, which every rule of this package gets) to the
// values of its formula, and resumes from its State bit for bit.
func TestAddBuiltinRule(t *testing.T) {
	saved := Rules
	Rules = append(slices.Clip(Rules), signConfig{})
	t.Cleanup(func() { Rules = saved })

	if names := RuleNames(false); !slices.Contains(names, "signsgd") {
		t.Fatalf("RuleNames(false) = %v, want signsgd among them", names)
	}
	r, err := ParseRule("signsgd", RuleSettings{Momentum: 0.5, SubmanifoldSize: 9})
	if err != nil {
		t.Fatal(err)
	}
	if r != Rule(signConfig{Momentum: 0.5}) {
		t.Fatalf("ParseRule gave %#v, want signConfig with momentum 0.5", r)
	}

	const lr, decay, steps = 0.1, 0.2, 6
	grads := func(step int) []float64 { // the signs of g change, so the momentum matters
		return []float64{1, -2, math.Cos(float64(step)), 0.5 - float64(step%3)}
	}
	run := func(resumeAt int) []float64 {
		w, g := []float64{1, 2, 3, 4}, make([]float64, 4)
		p := Param{Name: "b", Shape: []int{4}, Value: Host[float64](w), Grad: Host[float64](g)}
		groups := []Group{{Rule: r, LR: lr, WeightDecay: decay}}
		s, err := NewSolver([]Param{p}, groups, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for k := range steps {
			if k == resumeAt {
				st := s.State()
				if s, err = NewSolver([]Param{p}, groups, Options{}); err != nil {
					t.Fatal(err)
				}
				if err := s.SetState(st); err != nil {
					t.Fatal(err)
				}
			}
			copy(g, grads(k))
			if err := s.Step(); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	want, m := []float64{1, 2, 3, 4}, make([]float64, 4)
	for k := range steps {
		for i, gi := range grads(k) {
			m[i] = 0.5*m[i] + gi
			want[i] *= 1 - lr*decay
			want[i] -= lr * math.Copysign(1, m[i])
			if m[i] == 0 {
				t.Fatalf("the test's momentum is 0 at step %d", k)
			}
		}
	}
	if got := run(-1); !slices.Equal(got, want) {
		t.Errorf("stepped by signsgd: %v, want %v", got, want)
	}
	if got := run(3); !slices.Equal(got, want) {
		t.Errorf("resumed at step 3: %v, want %v", got, want)
	}
}
