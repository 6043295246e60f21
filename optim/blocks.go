package optim

import (
	"fmt"

	"github.com/orthonet/orthonet/manifold"
)

// The building blocks a rule's step is written in once, for the host and
// for a device: a rule that implements Described writes its step as calls
// of StepBlocks; the host's stepper (described, below) records them once as
// slice operations, and optim/device's records them as backend kernels.

// Ref names a matrix of the weight's shape in a step's description: X,
// G, or a buffer the description asked StepBlocks.Buffer for.
type Ref int

const (
	// X is the weight (a constrained weight's column-orthonormal view).
	X Ref = iota
	// G is the weight's Euclidean gradient.
	G
)

// Coef is a coefficient of a step: Value, times the step's size when
// TimesLR is set.
type Coef struct {
	Value   float64
	TimesLR bool
}

// StepBlocks are the building blocks of a constrained weight's step: a
// rule's Describe calls them in order, once, and the host and the device
// each run what it recorded at every step.
type StepBlocks interface {
	// Buffer returns a matrix of the weight's shape, zero at first: a
	// workspace when name is "", else a buffer of the rule's state, kept
	// from step to step and saved under name (StateMomentum, ...) once a
	// step has been taken.
	Buffer(name string) Ref
	// Proj sets dst to the projection of v on the tangent space at x; dst
	// may be v.
	Proj(dst, x, v Ref)
	// AddScaled sets dst = x + a y; dst may be x or y.
	AddScaled(dst, x Ref, a Coef, y Ref)
	// Retract sets dst = R_x(a v), the manifold's retraction of the
	// tangent vector a v at x; dst is neither x nor v.
	Retract(dst, x Ref, a Coef, v Ref)
	// Move makes src the weight's new value (X <- src) when the step is
	// taken; it is the description's last block.
	Move(src Ref)
}

// Described is a rule of constrained weights whose step is written once
// in StepBlocks (RGDConfig's is). Its host stepper is BindDescribed's, and
// optim/device steps it on a device (the Stiefel manifold with the QR
// retraction) from the same description, with no code of its own.
type Described interface {
	Rule
	// Describe writes one step of the weight X along its gradient G in b.
	Describe(b StepBlocks) error
}

// BindDescribed returns the host's stepper of p by the rule d: what a
// Described rule's Stepper returns.
func BindDescribed(p Param, b Binding, d Described) (Stepper, error) {
	return bind(p, b, onManifold(newDescribed[float32], d), onManifold(newDescribed[float64], d))
}

// described is the host's stepper of a Described rule: the description
// recorded as operations on slices, which prepare runs into workspaces
// and commit moves into the weight and the state.
type described[T Float] struct {
	kind   string
	m      manifold.Manifold[T]
	n      int
	bufs   [][]T            // by slot: X, G, then the buffers and the states' next values
	ops    []func() error   // the description, recorded
	states []describedState // the rule's state buffers
	result int              // the slot Move takes the new value from
	tmp    []T              // Retract's direction a v
	lr     float64
	// started: a step was taken, so the state buffers are saved.
	started bool
}

// describedState is a state buffer: its slot, and the slot of its value
// after the step under way, which commit swaps in.
type describedState struct {
	name       string
	slot, next int
	written    bool // the description writes it
}

// newDescribed records d's description on m.
func newDescribed[T Float](m manifold.Manifold[T], d Described) (*described[T], error) {
	if m == nil {
		return nil, fmt.Errorf("optim: %v needs a manifold", d)
	}
	n, p := m.Dims()
	o := &described[T]{kind: d.String(), m: m, n: n * p, bufs: make([][]T, 2), result: -1, tmp: make([]T, n*p)}
	rec := &recorder[T]{o: o, slot: []int{0, 1}}
	if err := d.Describe(rec); err != nil {
		return nil, fmt.Errorf("optim: %v: %w", d, err)
	}
	if rec.err == nil && o.result < 0 {
		rec.err = fmt.Errorf("its description moves nothing into the weight (StepBlocks.Move)")
	}
	if rec.err != nil {
		return nil, fmt.Errorf("optim: %v: %w", d, rec.err)
	}
	return o, nil
}

func (o *described[T]) prepare(x, grad []T) error {
	o.bufs[0], o.bufs[1] = x, grad
	for _, op := range o.ops {
		if err := op(); err != nil {
			return fmt.Errorf("optim: %s: %w", o.kind, err)
		}
	}
	return nil
}

func (o *described[T]) commit(x, _ []T) {
	copy(x, o.bufs[o.result])
	for _, s := range o.states {
		if s.written {
			o.bufs[s.slot], o.bufs[s.next] = o.bufs[s.next], o.bufs[s.slot]
		}
	}
	o.started = true
}

func (o *described[T]) abort() {}

// SetLR changes the step size, for a schedule; it must be finite and >= 0.
func (o *described[T]) SetLR(lr float64) error { return setLR(&o.lr, lr) }

// State returns a copy of the state buffers, once a step has been taken.
func (o *described[T]) State() State {
	st := emptyState(o.kind)
	if !o.started {
		return st
	}
	for _, s := range o.states {
		st.Buffers[s.name] = append([]T(nil), o.bufs[s.slot]...)
	}
	return st
}

