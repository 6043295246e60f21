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
	// None names no matrix: StepBlocks.SGD's momentum buffer when it keeps
	// none.
	None Ref = -1
)

// Coef is a coefficient of a step: Value, times the step's size when
// TimesLR is set.
type Coef struct {
	Value   float64
	TimesLR bool
}

// StepBlocks are the building blocks of a parameter's step: a rule's
// Describe calls them in order, once, and the host and the device each run
// what it recorded at every step. Proj and Retract step a constrained
// weight, and a step that ends in Move is computed into workspaces and
// moved when the Solver commits it; Decay, SGD and Adam step an
// unconstrained parameter, in place when the step is committed (their
// arithmetic, internal/update's on the host and backend.SGDStep and
// AdamStep on a device, cannot fail).
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
	// WeightDecay returns the decoupled weight decay of the parameter's
	// group (0 for a constrained weight), which Decay applies: a rule of
	// unconstrained parameters applies it itself.
	WeightDecay() float64
	// Counter keeps a count of the steps taken in the rule's state under
	// name (StateStepCount, Adam's t): a step's commit advances it, and
	// Adam reads the step's count, 1 at the first step. A rule keeps at
	// most one.
	Counter(name string)
	// Decay shrinks an unconstrained weight by decoupled weight decay,
	// X <- (1 - eta rate) X (nothing when rate is 0), just before the SGD
	// or Adam block that must follow it.
	Decay(rate float64)
	// SGD moves an unconstrained weight by SGD along G: with a momentum
	// buffer mom (a state buffer, or None when mu is 0),
	// mom <- mu mom + G and X <- X - eta mom, else X <- X - eta G. It is
	// the description's last block, in place of Move.
	SGD(mom Ref, mu float64)
	// Adam moves an unconstrained weight by Adam with bias correction at
	// the step count t of Counter: with the state buffers m and v,
	// m <- b1 m + (1 - b1) G, v <- b2 v + (1 - b2) G^2 (in float64) and
	// X <- X - eta (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). It is
	// the description's last block, in place of Move.
	Adam(m, v Ref, beta1, beta2, eps float64)
}

// Described is a rule whose step is written once in StepBlocks (RGDConfig's,
// SGDConfig's, AdamConfig's and AdamWConfig's are). Its host stepper is
// BindDescribed's, and optim/device steps it on a device (a constrained
// weight on the Stiefel manifold with the QR retraction) from the same
// description, with no code of its own.
type Described interface {
	Rule
	// Describe writes one step of the weight X along its gradient G in b.
	Describe(b StepBlocks) error
}

// BindDescribed returns the host's stepper of p by the rule d: what a
// Described rule's Stepper returns. The group's weight decay is the
// description's to apply (StepBlocks.WeightDecay, Decay).
func BindDescribed(p Param, b Binding, d Described) (Stepper, error) {
	decay := b.WeightDecay
	if p.Constrained() {
		decay = 0
	}
	b.WeightDecay = 0
	return bind(p, b, describe[float32](d, decay), describe[float64](d, decay))
}

// describe adapts newDescribed to bind.
func describe[T Float](d Described, decay float64) func(manifold.Manifold[T], int) (twoPhase[T], error) {
	return func(m manifold.Manifold[T], n int) (twoPhase[T], error) { return newDescribed(m, n, d, decay) }
}

// stateKinded is a rule whose States' Kind is not its name: AdamW's are
// Adam's.
type stateKinded interface{ stateKind() string }

// kindOf returns the Kind of d's States.
func kindOf(d Rule) string {
	if k, ok := d.(stateKinded); ok {
		return k.stateKind()
	}
	return d.String()
}

