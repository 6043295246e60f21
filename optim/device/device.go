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
// parameters by SGD (with momentum), Adam or AdamW. Each Step enqueues its
// kernels and returns without waiting for them; the Q factors are Cholesky
// QR on the device (backend.QF), and a fault the device meets is reported
// by the backend's next Sync or CopyOut.
package device

import (
	"errors"
	"fmt"
	"slices"

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

// Check checks that p's Value and Grad are operands of as many float32 or
// float64 elements as its shape holds, both of one type.
func (d *Steppers) Check(p optim.Param) (bool, error) {
	v, ok1 := p.Value.(backend.Operand)
	g, ok2 := p.Grad.(backend.Operand)
	if !ok1 || !ok2 {
		return false, fmt.Errorf("value %T and gradient %T, want backend operands", p.Value, p.Grad)
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

// Stepper returns the stepper of p by r on the device.
func (d *Steppers) Stepper(r optim.Rule, p optim.Param, b optim.Binding) (st optim.Stepper, err error) {
	if _, err := d.Check(p); err != nil {
		return nil, err
	}
	w := &work{be: d.be, p: p, rule: r, b: b, shape: p.Shape, value: p.Value.(backend.Operand), grad: p.Grad.(backend.Operand),
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
	if p.Manifold == nil {
		switch c := r.(type) {
		case optim.SGDConfig:
			return newSGD(w, c.Momentum, b.WeightDecay)
		case optim.AdamConfig:
			return newAdam(w, c, b.WeightDecay)
		case optim.AdamWConfig:
			if b.WeightDecay == 0 {
				b.WeightDecay = 0.01
			}
			return newAdam(w, optim.AdamConfig(c), b.WeightDecay)
		}
		return nil, errNotOnDevice(fmt.Sprintf("the %v rule", r), "sgd, adam and adamw")
	}
	if m, ok := p.Manifold.(optim.Stiefel); !ok || m.Retraction != manifold.QR {
		return nil, errNotOnDevice(fmt.Sprintf("a weight on the %v manifold", p.Manifold), "the Stiefel manifold with the QR retraction")
	}
	f, err := newFrame(w)
	if err != nil {
		return nil, err
	}
	w.shape = []int{f.n, f.p}
	switch c := r.(type) {
	case optim.RGDConfig:
		return newRGD(w, f, c)
	case optim.RSDMConfig:
		switch {
		case c.Sampling != nil && !c.Sampling.Rows():
			return nil, errNotOnDevice(fmt.Sprintf("RSDM with %v sampling", c.Sampling), "a sampler of rows")
		case c.InnerSteps > 1 || c.Momentum != 0:
			return nil, errNotOnDevice("RSDM with inner steps or momentum", "RSDM with one inner step")
		case c.Retraction != manifold.QR:
			return nil, errNotOnDevice(fmt.Sprintf("RSDM with the %v inner retraction", c.Retraction), "QR")
		}
		if w.dt == backend.Float32 {
			return newRSDM[float32](w, f, c, b)
		}
		return newRSDM[float64](w, f, c, b)
	}
	return nil, errNotOnDevice(fmt.Sprintf("the %v rule", r), "rsdm and rgd")
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
func (w *work) hostStepper() (optim.Stepper, error) {
	p := optim.Param{Name: w.p.Name, Shape: w.shape, Manifold: w.p.Manifold, Value: make([]float64, size(w.shape))}
	if w.dt == backend.Float32 {
		p.Value = make([]float32, size(w.shape))
	}
	return w.rule.Stepper(p, w.b)
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

// ---- SGD, Adam and RGD ---------------------------------------------------------------

// buffered is SGD (with momentum and decoupled weight decay), Adam (with
// bias correction and decoupled weight decay) or RGD (with the QR
// retraction and heavy-ball momentum carried by tangent projection): one
// prepared step, and the state's buffers, which State and SetState move
// between the device and the host.
type buffered struct {
	*work
	kind    string
	names   []string          // the state's buffers
	bufs    []backend.Operand // where they live
	adam    *optim.AdamConfig // Adam's settings; nil for SGD and RGD
	t       int               // steps taken, Adam's counter
	started bool              // a step was taken: the buffers are state
	step    backend.Func
}

// newBuffered checks w's rule against the host's stepper and allocates
// the state's buffers, of the parameter's size: Adam's moments, or the
// momentum of SGD and RGD when they have one.
func newBuffered(w *work, kind string, momentum float64) (*buffered, error) {
	if _, err := w.hostStepper(); err != nil {
		return nil, err
	}
	var names []string
	switch {
	case kind == "adam":
		names = []string{"m", "v"}
	case momentum != 0:
		names = []string{"momentum"}
	}
	bufs, err := w.alloc(w.dt, slices.Repeat([]int{size(w.shape)}, len(names))...)
	return &buffered{work: w, kind: kind, names: names, bufs: bufs}, err
}

func newSGD(w *work, momentum, decay float64) (*buffered, error) {
	o, err := newBuffered(w, "sgd", momentum)
	if err != nil {
		return nil, err
	}
	k := backend.SGDStep{N: size(w.shape), Momentum: momentum, Decay: decay, W: w.value, G: w.grad, LR: w.hyper}
	if momentum != 0 {
		k.Mom = o.bufs[0]
	}
	o.step, err = w.prepare(k)
	return o, err
}

func newAdam(w *work, c optim.AdamConfig, decay float64) (*buffered, error) {
	host, err := optim.NewAdam[float64](size(w.shape), c)
	if err != nil {
		return nil, err
	}
	c = host.Config() // with its defaults
	o, err := newBuffered(w, "adam", 0)
	if err != nil {
		return nil, err
	}
	o.adam = &c
	o.step, err = w.prepare(backend.AdamStep{N: size(w.shape), Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, Decay: decay,
		W: w.value, G: w.grad, M: o.bufs[0], V: o.bufs[1], Hyper: w.hyper})
	return o, err
}

// Prepare sets the step size and, for Adam, the step's count, from which
// the step computes the bias corrections on the device.
func (o *buffered) Prepare(_ any, lr float64) error {
	if o.adam == nil {
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
	if o.adam != nil {
		st.Counters["t"] = int64(o.t)
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
	o.t = int(st.Counters["t"]) // a fresh stepper's buffers are zero until then
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

func newFrame(w *work) (frame, error) {
	n, p, ok := w.p.Matrix()
	if !ok {
		return frame{}, fmt.Errorf("marked as constrained but has shape %v, want a matrix or a tensor of 3 or more axes", w.p.Shape)
	}
	f := frame{x: w.value, g: w.grad, n: n, p: p, in: backend.Sequence(nil), out: backend.Sequence(nil)}
	if n >= p {
		return f, nil
	}
	n, p = p, n
	f.n, f.p = n, p
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

// ---- RSDM ------------------------------------------------------------------------------

// rsdmStep is RSDM whose draws (and state) the host's RSDM makes, through
// its hooks Draw, Undraw and Advance, so that the host and the device draw
// the same submanifolds for the same seed.
type rsdmStep[T optim.Float] struct {
	*work
	host    *optim.RSDM[T]
	rows    backend.Operand
	rowsInt []int32
	step    backend.Func
	reorth  backend.Func
}

func newRSDM[T optim.Float](w *work, f frame, c optim.RSDMConfig, b optim.Binding) (*rsdmStep[T], error) {
	m, err := manifold.NewStiefel[T](f.n, f.p)
	if err != nil {
		return nil, err
	}
	// The host's RSDM of the same rule, seeded as optim's own stepper is;
	// Prepare gives it each step's step size.
	c.LR, c.Seed = 0, optim.WeightSeed(c.Seed, b.Index)
	host, err := optim.NewRSDM(m, c)
	if err != nil {
		return nil, err
	}
	r, n, p, x := c.SubmanifoldSize, f.n, f.p, f.x
	ops, err := w.alloc(w.dt, r*p, r*p, r*r, r*r, r*p)
	if err != nil {
		return nil, err
	}
	px0, pg, bb, yt, upd := ops[0], ops[1], ops[2], ops[3], ops[4]
	rows, err := w.alloc(backend.Int32, r)
	if err != nil {
		return nil, err
	}
	y, err := w.alloc(backend.Float64, r*r)
	if err != nil {
		return nil, err
	}
	o := &rsdmStep[T]{work: w, host: host, rows: rows[0], rowsInt: make([]int32, r)}
	ks := []backend.Kernel{
		backend.GatherRows{N: r, Width: p, Rows: o.rows, Src: x, Dst: px0},
		backend.GatherRows{N: r, Width: p, Rows: o.rows, Src: f.g, Dst: pg},
		// B = P G (PX)^T; Y = qf(I - lr skew(B)), RSDM's step (Algorithm 1).
		backend.Gemm{TransB: true, M: r, N: r, K: p, Alpha: 1, A: pg, B: px0, C: bb, LDA: p, LDB: p, LDC: r},
		backend.SkewStep{R: r, B: bb, Y: y[0], LR: w.hyper},
		backend.QF{M: r, N: r, A: y[0]},
		// The sampled rows become PX0 + (Y - I) PX0.
		backend.IdentityDelta{R: r, Y: y[0], Dst: yt},
		backend.Copy{Shape: []int{r * p}, Src: px0, Dst: upd, SrcStrides: []int{1}, DstStrides: []int{1}},
		backend.Gemm{M: r, N: p, K: r, Alpha: 1, Beta: 1, A: yt, B: px0, C: upd, LDA: r, LDB: p, LDC: p},
		backend.ScatterRows{N: r, Width: p, Rows: o.rows, Src: upd, Dst: x},
	}
	step, err := w.prepare(ks...)
	if err != nil {
		return nil, err
	}
	o.step = f.around(step)
	if host.ReorthEvery() > 0 {
		qf, err := w.prepare(backend.QF{M: n, N: p, A: x})
		o.reorth = f.around(step, qf)
		return o, err
	}
	return o, nil
}

// Prepare draws the submanifold on the host, sends its rows to the device
// and sets the step size (which the step's first Commit sends).
func (o *rsdmStep[T]) Prepare(_ any, lr float64) error {
	if err := o.host.SetLR(lr); err != nil {
		return err
	}
	sub, err := o.host.Draw()
	if err != nil {
		return err
	}
	for i, v := range sub.Rows {
		o.rowsInt[i] = int32(v)
	}
	if err = o.be.CopyIn(o.rows.Buf, o.rows.Off, o.rowsInt); err != nil {
		o.host.Undraw()
		return err
	}
	o.setHyper(lr)
	return nil
}

func (o *rsdmStep[T]) Abort() { o.host.Undraw() }

func (o *rsdmStep[T]) Commit() error {
	reorth := o.reorth != nil && (o.host.Steps()+1)%o.host.ReorthEvery() == 0
	o.host.Advance()
	if reorth { // the step, then the Q factor of the weight
		return o.commit(o.reorth)
	}
	return o.commit(o.step)
}

func (o *rsdmStep[T]) State() optim.State            { return o.host.State() }
func (o *rsdmStep[T]) SetState(st optim.State) error { return o.host.SetState(st) }

// ---- RGD ---------------------------------------------------------------------------------

func newRGD(w *work, f frame, c optim.RGDConfig) (*buffered, error) {
	o, err := newBuffered(w, "rgd", c.Momentum)
	if err != nil {
		return nil, err
	}
	n, p := f.n, f.p
	ops, err := w.alloc(w.dt, n*p, n*p, p*p)
	if err != nil {
		return nil, err
	}
	rg, next, pp, x := ops[0], ops[1], ops[2], f.x
	// proj sets dst = v - x sym(x^T v), the tangent part of v at x.
	proj := func(dst, x, v backend.Operand) []backend.Kernel {
		ks := []backend.Kernel{
			backend.Gemm{TransA: true, M: p, N: p, K: n, Alpha: 1, A: x, B: v, C: pp, LDA: p, LDB: p, LDC: p},
			backend.Symmetrize{N: p, A: pp},
		}
		if dst != v {
			ks = append(ks, backend.Copy{Shape: []int{n * p}, Src: v, Dst: dst, SrcStrides: []int{1}, DstStrides: []int{1}})
		}
		return append(ks, backend.Gemm{M: n, N: p, K: p, Alpha: -1, Beta: 1, A: x, B: pp, C: dst, LDA: p, LDB: p, LDC: p})
	}
	ks := proj(rg, x, f.g)
	dir := rg
	if c.Momentum > 0 {
		// mom = momentum mom + rg, the direction; moved to the new point after.
		mom := o.bufs[0]
		ks = append(ks, backend.AddScaled{N: n * p, Alpha: c.Momentum, X: rg, Y: mom, Dst: mom})
		dir = mom
	}
	ks = append(ks,
		backend.AddScaled{N: n * p, Alpha: -1, X: x, Y: dir, Dst: next, Scale: w.hyper},
		backend.QF{M: n, N: p, A: next},
	)
	if c.Momentum > 0 {
		ks = append(ks, proj(dir, next, dir)...)
	}
	ks = append(ks, backend.Copy{Shape: []int{n * p}, Src: next, Dst: x, SrcStrides: []int{1}, DstStrides: []int{1}})
	step, err := w.prepare(ks...)
	o.step = f.around(step)
	return o, err
}
