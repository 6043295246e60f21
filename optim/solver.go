package optim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"reflect"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Group is a set of parameters that share an update rule and its settings,
// as a parameter group of torch.optim.
type Group struct {
	// Select picks the group's parameters from those no earlier group
	// took; nil takes all of them.
	Select func(Param) bool
	// Rule steps the group's parameters: RSDMConfig, RGDConfig or
	// RiemannianAdamConfig for constrained weights, SGDConfig, AdamConfig
	// or AdamWConfig for the others, or a Rule of one's own. If Rule is
	// nil, SGDConfig{} steps unconstrained parameters (a constrained
	// weight needs a rule that names it).
	Rule Rule
	// LR is the base step size, finite and >= 0 (0 freezes the group).
	LR float64
	// Schedule scales LR with the Solver's steps; nil keeps it constant.
	Schedule Schedule
	// WeightDecay is decoupled weight decay of the unconstrained
	// parameters: each step first scales them by 1 - lr * WeightDecay.
	// Constrained weights ignore it.
	WeightDecay float64
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
	// Device builds the steppers of parameters whose Value and Grad are
	// not Host slices but a device's memory (package optim/device does it
	// for a backend's operands). If Device is nil, every value must be a
	// Host[float32] or Host[float64].
	Device Device
	// Checked, when set, is called at the start of every Step in place of
	// the scan of every gradient for NaN and Inf, by a caller that checks
	// them where they are computed (a compiled program). An error fails
	// the step before any parameter moves.
	Checked func() error
	// ZeroGrad sets every gradient to zero after every Step, failed or
	// not, as Gorgonia's solvers do (a tape machine adds each run's
	// gradients to the bound ones).
	ZeroGrad bool
	// Comm, when set, makes the Solver one rank of data-parallel training:
	// each Step averages over the ranks what the step needs of the
	// gradients before any parameter moves (see Communicator). If Comm is
	// nil the Solver steps alone.
	Comm Communicator
	// ChecksumEvery is how many steps apart a Solver with Comm compares a
	// checksum of its weights across the ranks (Solver.CheckWeights). 0
	// selects the default, every 100 steps; a negative value never.
	ChecksumEvery int
}

// Device steps parameters whose values live in a device's memory. The
// Solver does the rest (groups, schedules, validation, the all-or-nothing
// step, states) as it does for host slices.
type Device interface {
	// Check checks p's value and gradient as the device's own and reports
	// whether their elements are float32.
	Check(p Param) (float32 bool, err error)
	// Stepper returns the stepper of p by r, or an error saying what of r
	// the device does not run. Its Prepare gets a nil gradient (the
	// stepper reads p.Grad itself); its Commit enqueues the step's work;
	// it may implement io.Closer to free its memory.
	Stepper(r Rule, p Param, b Binding) (Stepper, error)
}