// SetState restores a State of the same rule and weight shape: every
// state buffer, or none (no step taken yet). On error nothing changes.
func (o *described[T]) SetState(st State) error {
	if err := st.check(o.kind); err != nil {
		return err
	}
	for name := range st.Buffers {
		if !o.keeps(name) {
			return fmt.Errorf("optim: %s state has a buffer %q, which its settings do not keep", o.kind, name)
		}
	}
	restored := make([][]T, len(o.states))
	for i, s := range o.states {
		restored[i] = make([]T, o.n)
		ok, err := buffer(st, s.name, restored[i], true)
		if err != nil {
			return err
		}
		if ok != (len(st.Buffers) > 0) {
			return fmt.Errorf("optim: %s state has %d of its %d buffers", o.kind, len(st.Buffers), len(o.states))
		}
	}
	for i, s := range o.states {
		copy(o.bufs[s.slot], restored[i])
	}
	o.started = len(st.Buffers) > 0
	return nil
}

// keeps reports whether name is one of the state's buffers.
func (o *described[T]) keeps(name string) bool {
	for _, s := range o.states {
		if s.name == name {
			return true
		}
	}
	return false
}

// recorder is the StepBlocks that records a description for the host: each
// block becomes a closure over slots of o.bufs. A state buffer is read
// from its slot until the description first writes it, and from then on
// from its next value's slot, which commit swaps in.
type recorder[T Float] struct {
	o    *described[T]
	slot []int // of each Ref, now
	err  error
}

var _ StepBlocks = (*recorder[float64])(nil)

func (r *recorder[T]) Buffer(name string) Ref {
	o := r.o
	ref := Ref(len(r.slot))
	r.slot = append(r.slot, len(o.bufs))
	o.bufs = append(o.bufs, make([]T, o.n))
	if name != "" {
		if o.keeps(name) {
			r.fail(fmt.Errorf("two state buffers named %q", name))
		}
		o.states = append(o.states, describedState{name: name, slot: len(o.bufs) - 1, next: len(o.bufs)})
		o.bufs = append(o.bufs, make([]T, o.n))
	}
	return ref
}

// read returns the slot a block reads ref from.
func (r *recorder[T]) read(ref Ref) int {
	if ref < 0 || int(ref) >= len(r.slot) {
		r.fail(fmt.Errorf("a block names matrix %d, which StepBlocks did not give", ref))
		return 0
	}
	return r.slot[ref]
}

// write returns the slot a block writes ref to: a state buffer's next
// value from its first write on. The weight is written only by Move.
func (r *recorder[T]) write(ref Ref) int {
	s := r.read(ref)
	if ref == X || ref == G {
		r.fail(fmt.Errorf("a block writes the weight or its gradient (the weight moves by StepBlocks.Move)"))
	}
	for i := range r.o.states {
		if st := &r.o.states[i]; st.slot == s {
			st.written = true
			r.slot[ref] = st.next
			return st.next
		}
	}
	return s
}

func (r *recorder[T]) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// coef returns a's value at the step under way.
func (r *recorder[T]) coef(a Coef) func() T {
	o := r.o
	if a.TimesLR {
		return func() T { return T(a.Value * o.lr) }
	}
	return func() T { return T(a.Value) }
}

func (r *recorder[T]) Proj(dst, x, v Ref) {
	o, xs, vs := r.o, r.read(x), r.read(v)
	ds := r.write(dst)
	r.o.ops = append(r.o.ops, func() error { return o.m.Proj(o.bufs[ds], o.bufs[xs], o.bufs[vs]) })
}

func (r *recorder[T]) AddScaled(dst, x Ref, a Coef, y Ref) {
	o, xs, ys, c := r.o, r.read(x), r.read(y), r.coef(a)
	ds := r.write(dst)
	r.o.ops = append(r.o.ops, func() error {
		addScaled(o.bufs[ds], o.bufs[xs], c(), o.bufs[ys])
		return nil
	})
}

// addScaled sets dst = x + a y.
func addScaled[T Float](dst, x []T, a T, y []T) {
	for i := range dst {
		dst[i] = x[i] + a*y[i]
	}
}

func (r *recorder[T]) Retract(dst, x Ref, a Coef, v Ref) {
	o, xs, vs, c := r.o, r.read(x), r.read(v), r.coef(a)
	ds := r.write(dst)
	if ds == xs || ds == vs {
		r.fail(fmt.Errorf("the retraction's result overwrites its point or direction"))
	}
	r.o.ops = append(r.o.ops, func() error {
		a, v := c(), o.bufs[vs]
		for i := range o.tmp {
			o.tmp[i] = a * v[i]
		}
		return o.m.Retract(o.bufs[ds], o.bufs[xs], o.tmp)
	})
}

func (r *recorder[T]) Move(src Ref) {
	if r.o.result >= 0 {
		r.fail(fmt.Errorf("its description moves the weight twice"))
	}
	r.o.result = r.read(src)
}
