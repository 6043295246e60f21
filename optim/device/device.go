// Package device steps optim's rules where a backend keeps the parameters
// (a compiled program's on a GPU), so that parameters, gradients and
// optimizer state stay in device memory: New(be) goes into
// optim.Options.Device, and the one optim.Solver does everything else
// (groups, schedules, validation, the all-or-nothing step, states that move
// between host and device).
//
// It steps constrained weights on the Stiefel manifold with the QR
// retraction by RSDM with a sampler of rows (Permutation, Blocks or one's
// own; one inner step, QR inner retraction) or by RGD, and the other
// parameters by SGD (with momentum), Adam or AdamW: RSDM by the table
// rules, whose stepper is built in rsdm.go, and every rule that writes its
// step once in optim.StepBlocks (optim.Described: RGD, SGD, Adam, AdamW,
// or one's own), whose description described.go records as kernels. Each Step enqueues its kernels and returns
// without waiting for them; the Q factors are Cholesky QR on the device
// (backend.QF), and a fault the device meets is reported by the backend's
// next Sync or CopyOut.
package device

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// Steppers builds the steppers of parameters whose values and gradients
// are operands of one backend. Its steppers' step sizes go to the device
// together, in one copy per step.
type Steppers struct {
	be    backend.Backend
	hyper *hyperTable
}

var _ optim.Device = (*Steppers)(nil)

// New returns the steppers of be's operands.
func New(be backend.Backend) *Steppers { return &Steppers{be: be, hyper: &hyperTable{be: be}} }

// Operand is an optim.Value in a backend's memory: N elements from the
// operand's offset, as a Param's Value or Grad.
type Operand struct {
	backend.Operand
	N int
}

var _ optim.Value = Operand{}

// On returns the n elements of a backend's memory at op as an optim.Value.
func On(op backend.Operand, n int) Operand { return Operand{Operand: op, N: n} }

// Len returns N.
func (o Operand) Len() int { return o.N }

// Float32 reports whether the buffer's elements are float32.
func (o Operand) Float32() bool { return backend.DTypeOf(o.Operand) == backend.Float32 }

// Check checks that p's Value and Grad are Operands of as many float32 or
// float64 elements as its shape holds, both of one type.
func (d *Steppers) Check(p optim.Param) (bool, error) {
	vo, ok1 := p.Value.(Operand)
	gop, ok2 := p.Grad.(Operand)
	if !ok1 || !ok2 {
		return false, fmt.Errorf("value %T and gradient %T, want device.Operand", p.Value, p.Grad)
	}
	v, g := vo.Operand, gop.Operand
	if vo.N != size(p.Shape) || gop.N != size(p.Shape) {
		return false, fmt.Errorf("value of %d and gradient of %d elements for shape %v", vo.N, gop.N, p.Shape)
	}
	dt := backend.DTypeOf(v)
	if dt != backend.Float32 && dt != backend.Float64 {
		return false, fmt.Errorf("value of %v, want float32 or float64", dt)
	}
	n := size(p.Shape)
	if err := backend.CheckOperand("value", v, dt, n); err != nil {
		return false, err
	}
	return dt == backend.Float32, backend.CheckOperand("gradient", g, dt, n)
}

