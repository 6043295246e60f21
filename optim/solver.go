package optim

import (
	"fmt"
	"hash/fnv"
	"math"

	"github.com/orthonet/orthonet/manifold"
)

// Method selects the update of a group's constrained weights.
type Method int

const (
	// MethodRSDM is the random submanifold method (the default).
	MethodRSDM Method = iota
	// MethodRGD is Riemannian gradient descent, with Group.Momentum.
	MethodRGD
	// MethodRiemannianAdam is Riemannian Adam (RiemannianAdam).
	MethodRiemannianAdam
)

// String returns the method's name: rsdm, rgd or radam.
func (m Method) String() string {
	switch m {
	case MethodRSDM:
		return "rsdm"
	case MethodRGD:
		return "rgd"
	case MethodRiemannianAdam:
		return "radam"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Rule selects the update of a group's unconstrained parameters.
type Rule int

const (
	// RuleSGD is SGD with Group.Momentum as heavy-ball momentum (PyTorch's
	// SGD: v = mu v + g, w -= lr v). The default.
	RuleSGD Rule = iota
	// RuleAdam is Adam with bias correction (Kingma and Ba 2015).
	RuleAdam
	// RuleAdamW is Adam with decoupled weight decay (Loshchilov and Hutter
	// 2019): Group.WeightDecay, 0.01 when it is 0.
	RuleAdamW
)

// String returns the rule's name: sgd, adam or adamw.
func (r Rule) String() string {
	switch r {
	case RuleSGD:
		return "sgd"
	case RuleAdam:
		return "adam"
	case RuleAdamW:
		return "adamw"
	}
	return fmt.Sprintf("Rule(%d)", int(r))
}

// Group is a set of parameters that share an update rule and its settings,
// as a parameter group of torch.optim: a group may hold constrained weights
// (stepped by Method) and unconstrained parameters (stepped by Rule).
type Group struct {
	// Select picks the group's parameters from those no earlier group
	// took; nil takes all of them.
	Select func(Param) bool
	// Method updates the constrained weights: MethodRSDM (the default),
	// MethodRGD or MethodRiemannianAdam.
	Method Method
	// Rule updates the unconstrained parameters: RuleSGD (the default),
	// RuleAdam or RuleAdamW.
	Rule Rule
	// LR is the base step size, finite and >= 0 (0 freezes the group).
	LR float64
	// Schedule scales LR with the Solver's steps; nil keeps it constant.
	Schedule Schedule
	// Momentum is SGD's heavy-ball coefficient and RGD's momentum, in
	// [0, 1). RSDM's momentum is RSDM.Momentum.
	Momentum float64
	// WeightDecay is decoupled weight decay of the unconstrained
	// parameters: each step first scales them by 1 - lr * WeightDecay.
	// Constrained weights ignore it.
	WeightDecay float64
	// RSDM configures MethodRSDM: SubmanifoldSize (required, 2 <= r <= the
	// rows of every weight of the group), Sampling, Momentum, InnerSteps,
	// Retraction, ReorthEvery and Seed. Its LR is ignored (the group's is
	// used); each weight's sampler is seeded from Seed and the weight's
	// position in the Solver's parameter list.
	RSDM RSDMConfig
	// Adam holds the betas and eps of Adam, AdamW and Riemannian Adam; its
	// LR is ignored.
	Adam AdamConfig
}

// Options holds the options of a Solver that apply across groups.
type Options struct {
	// ClipNorm, when above 0, clips the gradients by their global norm,
	// as PyTorch's clip_grad_norm_: when the norm over every parameter's
	// gradient (a constrained weight's Riemannian gradient P_X(G)) exceeds
	// ClipNorm, every gradient is scaled in place by ClipNorm / norm before
	// the step. For a column-orthonormal weight it costs a p x p product
	// with the gradient (K x p products for a factored one).
	ClipNorm float64
}

// Solver updates parameters from their gradients: each constrained weight
// on its manifold by its group's Method, every other parameter by its
// group's Rule. It is built once over its parameters, as torch.optim's
// optimizers are; Step updates all of them. Every Step is all-or-nothing:
// on error no parameter, buffer or counter has moved. The Solver counts
// its steps, which drive the groups' schedules and are part of its state.
type Solver struct {
	groupSteps // the groups and the step count: SetLR, LR, Steps, SetSteps
	params     []Param
	member     []int // each parameter's group
	opts       []paramOpt
	options    Options
	// values and grads are the slices of the Step under way.
	values, grads []any
	clip          []clipWork
}

// paramOpt is one parameter's optimizer, bound to its element type.
type paramOpt interface {
	prepare(value, grad any) error
	commit(value, grad any)
	abort()
	state() State
	setState(State) error
	setLR(lr float64) error
	// sqNorm returns the squared norm of the gradient the step will follow
	// (Riemannian for a constrained weight), for clipping.
	sqNorm(value, grad any, w *clipWork) float64
}

// twoPhase is an optimizer whose step is split so that a Solver can update
// every parameter or none: prepare computes the step into workspaces and
// may fail, commit applies it and cannot, abort undoes what prepare
// advanced (a sampler).
type twoPhase[T Float] interface {
	prepare(x, grad []T) error
	commit(x, grad []T)
	abort()
	State() State
	SetState(State) error
	SetLR(float64) error
}

var (
	_ twoPhase[float32] = (*RSDM[float32])(nil)
	_ twoPhase[float32] = (*RGD[float32])(nil)
	_ twoPhase[float32] = (*RiemannianAdam[float32])(nil)
	_ twoPhase[float32] = (*SGD[float32])(nil)
	_ twoPhase[float32] = (*Adam[float32])(nil)
)

// NewSolver returns a Solver over params, each stepped by the first group
// whose Select takes it. It checks everything a step will need: every
// parameter belongs to a group; every constrained weight is a matrix on its
// manifold (||W^T W - I||_F small) whose shape its method can take (r at
// most its rows for RSDM); the settings are valid. Errors name the
// parameter or the group.
func NewSolver(params []Param, groups []Group, o Options) (*Solver, error) {
	if len(groups) == 0 {
		return nil, fmt.Errorf("optim: a solver needs at least one group")
	}
	if !(o.ClipNorm >= 0) || math.IsInf(o.ClipNorm, 0) {
		return nil, fmt.Errorf("optim: clip norm %v, want a finite value >= 0", o.ClipNorm)
	}
	gs := make([]Group, len(groups))
	for i, g := range groups {
		if err := g.normalize(); err != nil {
			return nil, fmt.Errorf("%w (group %d)", err, i)
		}
		gs[i] = g
	}
	s := &Solver{params: append([]Param(nil), params...), groupSteps: groupSteps{groups: gs}, member: make([]int, len(params)), options: o,
		values: make([]any, len(params)), grads: make([]any, len(params)), clip: make([]clipWork, len(params))}
	seen := map[string]bool{}
	for i, p := range s.params {
		if err := p.check(); err != nil {
			return nil, err
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("optim: two parameters are named %q", p.Name)
		}
		seen[p.Name] = true
		s.member[i] = -1
		for gi, g := range gs {
			if g.Select == nil || g.Select(p) {
				s.member[i] = gi
				break
			}
		}
		if s.member[i] < 0 {
			return nil, fmt.Errorf("optim: %s belongs to no group (add a group with no Select for the rest)", p.describe())
		}
	}
	opts, err := s.build(true)
	if err != nil {
		return nil, err
	}
	s.opts = opts
	return s, nil
}

// normalize fills in the defaults of a group and checks it.
func (g *Group) normalize() error {
	if err := checkLR(g.LR); err != nil {
		return err
	}
	if err := checkMomentum(g.Momentum); err != nil {
		return err
	}
	if !(g.WeightDecay >= 0) || math.IsInf(g.WeightDecay, 0) {
		return fmt.Errorf("optim: weight decay %v, want a finite value >= 0", g.WeightDecay)
	}
	switch g.Method {
	case MethodRSDM, MethodRGD, MethodRiemannianAdam:
	default:
		return fmt.Errorf("optim: unknown method %d for constrained weights", g.Method)
	}
	switch g.Rule {
	case RuleSGD, RuleAdam:
	case RuleAdamW:
		if g.WeightDecay == 0 {
			g.WeightDecay = 0.01
		}
	default:
		return fmt.Errorf("optim: unknown rule %d for unconstrained parameters", g.Rule)
	}
	if err := g.Adam.defaults(); err != nil {
		return err
	}
	return checkSchedule(g.Schedule)
}

// lr returns the group's step size at step t.
func (g *Group) lr(t int) float64 {
	if g.Schedule == nil {
		return g.LR
	}
	return g.LR * g.Schedule.Factor(t)
}

// build makes every parameter's optimizer from its group; with check it
// also requires every constrained weight to lie on its manifold.
func (s *Solver) build(check bool) ([]paramOpt, error) {
	opts := make([]paramOpt, len(s.params))
	for i := range s.params {
		p := &s.params[i]
		g := &s.groups[s.member[i]]
		var err error
		switch v := p.Value.(type) {
		case []float32:
			opts[i], err = newParamOpt(g, i, p, v, check)
		case []float64:
			opts[i], err = newParamOpt(g, i, p, v, check)
		}
		if err != nil {
			return nil, err
		}
	}
	return opts, nil
}

func newParamOpt[T Float](g *Group, index int, p *Param, v []T, check bool) (paramOpt, error) {
	lr := g.lr(0)
	if !p.Constrained() {
		var opt twoPhase[T]
		var err error
		if g.Rule == RuleSGD {
			opt, err = NewSGD[T](len(v), SGDConfig{LR: lr, Momentum: g.Momentum})
		} else {
			ac := g.Adam
			ac.LR = lr
			opt, err = NewAdam[T](len(v), ac)
		}
		if err != nil {
			return nil, fmt.Errorf("optim: %s: %w", p.describe(), err)
		}
		return &typedOpt[T]{o: opt, decay: g.WeightDecay, lr: lr}, nil
	}
	m, wide, err := ManifoldOf[T](*p)
	if err != nil {
		return nil, err
	}
	n, k := m.Dims()
	if check {
		x := v
		if wide {
			x = make([]T, len(v))
			transpose(x, v, k, n)
		}
		if f := m.Feasibility(x); !(f <= feasibilityTol(m)) {
			what := "W^T W"
			if wide {
				what = "W W^T"
			}
			return nil, fmt.Errorf("optim: %s: marked as constrained but ||%s - I||_F = %.3g: put it on its manifold first (optim.Param.Orthonormalize, or param.Param.Orthonormalize for a Gorgonia node)", p.describe(), what, f)
		}
	}
	if p.GradA != nil && g.Method != MethodRSDM {
		return nil, fmt.Errorf("optim: %s: has a factored gradient, which only RSDM steps (compile the program without factored gradients for %v)", p.describe(), g.Method)
	}
	var opt twoPhase[T]
	switch g.Method {
	case MethodRGD:
		opt, err = NewRGD(m, RGDConfig{LR: lr, Momentum: g.Momentum})
	case MethodRiemannianAdam:
		opt, err = NewRiemannianAdam(m, RiemannianAdamConfig{LR: lr, Beta1: g.Adam.Beta1, Beta2: g.Adam.Beta2, Eps: g.Adam.Eps})
	default:
		rc := g.RSDM
		rc.LR = lr
		rc.Seed = mixSeed(rc.Seed, index)
		opt, err = NewRSDM(m, rc)
	}
	if err != nil {
		return nil, fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	if wide {
		opt = newTransposed(opt, n, k)
	}
	return &typedOpt[T]{o: opt, constrained: true, m: m, wide: wide, lr: lr}, nil
}

// typedOpt is one parameter's optimizer of element type T.
type typedOpt[T Float] struct {
	o           twoPhase[T]
	constrained bool
	m           manifold.Manifold[T] // a constrained weight's (of W^T when wide)
	wide        bool
	lr, decay   float64 // the step size and the decoupled weight decay
}

func (t *typedOpt[T]) prepare(v, g any) error {
	if f, ok := g.(factored); ok {
		fs, ok := t.o.(interface {
			prepareFactored(x []T, g Factored[T]) error
		})
		if !ok {
			return errFactoredRSDMOnly
		}
		return fs.prepareFactored(v.([]T), Factored[T]{K: f.k, A: f.a.([]T), B: f.b.([]T)})
	}
	return t.o.prepare(v.([]T), g.([]T))
}

func (t *typedOpt[T]) commit(v, g any) {
	w := v.([]T)
	if t.decay > 0 && t.lr > 0 { // decoupled: w <- (1 - lr wd) w, then the update
		f := T(1 - t.lr*t.decay)
		for i := range w {
			w[i] *= f
		}
	}
	gs, _ := g.([]T) // nil for a factored gradient: RSDM's commit does not read it
	t.o.commit(w, gs)
}

func (t *typedOpt[T]) abort()                 { t.o.abort() }
func (t *typedOpt[T]) state() State           { return t.o.State() }
func (t *typedOpt[T]) setState(s State) error { return t.o.SetState(s) }

func (t *typedOpt[T]) setLR(lr float64) error {
	if lr == t.lr {
		return nil
	}
	if err := t.o.SetLR(lr); err != nil {
		return err
	}
	t.lr = lr
	return nil
}

// groupSteps is what Solver and DeviceSolver share: the groups, whose step
// sizes their schedules scale, and the step count that drives them.
type groupSteps struct {
	groups []Group
	steps  int
}

// SetLR sets the base step size of group i (a manual schedule; a group's
// Schedule still scales it). It must be finite and >= 0.
func (s *groupSteps) SetLR(group int, lr float64) error {
	if group < 0 || group >= len(s.groups) {
		return fmt.Errorf("optim: group %d of %d", group, len(s.groups))
	}
	if err := checkLR(lr); err != nil {
		return err
	}
	s.groups[group].LR = lr
	return nil
}

// LR returns the step size group i takes at the next Step.
func (s *groupSteps) LR(group int) float64 {
	if group < 0 || group >= len(s.groups) {
		return math.NaN()
	}
	return s.groups[group].lr(s.steps)
}

// Steps returns the number of steps taken: the schedules' step count.
func (s *groupSteps) Steps() int { return s.steps }

// SetSteps sets the step count that drives the schedules (for a state
// saved without it).
func (s *groupSteps) SetSteps(n int) error {
	if n < 0 {
		return fmt.Errorf("optim: step count %d", n)
	}
	s.steps = n
	return nil
}

// Params returns the name and shape of every parameter, in order.
func (s *Solver) Params() []ParamInfo {
	out := make([]ParamInfo, len(s.params))
	for i, p := range s.params {
		_, is32 := p.Value.([]float32)
		out[i] = ParamInfo{Name: p.Name, Shape: append([]int(nil), p.Shape...), Float32: &is32}
	}
	return out
}

// Step updates every parameter from its gradient. A NaN or Inf gradient
// fails the step, with an error wrapping ErrNotFinite and naming the
// parameter, before any parameter moves; any other failure also leaves
// every parameter and every optimizer's state as they were.
func (s *Solver) Step() error { return s.step(true) }

// StepChecked is Step for a caller that has already checked every gradient
// for NaN and Inf (a compiled program checks while it computes them): it
// skips the scan.
func (s *Solver) StepChecked() error { return s.step(false) }

func (s *Solver) step(scan bool) error {
	for i := range s.params {
		p := &s.params[i]
		g, err := p.gradient()
		if err != nil {
			return err
		}
		if scan && !finiteAny(g) {
			return fmt.Errorf("optim: gradient of %s: %w; no parameter was updated", p.describe(), ErrNotFinite)
		}
		s.values[i], s.grads[i] = p.Value, g
	}
	if s.options.ClipNorm > 0 {
		if err := s.clipGrads(); err != nil {
			return err
		}
	}
	for i, o := range s.opts {
		if err := o.setLR(s.groups[s.member[i]].lr(s.steps)); err != nil {
			return fmt.Errorf("optim: %s: %w", s.params[i].describe(), err)
		}
	}
	for i, o := range s.opts {
		if err := o.prepare(s.values[i], s.grads[i]); err != nil {
			for k := i; k >= 0; k-- {
				s.opts[k].abort()
			}
			return fmt.Errorf("optim: %s: %w; no parameter was updated", s.params[i].describe(), err)
		}
	}
	for i, o := range s.opts {
		o.commit(s.values[i], s.grads[i])
	}
	s.steps++
	return nil
}

// State returns the state of every parameter's optimizer, in the order of
// the parameters, for a checkpoint (the step count apart: Steps).
func (s *Solver) State() []State {
	out := make([]State, len(s.opts))
	for i, o := range s.opts {
		out[i] = o.state()
	}
	return out
}

// SetState restores states returned by State of a solver with the same
// groups over the same parameters. Empty states reset every optimizer to
// its fresh state. On error the solver is unchanged.
func (s *Solver) SetState(states []State) error {
	opts, err := s.build(false)
	if err != nil {
		return err
	}
	if len(states) == 0 {
		s.opts = opts
		return nil
	}
	if len(states) != len(s.params) {
		return fmt.Errorf("optim: %d states for %d parameters", len(states), len(s.params))
	}
	for i, st := range states {
		if err := opts[i].setState(st); err != nil {
			return fmt.Errorf("optim: %s: %w", s.params[i].describe(), err)
		}
	}
	s.opts = opts
	return nil
}

// ZeroGrad sets every gradient (or both factors of a factored one) to zero.
func (s *Solver) ZeroGrad() error {
	for i := range s.params {
		g, err := s.params[i].gradient()
		if err != nil {
			return err
		}
		zero(g)
	}
	return nil
}

func zero(g any) {
	switch d := g.(type) {
	case []float32:
		clear(d)
	case []float64:
		clear(d)
	case factored:
		zero(d.a)
		zero(d.b)
	}
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