// described is the host's stepper of a Described rule: the description
// recorded as operations on slices, which prepare runs into workspaces
// and commit moves into the weight and the state.
type described[T Float] struct {
	kind   string
	m      manifold.Manifold[T] // nil for an unconstrained parameter
	n      int
	bufs   [][]T            // by slot: X, G, then the buffers and the states' next values
	ops    []func() error   // the description, recorded
	states []describedState // the rule's state buffers
	result int              // the slot Move takes the new value from
	move   func(x, g []T)   // or the in-place move (SGD, Adam) commit runs
	tmp    []T              // Retract's direction a v
	lr     float64
	decay  float64 // the group's weight decay
	// counter names the step count (Counter; "" for none), count is it.
	counter string
	count   int
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

// newDescribed records d's description on m, or for an unconstrained
// parameter (m nil) of n entries with the group's weight decay.
func newDescribed[T Float](m manifold.Manifold[T], n int, d Described, decay float64) (*described[T], error) {
	if m != nil {
		rows, cols := m.Dims()
		n = rows * cols
	}
	if n < 1 {
		return nil, fmt.Errorf("optim: %v for %d entries, want at least 1", d, n)
	}
	o := &described[T]{kind: kindOf(d), m: m, n: n, bufs: make([][]T, 2), result: -1, decay: decay}
	rec := &recorder[T]{o: o, slot: []int{0, 1}}
	if err := d.Describe(rec); err != nil {
		return nil, fmt.Errorf("optim: %v: %w", d, err)
	}
	rec.finish()
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

func (o *described[T]) commit(x, grad []T) {
	if o.counter != "" {
		o.count++
	}
	if o.move != nil {
		o.move(x, grad)
	} else {
		copy(x, o.bufs[o.result])
	}
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
	if o.counter != "" {
		st.Counters[o.counter] = int64(o.count)
	}
	if !o.started {
		return st
	}
	for _, s := range o.states {
		st.Buffers[s.name] = append([]T(nil), o.bufs[s.slot]...)
	}
	return st
}

// SetState restores a State of the same rule and weight shape: every
// state buffer, or none (no step taken yet), and the step count of a rule
// that keeps one, above 0 just when the buffers are there. On error
// nothing changes.
func (o *described[T]) SetState(st State) error {
	if err := st.check(o.kind); err != nil {
		return err
	}
	count := 0
	if o.counter != "" {
		var err error
		if count, err = st.counter(o.counter, 0, 1<<62); err != nil {
			return err
		}
		if len(o.states) > 0 && (count > 0) != (len(st.Buffers) > 0) {
			return fmt.Errorf("optim: %s state: step %d with %d of its %d buffers", o.kind, count, len(st.Buffers), len(o.states))
		}
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
	o.started, o.count = len(st.Buffers) > 0, count
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
	// decay is Decay's rate, which the next SGD or Adam takes (decayed).
	decay   float64
	decayed bool
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
	if r.o.result >= 0 || r.o.move != nil {
		r.fail(fmt.Errorf("a block after the one that moves the weight (StepBlocks.Move, SGD or Adam), which is the last"))
	}
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
	r.constrained("Proj")
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
	r.constrained("Retract")
	if r.o.tmp == nil {
		r.o.tmp = make([]T, r.o.n)
	}
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
	r.moved()
	r.o.result = r.read(src)
}

// moved fails a second block that moves the weight.
func (r *recorder[T]) moved() {
	if r.o.result >= 0 || r.o.move != nil {
		r.fail(fmt.Errorf("its description moves the weight twice"))
	}
}

// constrained fails a block of a constrained weight's in a description of
// an unconstrained parameter's step.
func (r *recorder[T]) constrained(block string) {
	if r.o.m == nil {
		r.fail(fmt.Errorf("StepBlocks.%s steps a weight on a manifold, and this parameter is unconstrained", block))
	}
}

// finish checks the recorded description as a whole: it moves the
// weight, and a Decay went into an SGD or Adam block. A state buffer that
// only an in-place block writes needs no next value.
func (r *recorder[T]) finish() {
	if r.o.result < 0 && r.o.move == nil {
		r.fail(fmt.Errorf("its description moves nothing into the weight (StepBlocks.Move, SGD or Adam)"))
	}
	if r.decayed {
		r.fail(fmt.Errorf("its StepBlocks.Decay is not followed by SGD or Adam"))
	}
	for _, s := range r.o.states {
		if !s.written {
			r.o.bufs[s.next] = nil
		}
	}
}
