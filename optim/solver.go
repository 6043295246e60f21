package optim

import (
	"fmt"
	"hash/fnv"
	"math"
	"reflect"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Constrained marks a Gorgonia weight as living on a manifold. It is itself a
// gorgonia.ValueGrad, so the marking travels with the weight in the list
// given to Solver.Step; a plain *gorgonia.Node is never constrained.
type Constrained struct {
	*gorgonia.Node
	// Grassmann selects Gr(n,p) instead of St(n,p).
	Grassmann bool
}

// Nodes returns the Gorgonia nodes behind params, unwrapping Constrained
// weights, in the same order: what gorgonia.Grad and BindDualValues take.
func Nodes(params []gorgonia.ValueGrad) gorgonia.Nodes {
	ns := make(gorgonia.Nodes, 0, len(params))
	for _, p := range params {
		switch n := p.(type) {
		case Constrained:
			ns = append(ns, n.Node)
		case *gorgonia.Node:
			ns = append(ns, n)
		}
	}
	return ns
}

// Stiefel marks an n x p weight (n >= p) as a point of St(n,p).
func Stiefel(w *gorgonia.Node) Constrained { return Constrained{Node: w} }

// Grassmann marks an n x p weight (n >= p) as a point of Gr(n,p).
func Grassmann(w *gorgonia.Node) Constrained { return Constrained{Node: w, Grassmann: true} }

// Method selects the update of constrained weights.
type Method int

const (
	// MethodRSDM is the random submanifold method (the default).
	MethodRSDM Method = iota
	// MethodRGD is Riemannian gradient descent.
	MethodRGD
)

// Rule selects the update of unconstrained parameters.
type Rule int

const (
	// SGD is stochastic gradient descent with optional heavy-ball momentum
	// (PyTorch's SGD: v = mu v + g, w -= lr v). The default.
	SGD Rule = iota
	// Adam is Adam with bias correction (Kingma and Ba 2015).
	Adam
)

// OtherConfig holds the update of unconstrained parameters.
type OtherConfig struct {
	Rule Rule
	// LR is the step size. Required, > 0.
	LR float64
	// Momentum for SGD, in [0, 1). Default 0.
	Momentum float64
	// Beta1, Beta2 and Eps for Adam; zero values mean 0.9, 0.999, 1e-8.
	Beta1, Beta2, Eps float64
}

// SolverConfig holds the options of a Solver.
type SolverConfig struct {
	// Method for constrained weights; RSDM (default) uses RSDM, RGD uses RGD.
	Method Method
	// RSDM configures RSDM. Its SubmanifoldSize must not exceed the rows of
	// any constrained weight; each weight's sampler is seeded from
	// RSDM.Seed and the weight's position in the parameter list.
	RSDM RSDMConfig
	// RGD configures RGD; the retraction is RGDRetraction.
	RGD           RGDConfig
	RGDRetraction manifold.Retraction
	// Other configures every unconstrained parameter.
	Other OtherConfig
}

// Solver is a gorgonia.Solver that moves Constrained weights on their
// manifold and every other parameter by SGD or Adam. Parameters are matched
// to their optimizer state by position: pass the same list, in the same
// order, to every Step.
type Solver struct {
	cfg    SolverConfig
	params []gorgonia.ValueGrad
	state  []paramState
}

var _ gorgonia.Solver = (*Solver)(nil)

// paramState is one parameter's optimizer, bound to its element type.
type paramState interface {
	step(value, grad *tensor.Dense) error
	state() State
	setState(State) error
	setLR(constrained, other float64) error
}

// SetLR changes the step sizes of the constrained weights and of the other
// parameters, as a step-size schedule does between steps. Both must be
// finite and > 0.
func (s *Solver) SetLR(constrained, other float64) error {
	if err := checkLR(constrained); err != nil {
		return err
	}
	if err := checkLR(other); err != nil {
		return err
	}
	s.cfg.RSDM.LR, s.cfg.RGD.LR, s.cfg.Other.LR = constrained, constrained, other
	for _, st := range s.state {
		if err := st.setLR(constrained, other); err != nil {
			return err
		}
	}
	return nil
}

// NewSolver returns a Solver with the given options.
func NewSolver(cfg SolverConfig) (*Solver, error) {
	o := cfg.Other
	if err := checkLR(o.LR); err != nil {
		return nil, fmt.Errorf("%w (unconstrained parameters)", err)
	}
	if err := checkMomentum(o.Momentum); err != nil {
		return nil, err
	}
	if o.Rule != SGD && o.Rule != Adam {
		return nil, fmt.Errorf("optim: unknown update rule %d for unconstrained parameters", o.Rule)
	}
	if cfg.Other.Beta1 == 0 {
		cfg.Other.Beta1 = 0.9
	}
	if cfg.Other.Beta2 == 0 {
		cfg.Other.Beta2 = 0.999
	}
	if cfg.Other.Eps == 0 {
		cfg.Other.Eps = 1e-8
	}
	if !(cfg.Other.Beta1 < 1 && cfg.Other.Beta2 < 1 && cfg.Other.Beta1 >= 0 && cfg.Other.Beta2 >= 0 && cfg.Other.Eps > 0) {
		return nil, fmt.Errorf("optim: Adam betas %v, %v and eps %v: want betas in [0, 1) and eps > 0", cfg.Other.Beta1, cfg.Other.Beta2, cfg.Other.Eps)
	}
	switch cfg.Method {
	case MethodRSDM:
		if err := checkLR(cfg.RSDM.LR); err != nil {
			return nil, fmt.Errorf("%w (RSDM)", err)
		}
	case MethodRGD:
		if err := checkLR(cfg.RGD.LR); err != nil {
			return nil, fmt.Errorf("%w (RGD)", err)
		}
	default:
		return nil, fmt.Errorf("optim: unknown method %d for constrained weights", cfg.Method)
	}
	return &Solver{cfg: cfg}, nil
}

// Step updates every parameter from its gradient, then zeroes the gradient,
// as Gorgonia's own solvers do: a tape machine adds each run's gradients to
// the bound ones. On the first call it
// builds each parameter's optimizer and checks that every Constrained weight
// is a 2-D n x p matrix with n >= p that lies on its manifold. A NaN or Inf
// gradient fails the step before any parameter changes.
func (s *Solver) Step(params []gorgonia.ValueGrad) error {
	if s.state == nil {
		if err := s.init(params); err != nil {
			return err
		}
	} else if len(params) != len(s.params) {
		return fmt.Errorf("optim: solver built for %d parameters, Step got %d", len(s.params), len(params))
	}
	values := make([]*tensor.Dense, len(params))
	grads := make([]*tensor.Dense, len(params))
	for i, p := range params {
		if !same(p, s.params[i]) {
			return fmt.Errorf("optim: parameter %d (%s) is not the one the solver was built with", i, name(p))
		}
		v, g, err := dense(p)
		if err != nil {
			return err
		}
		if !finite(g) {
			return fmt.Errorf("optim: gradient of %s has a NaN or Inf entry; no parameter was updated", name(p))
		}
		values[i], grads[i] = v, g
	}
	for i := range params {
		if err := s.state[i].step(values[i], grads[i]); err != nil {
			return fmt.Errorf("optim: %s: %w", name(params[i]), err)
		}
		grads[i].Zero() // Gorgonia accumulates into bound gradients
	}
	return nil
}

// State returns the state of every parameter's optimizer, in the order of
// the parameters given to Step, for a checkpoint; nil before the first Step.
func (s *Solver) State() []State {
	if s.state == nil {
		return nil
	}
	out := make([]State, len(s.state))
	for i, st := range s.state {
		out[i] = st.state()
	}
	return out
}

// SetState restores states returned by State of a solver with the same
// configuration. params is the list that later Steps will get; the solver
// is bound to it as by a first Step. Empty states leave a fresh solver
// fresh. On error the solver is unchanged.
func (s *Solver) SetState(params []gorgonia.ValueGrad, states []State) error {
	if len(states) == 0 {
		if s.state != nil {
			return fmt.Errorf("optim: no states given for a solver that has taken steps")
		}
		return nil
	}
	if len(states) != len(params) {
		return fmt.Errorf("optim: %d states for %d parameters", len(states), len(params))
	}
	tmp := &Solver{cfg: s.cfg}
	if err := tmp.init(params); err != nil {
		return err
	}
	for i, st := range states {
		if err := tmp.state[i].setState(st); err != nil {
			return fmt.Errorf("optim: %s: %w", name(params[i]), err)
		}
	}
	s.params, s.state = tmp.params, tmp.state
	return nil
}

func (s *Solver) init(params []gorgonia.ValueGrad) error {
	state := make([]paramState, len(params))
	for i, p := range params {
		v, err := valueOf(p)
		if err != nil {
			return err
		}
		c, constrained := p.(Constrained)
		switch v.Dtype() {
		case tensor.Float32:
			state[i], err = newState[float32](s.cfg, i, c, constrained, v)
		case tensor.Float64:
			state[i], err = newState[float64](s.cfg, i, c, constrained, v)
		default:
			err = fmt.Errorf("element type %v, want float32 or float64", v.Dtype())
		}
		if err != nil {
			return fmt.Errorf("optim: %s: %w", name(p), err)
		}
	}
	s.params = append([]gorgonia.ValueGrad(nil), params...)
	s.state = state
	return nil
}

func newState[T Float](cfg SolverConfig, index int, c Constrained, constrained bool, v *tensor.Dense) (paramState, error) {
	if !constrained {
		return &plainState[T]{cfg: cfg.Other, n: v.Len()}, nil
	}
	shape := v.Shape()
	if len(shape) != 2 {
		return nil, fmt.Errorf("marked as constrained but has shape %v, want a matrix", shape)
	}
	n, p := shape[0], shape[1]
	var m manifold.Manifold[T]
	var err error
	if c.Grassmann {
		var g *manifold.Grassmann[T]
		if g, err = manifold.NewGrassmann[T](n, p); err == nil {
			g.Retraction = cfg.RGDRetraction
			m = g
		}
	} else {
		var st *manifold.Stiefel[T]
		if st, err = manifold.NewStiefel[T](n, p); err == nil {
			st.Retraction = cfg.RGDRetraction
			m = st
		}
	}
	if err != nil {
		return nil, err
	}
	tol := 1e-8
	if linalg.Is32[T]() {
		tol = 1e-4
	}
	if f := m.Feasibility(v.Data().([]T)); !(f <= tol*math.Sqrt(float64(p))) {
		return nil, fmt.Errorf("marked as constrained but ||W^T W - I||_F = %.3g: initialize it on the manifold (manifold.Stiefel.Random)", f)
	}
	var opt Optimizer[T]
	if cfg.Method == MethodRGD {
		opt, err = NewRGD(m, cfg.RGD)
	} else {
		rc := cfg.RSDM
		rc.Seed = mixSeed(rc.Seed, index)
		opt, err = NewRSDM(m, rc)
	}
	if err != nil {
		return nil, err
	}
	return &constrainedState[T]{opt: opt}, nil
}

// mixSeed derives a weight's sampler seed from the run's seed and the
// weight's position, so that weights draw independent submanifolds.
func mixSeed(seed uint64, index int) uint64 {
	h := fnv.New64a()
	var b [16]byte
	for k := 0; k < 8; k++ {
		b[k] = byte(seed >> (8 * k))
		b[8+k] = byte(uint64(index) >> (8 * k))
	}
	_, _ = h.Write(b[:])
	return h.Sum64()
}

// stateful is an optimizer whose state can be saved and restored.
type stateful interface {
	State() State
	SetState(State) error
}

type constrainedState[T Float] struct{ opt Optimizer[T] }

func (c *constrainedState[T]) state() State           { return c.opt.(stateful).State() }
func (c *constrainedState[T]) setState(s State) error { return c.opt.(stateful).SetState(s) }
func (c *constrainedState[T]) setLR(lr, _ float64) error {
	return c.opt.(interface{ SetLR(float64) error }).SetLR(lr)
}

func (c *constrainedState[T]) step(value, grad *tensor.Dense) error {
	return c.opt.Step(value.Data().([]T), grad.Data().([]T))
}

// plainState updates an unconstrained parameter by SGD or Adam.
type plainState[T Float] struct {
	cfg  OtherConfig
	n    int // entries of the parameter
	m, v []T // momentum buffer (SGD) or first and second moments (Adam)
	t    int
}

func (s *plainState[T]) setLR(_, lr float64) error {
	s.cfg.LR = lr
	return nil
}

func (s *plainState[T]) state() State {
	if s.cfg.Rule == Adam {
		st := emptyState("adam")
		st.Counters["t"] = int64(s.t)
		if s.m != nil {
			st.Buffers["m"] = append([]T(nil), s.m...)
			st.Buffers["v"] = append([]T(nil), s.v...)
		}
		return st
	}
	st := emptyState("sgd")
	if s.m != nil {
		st.Buffers["momentum"] = append([]T(nil), s.m...)
	}
	return st
}

func (s *plainState[T]) setState(st State) error {
	if s.cfg.Rule == Adam {
		if err := st.check("adam"); err != nil {
			return err
		}
		t, err := st.counter("t", 0, 1<<62)
		if err != nil {
			return err
		}
		m, v := make([]T, s.n), make([]T, s.n)
		okm, err := buffer(st, "m", m, true)
		if err != nil {
			return err
		}
		okv, err := buffer(st, "v", v, true)
		if err != nil {
			return err
		}
		if okm != okv || okm != (t > 0) {
			return fmt.Errorf("optim: adam state: step %d with moments m %v, v %v present", t, okm, okv)
		}
		s.t, s.m, s.v = t, nil, nil
		if okm {
			s.m, s.v = m, v
		}
		return nil
	}
	if err := st.check("sgd"); err != nil {
		return err
	}
	m := make([]T, s.n)
	ok, err := buffer(st, "momentum", m, true)
	if err != nil {
		return err
	}
	if ok && s.cfg.Momentum == 0 {
		return fmt.Errorf("optim: sgd state has a momentum buffer but the momentum is 0")
	}
	s.m = nil
	if ok {
		s.m = m
	}
	return nil
}

func (s *plainState[T]) step(value, grad *tensor.Dense) error {
	w, g := value.Data().([]T), grad.Data().([]T)
	if len(w) != len(g) {
		return fmt.Errorf("value has %d entries but gradient %d", len(w), len(g))
	}
	lr := s.cfg.LR
	switch s.cfg.Rule {
	case SGD:
		if s.cfg.Momentum == 0 {
			for i := range w {
				w[i] -= T(lr) * g[i]
			}
			return nil
		}
		if s.m == nil {
			s.m = make([]T, len(w))
		}
		mu := T(s.cfg.Momentum)
		for i := range w {
			s.m[i] = mu*s.m[i] + g[i]
			w[i] -= T(lr) * s.m[i]
		}
	case Adam:
		if s.m == nil {
			s.m, s.v = make([]T, len(w)), make([]T, len(w))
		}
		s.t++
		b1, b2 := s.cfg.Beta1, s.cfg.Beta2
		c1 := 1 - math.Pow(b1, float64(s.t))
		c2 := 1 - math.Pow(b2, float64(s.t))
		for i := range w {
			gi := float64(g[i])
			m := b1*float64(s.m[i]) + (1-b1)*gi
			v := b2*float64(s.v[i]) + (1-b2)*gi*gi
			s.m[i], s.v[i] = T(m), T(v)
			w[i] -= T(lr * (m / c1) / (math.Sqrt(v/c2) + s.cfg.Eps))
		}
	}
	return nil
}

// valueOf returns the value of p as a dense tensor.
func valueOf(p gorgonia.ValueGrad) (*tensor.Dense, error) {
	v, ok := p.Value().(*tensor.Dense)
	if !ok || v == nil {
		return nil, fmt.Errorf("optim: %s has no dense tensor value (is the graph run with BindDualValues?)", name(p))
	}
	return v, nil
}

// dense returns the value and gradient of p as dense tensors.
func dense(p gorgonia.ValueGrad) (v, g *tensor.Dense, err error) {
	vv, err := valueOf(p)
	if err != nil {
		return nil, nil, err
	}
	gv, err := p.Grad()
	if err != nil {
		return nil, nil, fmt.Errorf("optim: %s: gradient: %w", name(p), err)
	}
	gd, ok := gv.(*tensor.Dense)
	if !ok || gd == nil {
		return nil, nil, fmt.Errorf("optim: %s has no dense gradient", name(p))
	}
	if !vv.Shape().Eq(gd.Shape()) || vv.Dtype() != gd.Dtype() {
		return nil, nil, fmt.Errorf("optim: %s: value %v %v but gradient %v %v", name(p), vv.Shape(), vv.Dtype(), gd.Shape(), gd.Dtype())
	}
	return vv, gd, nil
}

func finite(t *tensor.Dense) bool {
	switch d := t.Data().(type) {
	case []float32:
		return linalg.Finite(d)
	case []float64:
		return linalg.Finite(d)
	}
	return true
}

// same reports whether a and b are the same parameter, without comparing
// values of an incomparable type (which would panic).
func same(a, b gorgonia.ValueGrad) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if !ta.Comparable() {
		return true // cannot tell; shapes are checked by the update
	}
	return a == b
}

func name(p gorgonia.ValueGrad) string {
	switch n := p.(type) {
	case Constrained:
		return fmt.Sprintf("weight %q", n.Name())
	case *gorgonia.Node:
		return fmt.Sprintf("parameter %q", n.Name())
	}
	return fmt.Sprintf("parameter %T", p)
}