// Solver updates parameters from their gradients, each by the Stepper its
// group's Rule built for it. It is built once over its parameters, as
// torch.optim's optimizers are; Step updates all of them. Every Step is
// all-or-nothing: on error no parameter, buffer or counter has moved. The
// Solver counts its steps, which drive the groups' schedules and are part
// of its state.
type Solver struct {
	groups []Group
	steps  int // steps taken, which drive the schedules
	params []Param
	member []int // each parameter's group
	// slots are the parameters' steppers: a device's, or a typedSlot
	// around a host parameter's.
	slots         []Stepper
	options       Options
	grads         []Gradient // the gradients of the Step under way
	host, float32 []bool     // each parameter's value is a host slice; of float32
	red           *reduction // with Options.Comm (reduce.go)
}

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
		if err := g.check(); err != nil {
			return nil, fmt.Errorf("%w (group %d)", err, i)
		}
		gs[i] = g
	}
	s := &Solver{params: append([]Param(nil), params...), groups: gs, member: make([]int, len(params)), options: o,
		grads: make([]Gradient, len(params)), host: make([]bool, len(params)), float32: make([]bool, len(params))}
	seen := map[string]bool{}
	for i, p := range s.params {
		if err := s.checkParam(i); err != nil {
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
	slots, err := s.build(true)
	if err != nil {
		return nil, err
	}
	s.slots = slots
	return s, nil
}

// checkParam checks parameter i: a host slice, or a value of the device.
func (s *Solver) checkParam(i int) error {
	p := s.params[i]
	_, bytes := floats(p.Value)
	s.host[i], s.float32[i] = bytes > 0, bytes == 4
	if s.host[i] || s.options.Device == nil {
		return p.check()
	}
	for _, d := range p.Shape {
		if d < 0 {
			return fmt.Errorf("optim: parameter %q has shape %v", p.Name, p.Shape)
		}
	}
	switch {
	case p.GradA != nil:
		return fmt.Errorf("optim: %s has a factored gradient, which the steppers on a device do not take (compile the program without factored gradients)", p.describe())
	case s.options.ClipNorm > 0:
		return NotOnDevice(fmt.Sprintf("optim: gradient clipping (ClipNorm %v) reads every gradient on the host, but %s lives on a device", s.options.ClipNorm, p.describe()))
	}
	var err error
	if s.float32[i], err = s.options.Device.Check(p); err != nil {
		return fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	return nil
}

// check checks a group's settings.
func (g *Group) check() error {
	if err := checkLR(g.LR); err != nil {
		return err
	}
	if lr, ok := ruleLR(g.Rule); ok && lr != 0 && lr != g.LR {
		return fmt.Errorf("optim: the group's rule %v sets LR %v, which a Solver does not read: the group's LR (%v) is its step size; set Group.LR instead", g.Rule, lr, g.LR)
	}
	if !(g.WeightDecay >= 0) || math.IsInf(g.WeightDecay, 0) {
		return fmt.Errorf("optim: weight decay %v, want a finite value >= 0", g.WeightDecay)
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

// build makes every parameter's stepper from its group's rule; with check
// it also requires every constrained weight to lie on its manifold.
func (s *Solver) build(check bool) ([]Stepper, error) {
	slots := make([]Stepper, len(s.params))
	for i, p := range s.params {
		g := &s.groups[s.member[i]]
		b := Binding{Index: i, WeightDecay: g.WeightDecay}
		r, err := ruleOf(p, g)
		if err == nil {
			switch v := p.Value.(type) {
			case Host[float32]:
				slots[i], err = newSlot(p, r, b, v, check)
			case Host[float64]:
				slots[i], err = newSlot(p, r, b, v, check)
			default: // in the device's memory, where its stepper reads the gradient
				if slots[i], err = s.options.Device.Stepper(r, p, b); err != nil {
					err = fmt.Errorf("optim: %s: %w", p.describe(), err)
				}
			}
		}
		if err != nil {
			closeSlots(slots[:i])
			return nil, err
		}
	}
	if s.options.Comm != nil {
		if err := s.split(slots); err != nil {
			return nil, errors.Join(err, closeSlots(slots))
		}
	}
	return slots, nil
}

// closeSlots frees what the steppers of slots hold on a device.
func closeSlots(slots []Stepper) error {
	var errs []error
	for _, sl := range slots {
		if c, ok := sl.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Close frees what the steppers of device parameters hold on the device
// (nothing for host slices).
func (s *Solver) Close() error {
	err := closeSlots(s.slots)
	s.slots = nil
	return err
}

// ruleOf returns the rule of p in g: the group's, or its default.
func ruleOf(p Param, g *Group) (Rule, error) {
	r := g.Rule
	if r == nil {
		if p.Constrained() {
			return nil, fmt.Errorf("optim: %s is on the %v manifold, but its group has no rule (RSDMConfig, RGDConfig, RiemannianAdamConfig or one's own)", p.describe(), p.Manifold)
		}
		r = SGDConfig{}
	}
	if r.Constrained() != p.Constrained() {
		what := "unconstrained parameters"
		if r.Constrained() {
			what = "weights on a manifold"
		}
		return nil, fmt.Errorf("optim: %s: rule %v steps %s only (give the others a group of their own)", p.describe(), r, what)
	}
	return r, nil
}

// newSlot returns the stepper of a host parameter by its rule r; with
// check it requires a constrained weight to lie on its manifold.
func newSlot[T Float](p Param, r Rule, b Binding, v Host[T], check bool) (_ Stepper, err error) {
	sl := &typedSlot[T]{x: v}
	view := p
	if p.Constrained() {
		if sl.m, sl.wide, err = ManifoldOf[T](p); err != nil {
			return nil, err
		}
		sl.rows, sl.cols = sl.m.Dims()
		if sl.wide {
			sl.xt, sl.gt = make([]T, len(v)), make([]T, len(v))
			linalg.Transpose(sl.xt, v, sl.cols, sl.rows)
			view.Shape, view.Value, view.Grad = []int{sl.rows, sl.cols}, Host[T](sl.xt), nil
		}
		if f := sl.m.Feasibility(view.Value.(Host[T])); check && !(f <= manifold.Tolerance(sl.m)) {
			return nil, fmt.Errorf("optim: %s: marked as constrained but %s = %.3g: put it on its manifold first (optim.Param.Orthonormalize, or param.Param.Orthonormalize for a Gorgonia node)", p.describe(), offBy(sl.m, sl.wide), f)
		}
	}
	if sl.Stepper, err = r.Stepper(view, b); err != nil {
		return nil, fmt.Errorf("optim: %s: %w", p.describe(), err)
	}
	if p.GradA != nil {
		if o, _ := sl.rsdm(); o == nil {
			return nil, fmt.Errorf("optim: %s: has a factored gradient, which only RSDM steps (compile the program without factored gradients for %v)", p.describe(), r)
		}
	}
	return sl, nil
}

// typedSlot is the stepper of a host parameter of element type T, around
// the one its rule built: it transposes a wide weight and takes the norm of
// the gradient for clipping.
type typedSlot[T Float] struct {
	Stepper
	x          []T
	m          manifold.Manifold[T] // a constrained weight's (of W^T when wide)
	wide       bool
	rows, cols int // of the column-orthonormal view
	xt, gt     []T // a wide weight's view W^T and its gradient G^T
	clip       []T // sqNorm's workspace
	// gtBox holds gt, and fBox the last factored gradient (fLast), as the
	// Stepper takes them: boxed once, not at every step.
	gtBox, fBox Gradient
	fLast       Factored[T]
}

// offBy names what m's Feasibility measures of a weight: ||W^T W - I||_F
// (||W W^T - I||_F for a wide one) on the Stiefel and Grassmann manifolds,
// else its distance from m's own constraint.
func offBy[T Float](m manifold.Manifold[T], wide bool) string {
	_, stiefel := m.(*manifold.Stiefel[T])
	_, grass := m.(*manifold.Grassmann[T])
	switch {
	case (stiefel || grass) && wide:
		return "||W W^T - I||_F"
	case stiefel || grass:
		return "||W^T W - I||_F"
	}
	return "its distance from " + manifoldName(m) + " (its Feasibility)"
}

// Prepare prepares the step; a wide weight's stepper sees W^T and G^T,
// copied in first, and a factored gradient A^T B of W is B^T A for W^T:
// its factors swap, with no copy.
func (t *typedSlot[T]) Prepare(grad Gradient, lr float64) error {
	if _, ok := grad.(summed); ok { // RSDM's P G (PX)^T, summed over the ranks
		o, x := t.rsdm()
		return o.finish(x)
	}
	if t.wide {
		linalg.Transpose(t.xt, t.x, t.cols, t.rows)
	}
	if f, ok := grad.(factored); ok {
		g := Factored[T]{K: f.k, A: f.a.(Host[T]), B: f.b.(Host[T])}
		if t.wide {
			g.A, g.B = g.B, g.A
		}
		if t.fBox == nil || !sameFactors(g, t.fLast) {
			t.fBox, t.fLast = g, g
		}
		return t.Stepper.Prepare(t.fBox, lr)
	}
	if t.wide {
		linalg.Transpose(t.gt, grad.(Host[T]), t.cols, t.rows)
		if t.gtBox == nil {
			t.gtBox = Host[T](t.gt)
		}
		grad = t.gtBox
	}
	return t.Stepper.Prepare(grad, lr)
}

// sameFactors reports whether a and b are the same factors in memory.
func sameFactors[T Float](a, b Factored[T]) bool {
	return a.K == b.K && len(a.A) == len(b.A) && len(a.B) == len(b.B) && len(a.A) > 0 && len(a.B) > 0 &&
		&a.A[0] == &b.A[0] && &a.B[0] == &b.B[0]
}

func (t *typedSlot[T]) Commit() error {
	err := t.Stepper.Commit()
	if t.wide {
		linalg.Transpose(t.x, t.xt, t.rows, t.cols)
	}
	return err
}

// SetLR sets the base step size of group i (a manual schedule; a group's
// Schedule still scales it). It must be finite and >= 0.
func (s *Solver) SetLR(group int, lr float64) error {
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
func (s *Solver) LR(group int) float64 {
	if group < 0 || group >= len(s.groups) {
		return math.NaN()
	}
	return s.groups[group].lr(s.steps)
}

// Steps returns the number of steps taken: the schedules' step count.
func (s *Solver) Steps() int { return s.steps }

// SetSteps sets the step count that drives the schedules (for a state
// saved without it).
func (s *Solver) SetSteps(n int) error {
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
		is32 := s.float32[i]
		out[i] = ParamInfo{Name: p.Name, Shape: append([]int(nil), p.Shape...), Float32: &is32}
	}
	return out
}

// Step updates every parameter from its gradient. A NaN or Inf gradient
// fails the step, with an error wrapping ErrNotFinite and naming the
// parameter, before any parameter moves; any other failure also leaves
// every parameter and every optimizer's state as they were, but for an
// error a device meets enqueuing the step's work (the device reports its
// faults at its next synchronization, as every step of it does). With
// Options.Comm every rank calls Step together, and a step that fails on
// one rank fails on all, none of them moving.
func (s *Solver) Step() error {
	err := s.step()
	if s.options.ZeroGrad {
		err = errors.Join(err, s.ZeroGrad())
	}
	return err
}

func (s *Solver) step() error {
	err := s.gradients()
	if s.red != nil {
		err = s.red.reduce(s, err)
	}
	if err != nil {
		return err
	}
	if s.options.ClipNorm > 0 {
		if err := s.clipGrads(); err != nil {
			return err
		}
	}
	for i, o := range s.slots {
		if err := o.Prepare(s.grads[i], s.groups[s.member[i]].lr(s.steps)); err != nil {
			for k := i; k >= 0; k-- {
				s.slots[k].Abort()
			}
			s.red.abortSplit(s, i+1, len(s.slots))
			return fmt.Errorf("optim: %s: %w; no parameter was updated", s.params[i].describe(), err)
		}
	}
	var errs []error
	for i, o := range s.slots {
		if err := o.Commit(); err != nil {
			errs = append(errs, fmt.Errorf("optim: %s: %w", s.params[i].describe(), err))
		}
	}
	s.steps++
	return errors.Join(errs...)
}

// gradients collects the gradients of the step into s.grads, checked.
func (s *Solver) gradients() error {
	if s.options.Checked != nil {
		if err := s.options.Checked(); err != nil {
			return err
		}
	}
	for i := range s.params {
		p := &s.params[i]
		if !s.host[i] {
			continue
		}
		g, err := p.gradient()
		if err != nil {
			return err
		}
		if s.options.Checked == nil && !finiteAny(g) {
			return fmt.Errorf("optim: gradient of %s: %w; no parameter was updated", p.describe(), ErrNotFinite)
		}
		s.grads[i] = g
	}
	return nil
}

// State returns the state of every parameter's optimizer, in the order of
// the parameters, for a checkpoint (the step count apart: Steps).
func (s *Solver) State() []State {
	out := make([]State, len(s.slots))
	for i, o := range s.slots {
		out[i] = o.State()
	}
	return out
}

// SetState restores states returned by State of a solver with the same
// groups over the same parameters. Empty states reset every optimizer to
// its fresh state. On error the solver is unchanged.
func (s *Solver) SetState(states []State) error {
	if len(states) != 0 && len(states) != len(s.params) {
		return fmt.Errorf("optim: %d states for %d parameters", len(states), len(s.params))
	}
	slots, err := s.build(false)
	if err != nil {
		return err
	}
	for i, st := range states {
		if err := slots[i].SetState(st); err != nil {
			return errors.Join(fmt.Errorf("optim: %s: %w", s.params[i].describe(), err), closeSlots(slots))
		}
	}
	old := s.slots
	s.slots = slots
	return closeSlots(old)
}

// ZeroGrad sets every gradient on the host (or both factors of a factored
// one) to zero.
func (s *Solver) ZeroGrad() error {
	for i := range s.params {
		if !s.host[i] {
			continue
		}
		g, err := s.params[i].gradient()
		if err != nil {
			return err
		}
		zero(g)
	}
	return nil
}

func zero(g Gradient) {
	switch d := g.(type) {
	case Host[float32]:
		clear(d)
	case Host[float64]:
		clear(d)
	case factored:
		zero(d.a)
		zero(d.b)
	}
}

// WeightSeed derives the seed of a weight's RSDM sampler from its group's
// seed and the weight's position in the Solver, so that weights draw
// independent submanifolds.
func WeightSeed(seed uint64, index int) uint64 {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(index))
	_, _ = h.Write(b[:])
	return h.Sum64()
}

// ruleLR returns the step size a rule value carries of its own (a float64
// field LR, as SGDConfig's, for the rule used alone: NewSGD), and whether
// it has one. A Group steps by its own LR; a different one in its rule
// would be silently ignored, so check refuses it.
func ruleLR(r Rule) (float64, bool) {
	v := reflect.ValueOf(r)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, false
	}
	f := v.FieldByName("LR")
	if !f.IsValid() || f.Kind() != reflect.Float64 {
		return 0, false
	}
	return f.Float(), true
}
