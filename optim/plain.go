package optim

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
)

// SGDConfig holds the options of SGD.
type SGDConfig struct {
	// LR is the step size, finite and >= 0.
	LR float64
	// Momentum is the heavy-ball coefficient mu in [0, 1); the default 0
	// gives plain gradient descent.
	Momentum float64
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
	lr := T(o.cfg.LR)
	if o.cfg.Momentum == 0 {
		for i := range w {
			w[i] -= lr * g[i]
		}
		return
	}
	if o.mom == nil {
		o.mom = make([]T, len(w))
	}
	mu := T(o.cfg.Momentum)
	m := o.mom[:len(w)]
	g = g[:len(w)]
	for i := range w {
		m[i] = mu*m[i] + g[i]
		w[i] -= lr * m[i]
	}
}

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *SGD[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// State returns a copy of the optimizer's state: the momentum buffer, once
// a step with momentum has been taken.
func (o *SGD[T]) State() State { return momentumState("sgd", o.mom) }

// SetState restores a state returned by State of an SGD with the same
// configuration and size. On error the optimizer is unchanged.
func (o *SGD[T]) SetState(st State) error {
	return restoreMomentum(st, "sgd", o.cfg.Momentum, &o.mom, o.n)
}

// momentumState is the state of a heavy-ball optimizer: its momentum
// buffer, once a step with momentum has been taken.
func momentumState[T Float](kind string, mom []T) State {
	st := emptyState(kind)
	if mom != nil {
		st.Buffers["momentum"] = append([]T(nil), mom...)
	}
	return st
}

// restoreMomentum sets *mom to the momentum buffer of n entries of a
// momentumState: nil when the state has none (no step taken yet), an error
// when it has one but the momentum is 0.
func restoreMomentum[T Float](st State, kind string, momentum float64, mom *[]T, n int) error {
	if err := st.check(kind); err != nil {
		return err
	}
	if _, ok := st.Buffers["momentum"]; ok && momentum == 0 {
		return fmt.Errorf("optim: %s state has a momentum buffer but the momentum is 0", kind)
	}
	m := make([]T, n)
	if ok, err := buffer(st, "momentum", m, true); err != nil {
		return err
	} else if !ok {
		m = nil
	}
	*mom = m
	return nil
}

// AdamConfig holds the options of Adam.
type AdamConfig struct {
	// LR is the step size, finite and >= 0.
	LR float64
	// Beta1 and Beta2 are the decay rates of the moments, in [0, 1); zero
	// values select 0.9 and 0.999.
	Beta1, Beta2 float64
	// Eps is added to the root of the second moment; zero selects 1e-8.
	Eps float64
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
	b1, b2, lr, eps := o.cfg.Beta1, o.cfg.Beta2, o.cfg.LR, o.cfg.Eps
	c1 := 1 - math.Pow(b1, float64(o.t))
	c2 := 1 - math.Pow(b2, float64(o.t))
	ms, vs, g := o.m[:len(w)], o.v[:len(w)], g[:len(w)]
	for i := range w {
		gi := float64(g[i])
		m := b1*float64(ms[i]) + (1-b1)*gi
		v := b2*float64(vs[i]) + (1-b2)*gi*gi
		ms[i], vs[i] = T(m), T(v)
		w[i] -= T(lr * (m / c1) / (math.Sqrt(v/c2) + eps))
	}
}

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *Adam[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// State returns a copy of the optimizer's state: the step count and, once
// a step has been taken, the moments m and v.
func (o *Adam[T]) State() State { return momentState("adam", o.t, o.m, o.v) }

// SetState restores a state returned by State of an Adam with the same
// configuration and size. On error the optimizer is unchanged.
func (o *Adam[T]) SetState(st State) error { return restoreMoments(st, "adam", o.n, &o.t, &o.m, &o.v) }

// momentState is the state of an Adam-like optimizer: its step count and,
// after the first step, its moments m and v.
func momentState[T Float](kind string, t int, m, v []T) State {
	st := emptyState(kind)
	st.Counters["t"] = int64(t)
	if m != nil {
		st.Buffers["m"] = append([]T(nil), m...)
		st.Buffers["v"] = append([]T(nil), v...)
	}
	return st
}

// restoreMoments sets *t, *m and *v from a momentState of n entries per
// moment (m and v nil for a state saved before the first step); on error
// it sets nothing.
func restoreMoments[T Float](st State, kind string, n int, t *int, m, v *[]T) error {
	if err := st.check(kind); err != nil {
		return err
	}
	steps, err := st.counter("t", 0, 1<<62)
	if err != nil {
		return err
	}
	ms, vs := make([]T, n), make([]T, n)
	okm, err := buffer(st, "m", ms, true)
	if err != nil {
		return err
	}
	okv, err := buffer(st, "v", vs, true)
	if err != nil {
		return err
	}
	if okm != okv || okm != (steps > 0) {
		return fmt.Errorf("optim: %s state: step %d with moments m %v, v %v present", kind, steps, okm, okv)
	}
	if !okm {
		ms, vs = nil, nil
	}
	*t, *m, *v = steps, ms, vs
	return nil
}

// checkPlain checks an unconstrained parameter and its gradient.
func checkPlain[T Float](n int, w, g []T) error {
	if len(w) != n || len(g) != n {
		return fmt.Errorf("optim: parameter has %d entries and gradient %d, want %d", len(w), len(g), n)
	}
	if !linalg.Finite(g) {
		return ErrNotFinite
	}
	return nil
}