func size(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// errNotOnDevice names a setting the device steppers do not run.
func errNotOnDevice(what, instead string) error {
	return optim.NotOnDevice(fmt.Sprintf("%s does not run on a device (what does: %s)", what, instead))
}

// Stepper returns the stepper of p by r on the device, which r's entry
// of rules builds.
func (d *Steppers) Stepper(r optim.Rule, p optim.Param, b optim.Binding) (st optim.Stepper, err error) {
	if _, err := d.Check(p); err != nil {
		return nil, err
	}
	e := lookup(r)
	desc, described := r.(optim.Described)
	if e == nil && !described {
		return nil, errNotOnDevice(fmt.Sprintf("the %v rule", r), ruleNames(p.Constrained()))
	}
	w := &work{be: d.be, p: p, rule: r, b: b, shape: p.Shape, value: p.Value.(Operand).Operand, grad: p.Grad.(Operand).Operand,
		table: d.hyper}
	w.dt = backend.DTypeOf(w.value)
	defer func() {
		if err != nil {
			st, err = nil, errors.Join(err, w.Close())
		}
	}()
	if w.slot, err = d.hyper.take(); err != nil {
		return nil, err
	}
	w.hyper = w.slot.operand()
	if e == nil {
		return describedStepper(w, desc)
	}
	return e.build(w, r)
}

// rules are the rules a device steps by steppers of their own, each with
// the function that builds it in the rule's own file of this package.
// Stepper looks a rule up here by its type, so that a rule of one's own
// (even one that embeds these) is refused by name. A rule that describes
// its step in optim.StepBlocks (optim.Described: RGD, SGD, Adam, AdamW)
// needs no entry: the device runs its description (described.go).
var rules = []deviceRule{
	on(rsdmStepper),
}

// deviceRule is an entry of rules: a rule type's name and constraint, and
// the builder of its steppers.
type deviceRule struct {
	name        string
	constrained bool
	is          func(optim.Rule) bool
	build       func(*work, optim.Rule) (optim.Stepper, error)
}

// on returns the entry of rules of type R, whose steppers build builds.
func on[R optim.Rule](build func(*work, R) (optim.Stepper, error)) deviceRule {
	var zero R
	return deviceRule{
		name:        zero.String(),
		constrained: zero.Constrained(),
		is:          func(r optim.Rule) bool { _, ok := r.(R); return ok },
		build:       func(w *work, r optim.Rule) (optim.Stepper, error) { return build(w, r.(R)) },
	}
}

// lookup returns the entry of rules of r's type, nil when there is none.
func lookup(r optim.Rule) *deviceRule {
	for i := range rules {
		if rules[i].is(r) {
			return &rules[i]
		}
	}
	return nil
}

// ruleNames lists the names of rules that step constrained weights
// (constrained) or the others: "a, b and c".
func ruleNames(constrained bool) string {
	var names []string
	for _, e := range rules {
		if e.constrained == constrained {
			names = append(names, e.name)
		}
	}
	for _, r := range optim.Rules { // the rules the device runs from their descriptions
		if _, ok := r.(optim.Described); ok && r.Constrained() == constrained && lookup(r) == nil {
			names = append(names, r.String())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// work is what a parameter's device stepper is built from and holds: the
// parameter and its rule, the buffers it allocated, and its
// hyperparameters (the step size, and for Adam the step count), its slot
// of the Steppers' table, which Prepare writes before each step and the
// step's first Commit copies to the device.
type work struct {
	be          backend.Backend
	p           optim.Param
	rule        optim.Rule
	b           optim.Binding
	shape       []int // what the rule steps: a weight's column-orthonormal view
	value, grad backend.Operand
	dt          backend.DType
	owned       []backend.Buffer
	table       *hyperTable
	slot        hyperSlot
	hyper       backend.Operand // the slot's
}

// alloc returns zeroed buffers of dt, of each of sizes elements, that
// Close frees.
func (w *work) alloc(dt backend.DType, sizes ...int) ([]backend.Operand, error) {
	ops := make([]backend.Operand, len(sizes))
	for i, n := range sizes {
		b, err := w.be.Alloc(dt, n)
		if err != nil {
			return nil, err
		}
		w.owned = append(w.owned, b)
		ops[i] = backend.At(b, 0)
	}
	return ops, nil
}

// prepare prepares kernels in order into one Func.
func (w *work) prepare(ks ...backend.Kernel) (backend.Func, error) {
	fns := make([]backend.Func, len(ks))
	for i, k := range ks {
		f, err := w.be.Prepare(k)
		if err != nil {
			return nil, err
		}
		fns[i] = f
	}
	return backend.Sequence(fns), nil
}

// setHyper sets the step's hyperparameters, which the step's first Commit
// copies to the device with every other stepper's.
func (w *work) setHyper(h ...float64) { w.table.set(w.slot, h...) }

// commit copies the step's hyperparameters, unless an earlier Commit of
// the step did, then runs the step's Func.
func (w *work) commit(step backend.Func) error {
	if err := w.table.flush(); err != nil {
		return err
	}
	return step()
}

// hostStepper returns the host's stepper of the same rule for a parameter
// of w's shape and element type, on zeros: building it checks the rule's
// settings, and its SetState the states the device's stepper takes.
func (w *work) hostStepper() (optim.Stepper, error) { return w.rule.Stepper(w.hostParam(), w.b) }

// hostParam returns a parameter of w's shape and element type on the
// host, of zeros.
func (w *work) hostParam() optim.Param {
	p := optim.Param{Name: w.p.Name, Shape: w.shape, Manifold: w.p.Manifold, Value: make(optim.Host[float64], size(w.shape))}
	if w.dt == backend.Float32 {
		p.Value = make(optim.Host[float32], size(w.shape))
	}
	return p
}

// Close frees the stepper's buffers and its slot of the hyperparameters.
func (w *work) Close() error {
	var errs []error
	for _, b := range w.owned {
		errs = append(errs, w.be.Free(b))
	}
	w.owned = nil
	if w.table != nil {
		errs = append(errs, w.table.release(w.slot))
		w.slot = hyperSlot{}
	}
	return errors.Join(errs...)
}

// ---- the state's buffers ---------------------------------------------------------------

// buffered is the stepper of a rule whose step keeps buffers of the
// parameter's size (SGD's and RGD's momentum, Adam's moments): one
// prepared step, and the buffers, which State and SetState move between
// the device and the host in the host stepper's States, under optim's
// names (optim.StateMomentum, ...).
type buffered struct {
	*work
	kind    string            // the host stepper's State.Kind
	counter string            // the name of the step count (Adam's); "" for none
	names   []string          // the state's buffers
	bufs    []backend.Operand // where they live
	t       int               // steps taken, the counter
	started bool              // a step was taken: the buffers are state
	step    backend.Func
}

// newBuffered checks w's rule against the host's stepper and allocates
// the state's buffers, one of the parameter's size for each name.
func newBuffered(w *work, counter string, names ...string) (*buffered, error) {
	host, err := w.hostStepper()
	if err != nil {
		return nil, err
	}
	bufs, err := w.alloc(w.dt, slices.Repeat([]int{size(w.shape)}, len(names))...)
	if err != nil {
		return nil, err
	}
	return &buffered{work: w, kind: host.State().Kind, counter: counter, names: names, bufs: bufs}, nil
}

// Prepare sets the step size and, with a counter, the step's count (from
// which Adam's step computes the bias corrections on the device).
func (o *buffered) Prepare(_ optim.Gradient, lr float64) error {
	if o.counter == "" {
		o.setHyper(lr)
	} else {
		o.setHyper(lr, float64(o.t+1))
	}
	return nil
}

func (o *buffered) Abort() {}

func (o *buffered) Commit() error {
	o.t++
	o.started = true
	return o.commit(o.step)
}

func (o *buffered) State() optim.State {
	st := optim.State{Kind: o.kind, Counters: map[string]int64{}, Random: map[string][]byte{}, Buffers: map[string]any{}}
	if o.counter != "" {
		st.Counters[o.counter] = int64(o.t)
	}
	for i, name := range o.names {
		if !o.started {
			break
		}
		h := any(make([]float64, size(o.shape)))
		if o.dt == backend.Float32 {
			h = make([]float32, size(o.shape))
		}
		if err := o.be.CopyOut(h, o.bufs[i].Buf, o.bufs[i].Off); err != nil {
			// A checkpoint's State cannot fail: a state that does not
			// restore says what went wrong instead.
			return optim.State{Kind: "unreadable: " + err.Error()}
		}
		st.Buffers[name] = h
	}
	return st
}

// SetState checks st as the host's stepper restores it, then writes its
// buffers to the device.
func (o *buffered) SetState(st optim.State) error {
	host, err := o.hostStepper()
	if err != nil {
		return err
	}
	if err := host.SetState(st); err != nil {
		return err
	}
	o.t = 0
	if o.counter != "" {
		o.t = int(st.Counters[o.counter]) // a fresh stepper's buffers are zero until then
	}
	var errs []error
	for i, name := range o.names {
		var b any
		if b, o.started = st.Buffers[name]; o.started { // of the parameter's type, as the host checked
			errs = append(errs, o.be.CopyIn(o.bufs[i].Buf, o.bufs[i].Off, b))
		}
	}
	return errors.Join(errs...)
}

// ---- the frame of a constrained weight ---------------------------------------------------

// frame is an n x p weight with orthonormal columns as a step works on it:
// the weight itself, or for a wide weight its transpose in device memory,
// copied in before the step and out after it.
type frame struct {
	x, g    backend.Operand
	in, out backend.Func // no-ops for a tall weight
	n, p    int
}

// newFrame returns the frame of w's weight, which must be on the Stiefel
// manifold with the QR retraction (what a device's Q factors compute), and
// sets w.shape to the frame's n x p.
func newFrame(w *work) (frame, error) {
	if m, ok := w.p.Manifold.(manifold.StiefelKind); !ok || m.Retraction != manifold.QR {
		return frame{}, errNotOnDevice(fmt.Sprintf("a weight on the %v manifold", w.p.Manifold), "the Stiefel manifold with the QR retraction")
	}
	n, p, ok := w.p.Matrix()
	if !ok {
		return frame{}, fmt.Errorf("marked as constrained but has shape %v, want a matrix or a tensor of 3 or more axes", w.p.Shape)
	}
	f := frame{x: w.value, g: w.grad, n: n, p: p, in: backend.Sequence(nil), out: backend.Sequence(nil)}
	if n >= p {
		w.shape = []int{n, p}
		return f, nil
	}
	n, p = p, n
	f.n, f.p = n, p
	w.shape = []int{n, p}
	ops, err := w.alloc(w.dt, n*p, n*p)
	if err != nil {
		return f, err
	}
	f.x, f.g = ops[0], ops[1]
	// The weight is p x n; its transpose X (n x p) has X[i][j] = W[j][i].
	tr := func(src, dst backend.Operand) backend.Copy {
		return backend.Copy{Shape: []int{n, p}, Src: src, Dst: dst, SrcStrides: []int{1, n}, DstStrides: []int{p, 1}}
	}
	back := backend.Copy{Shape: []int{p, n}, Src: f.x, Dst: w.value, SrcStrides: []int{1, p}, DstStrides: []int{n, 1}}
	if f.in, err = w.prepare(tr(w.value, f.x), tr(w.grad, f.g)); err != nil {
		return f, err
	}
	f.out, err = w.prepare(back)
	return f, err
}

// around returns a Func that runs fns between the frame's copies in and
// out.
func (f frame) around(fns ...backend.Func) backend.Func {
	return backend.Sequence(append(append([]backend.Func{f.in}, fns...), f.out))
}
