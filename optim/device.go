package optim

import (
	"errors"
	"fmt"
	"math"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/manifold"
)

// DeviceParam is a parameter that a backend keeps in its own memory (a
// compiled program's on a GPU): Value and Grad are operands of as many
// elements as Shape holds, both float32 or both float64.
type DeviceParam struct {
	Name     string
	Shape    []int
	Manifold Manifold // nil for an unconstrained parameter
	Value    backend.Operand
	Grad     backend.Operand
}

// DeviceSolver updates parameters where a backend keeps them, as Solver
// does on the host: the same groups, schedules and step sizes, the same
// random submanifolds for the same seed, and the same states, so that a
// checkpoint moves between the two. Each Step enqueues its kernels on the
// backend and returns without waiting for them.
//
// It steps constrained weights by RSDM with Permutation or Blocks sampling
// (one inner step, QR retraction) or by RGD with the QR retraction, and the
// other parameters by SGD (with momentum), Adam or AdamW, all on Stiefel
// manifolds; NewDeviceSolver refuses the other settings (Riemannian Adam,
// Orthogonal sampling, RSDM momentum, other retractions, Grassmann
// weights, gradient clipping), naming them. The Q factors are Cholesky QR
// on the device (backend.QF).
type DeviceSolver struct {
	groupSteps // the groups and the step count: SetLR, LR, Steps, SetSteps
	be         backend.Backend
	params     []DeviceParam
	member     []int
	opts       []devOpt

	hyper     backend.Buffer // four float64 per parameter: step size, Adam's corrections
	hyperHost []float64
	owned     []backend.Buffer
}

// devOpt is one parameter's optimizer on the device.
type devOpt interface {
	// prepare does the host's part of the next step (a draw), writes the
	// step's hyperparameters into h and may fail; abort undoes it.
	prepare(lr float64, h []float64) error
	abort()
	// run enqueues the step's kernels.
	run() error
	// commit advances the host's counters after run.
	commit()
	state() (State, error)
	setState(State) error
}

// NewDeviceSolver returns a DeviceSolver over params on be, each stepped by
// the first group whose Select takes it (Select sees a Param with the
// name, shape and constraint and no values). It allocates the optimizer's
// buffers on be; Close frees them.
func NewDeviceSolver(be backend.Backend, params []DeviceParam, groups []Group, o Options) (*DeviceSolver, error) {
	if len(groups) == 0 {
		return nil, fmt.Errorf("optim: a solver needs at least one group")
	}
	if o.ClipNorm != 0 {
		return nil, fmt.Errorf("optim: gradient clipping (ClipNorm %v) is not available on the %s backend", o.ClipNorm, be.Name())
	}
	gs := make([]Group, len(groups))
	for i, g := range groups {
		if err := g.check(); err != nil {
			return nil, fmt.Errorf("%w (group %d)", err, i)
		}
		gs[i] = g
	}
	s := &DeviceSolver{be: be, params: append([]DeviceParam(nil), params...), groupSteps: groupSteps{groups: gs}, member: make([]int, len(params))}
	seen := map[string]bool{}
	for i, p := range s.params {
		hp := Param{Name: p.Name, Shape: p.Shape, Manifold: p.Manifold}
		if seen[p.Name] {
			return nil, fmt.Errorf("optim: two parameters are named %q", p.Name)
		}
		seen[p.Name] = true
		s.member[i] = -1
		for gi, g := range gs {
			if g.Select == nil || g.Select(hp) {
				s.member[i] = gi
				break
			}
		}
		if s.member[i] < 0 {
			return nil, fmt.Errorf("optim: %s belongs to no group (add a group with no Select for the rest)", hp.describe())
		}
	}
	var err error
	if s.hyper, err = be.Alloc(backend.Float64, 4*max(len(params), 1)); err != nil {
		return nil, err
	}
	s.owned = append(s.owned, s.hyper)
	s.hyperHost = make([]float64, 4*len(params))
	if s.opts, err = s.build(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// build makes every parameter's optimizer from its group.
func (s *DeviceSolver) build() ([]devOpt, error) {
	opts := make([]devOpt, len(s.params))
	for i, p := range s.params {
		d := deviceBuild{s: s, index: i, p: p, g: &s.groups[s.member[i]], lr: backend.At(s.hyper, 4*i)}
		var err error
		switch backend.DTypeOf(p.Value) {
		case backend.Float32:
			opts[i], err = newDevOpt[float32](d)
		case backend.Float64:
			opts[i], err = newDevOpt[float64](d)
		default:
			err = fmt.Errorf("value of %v, want float32 or float64", backend.DTypeOf(p.Value))
		}
		if err != nil {
			return nil, fmt.Errorf("optim: %s: %w", Param{Name: p.Name, Manifold: p.Manifold}.describe(), err)
		}
	}
	return opts, nil
}

// deviceBuild is what a parameter's device optimizer is built from.
type deviceBuild struct {
	s     *DeviceSolver
	index int
	p     DeviceParam
	g     *Group
	lr    backend.Operand // its four hyperparameters, the step size first
}

// alloc returns a zeroed buffer that the solver frees on Close.
func (d deviceBuild) alloc(dt backend.DType, n int) (backend.Operand, error) {
	b, err := d.s.be.Alloc(dt, n)
	if err != nil {
		return backend.Operand{}, err
	}
	d.s.owned = append(d.s.owned, b)
	return backend.At(b, 0), nil
}

// prepare prepares kernels in order into one Func.
func (d deviceBuild) prepare(ks ...backend.Kernel) (backend.Func, error) {
	fns := make([]backend.Func, len(ks))
	for i, k := range ks {
		f, err := d.s.be.Prepare(k)
		if err != nil {
			return nil, err
		}
		fns[i] = f
	}
	return backend.Sequence(fns), nil
}

func newDevOpt[T Float](d deviceBuild) (devOpt, error) {
	p, g := d.p, d.g
	n := 1
	for _, s := range p.Shape {
		n *= s
	}
	dt := backend.DTypeOf(p.Value)
	if err := backend.CheckOperand("value", p.Value, dt, n); err != nil {
		return nil, err
	}
	if err := backend.CheckOperand("gradient", p.Grad, dt, n); err != nil {
		return nil, err
	}
	lr := g.lr(0)
	hp := Param{Name: p.Name, Shape: p.Shape, Manifold: p.Manifold}
	rule, err := ruleOf(hp, g)
	if err != nil {
		return nil, err
	}
	if p.Manifold == nil {
		switch r := rule.(type) {
		case SGDConfig:
			host, err := NewSGD[T](n, SGDConfig{LR: lr, Momentum: r.Momentum})
			if err != nil {
				return nil, err
			}
			return newDevSGD(d, host, n, g.WeightDecay)
		case AdamConfig, AdamWConfig:
			ac, decay := AdamConfig{}, g.WeightDecay
			if aw, ok := r.(AdamWConfig); ok {
				ac = AdamConfig(aw)
				if decay == 0 {
					decay = 0.01
				}
			} else {
				ac = r.(AdamConfig)
			}
			ac.LR = lr
			host, err := NewAdam[T](n, ac)
			if err != nil {
				return nil, err
			}
			return newDevAdam(d, host, n, decay)
		}
		return nil, fmt.Errorf("%v is not available on the %s backend", rule, d.s.be.Name())
	}
	if st, ok := p.Manifold.(Stiefel); !ok || st.Retraction != manifold.QR {
		return nil, fmt.Errorf("weights on the %v manifold are not stepped on the %s backend (the Stiefel manifold with the QR retraction is)", p.Manifold, d.s.be.Name())
	}
	m, _, err := ManifoldOf[T](hp)
	if err != nil {
		return nil, err
	}
	rows, cols := m.Dims()
	switch rc := rule.(type) {
	case RGDConfig:
		host, err := NewRGD(m, RGDConfig{LR: lr, Momentum: rc.Momentum})
		if err != nil {
			return nil, err
		}
		return newDevRGD(d, host, rows, cols)
	case RSDMConfig:
		switch {
		case rc.Sampling != nil && !rc.Sampling.Rows():
			return nil, fmt.Errorf("RSDM with %v sampling is not available on the %s backend (samplers of rows are)", rc.Sampling, d.s.be.Name())
		case rc.InnerSteps > 1 || rc.Momentum != 0:
			return nil, fmt.Errorf("RSDM with inner steps or momentum is not available on the %s backend", d.s.be.Name())
		case rc.Retraction != manifold.QR:
			return nil, fmt.Errorf("RSDM with the %v retraction is not available on the %s backend (QR is)", rc.Retraction, d.s.be.Name())
		}
		rc.LR = lr
		rc.Seed = mixSeed(rc.Seed, d.index)
		host, err := NewRSDM(m, rc)
		if err != nil {
			return nil, err
		}
		return newDevRSDM(d, host, rows, cols)
	}
	return nil, fmt.Errorf("%v is not available on the %s backend", rule, d.s.be.Name())
}

// Step enqueues one step of every parameter from the gradients in their
// operands, which must be finite (a compiled program checks them while it
// computes them: program.Solver). The host's part of the step (the
// submanifolds' draws) is all-or-nothing; an error the device meets later
// (a Q factor that fails) is reported by the backend's next Sync or
// CopyOut.
func (s *DeviceSolver) Step() error {
	for i, o := range s.opts {
		h := s.hyperHost[4*i : 4*i+4]
		if err := o.prepare(s.groups[s.member[i]].lr(s.steps), h); err != nil {
			for k := i; k >= 0; k-- {
				s.opts[k].abort()
			}
			return fmt.Errorf("optim: %s: %w; no parameter was updated", s.describe(i), err)
		}
	}
	if len(s.hyperHost) > 0 {
		if err := s.be.CopyIn(s.hyper, 0, s.hyperHost); err != nil {
			for _, o := range s.opts {
				o.abort()
			}
			return fmt.Errorf("optim: writing the step sizes: %w; no parameter was updated", err)
		}
	}
	for i, o := range s.opts {
		if err := o.run(); err != nil {
			return fmt.Errorf("optim: %s: %w", s.describe(i), err)
		}
		o.commit()
	}
	s.steps++
	return nil
}

func (s *DeviceSolver) describe(i int) string {
	p := s.params[i]
	return Param{Name: p.Name, Manifold: p.Manifold}.describe()
}

// Params returns the name and shape of every parameter, in order.
func (s *DeviceSolver) Params() []ParamInfo {
	out := make([]ParamInfo, len(s.params))
	for i, p := range s.params {
		is32 := backend.DTypeOf(p.Value) == backend.Float32
		out[i] = ParamInfo{Name: p.Name, Shape: append([]int(nil), p.Shape...), Float32: &is32}
	}
	return out
}

// State returns every parameter's optimizer state, as Solver.State gives
// it, copying the device's buffers to the host.
func (s *DeviceSolver) State() []State {
	out := make([]State, len(s.opts))
	for i, o := range s.opts {
		st, err := o.state()
		if err != nil {
			// checkpoint.Solver's State cannot fail: a state that does not
			// restore says what went wrong instead.
			st = emptyState("unreadable: " + err.Error())
		}
		out[i] = st
	}
	return out
}

// SetState restores states returned by State (of a DeviceSolver or a
// Solver with the same groups over the same parameters). Empty states reset
// every optimizer. On error the solver is unchanged.
func (s *DeviceSolver) SetState(states []State) error {
	if len(states) != 0 && len(states) != len(s.params) {
		return fmt.Errorf("optim: %d states for %d parameters", len(states), len(s.params))
	}
	owned := len(s.owned)
	opts, err := s.build() // appends the new optimizers' buffers to s.owned
	if err == nil {
		for i := range states {
			if err = opts[i].setState(states[i]); err != nil {
				err = fmt.Errorf("optim: %s: %w", s.describe(i), err)
				break
			}
		}
	}
	fresh := append([]backend.Buffer(nil), s.owned[owned:]...)
	if err != nil {
		s.owned = s.owned[:owned]
		return errors.Join(err, s.free(fresh))
	}
	// The new optimizers replace the old ones, whose buffers go (all but
	// the hyperparameters, the first).
	old := append([]backend.Buffer(nil), s.owned[1:owned]...)
	s.owned = append([]backend.Buffer{s.hyper}, fresh...)
	s.opts = opts
	return s.free(old)
}

func (s *DeviceSolver) free(bufs []backend.Buffer) error {
	var errs []error
	for _, b := range bufs {
		errs = append(errs, s.be.Free(b))
	}
	return errors.Join(errs...)
}

// Close frees the solver's buffers on the backend.
func (s *DeviceSolver) Close() error {
	err := s.free(s.owned)
	s.owned = nil
	return err
}

// ---- SGD and Adam ------------------------------------------------------------------

type devSGD[T Float] struct {
	d       deviceBuild
	host    *SGD[T]
	n       int
	mom     backend.Operand
	step    backend.Func
	started bool // a step with momentum was taken: the buffer is state
}

func newDevSGD[T Float](d deviceBuild, host *SGD[T], n int, decay float64) (*devSGD[T], error) {
	o := &devSGD[T]{d: d, host: host, n: n}
	var err error
	if host.cfg.Momentum != 0 {
		if o.mom, err = d.alloc(backend.DTypeOf(d.p.Value), n); err != nil {
			return nil, err
		}
	}
	o.step, err = d.prepare(backend.SGDStep{N: n, Momentum: host.cfg.Momentum, Decay: decay, W: d.p.Value, G: d.p.Grad, Mom: o.mom, LR: d.lr})
	return o, err
}

func (o *devSGD[T]) prepare(lr float64, h []float64) error {
	if err := checkLR(lr); err != nil {
		return err
	}
	h[0] = lr
	return nil
}
func (o *devSGD[T]) abort()     {}
func (o *devSGD[T]) run() error { return o.step() }
func (o *devSGD[T]) commit()    { o.started = o.started || o.host.cfg.Momentum != 0 }

func (o *devSGD[T]) state() (State, error) {
	var err error
	o.host.mom, err = download[T](o.d.s.be, o.mom, o.n, o.started)
	return o.host.State(), err
}

func (o *devSGD[T]) setState(st State) error {
	if err := o.host.SetState(st); err != nil {
		return err
	}
	o.started = o.host.mom != nil
	return upload(o.d.s.be, o.mom, o.host.mom)
}

// download copies n elements at op to a new host slice, or returns nil
// when there are none yet (a momentum before the first step).
func download[T Float](be backend.Backend, op backend.Operand, n int, present bool) ([]T, error) {
	if !present {
		return nil, nil
	}
	h := make([]T, n)
	return h, be.CopyOut(h, op.Buf, op.Off)
}

// upload copies a host slice to op, if there is one.
func upload[T Float](be backend.Backend, op backend.Operand, h []T) error {
	if h == nil {
		return nil
	}
	return be.CopyIn(op.Buf, op.Off, h)
}

type devAdam[T Float] struct {
	d    deviceBuild
	host *Adam[T]
	n    int
	m, v backend.Operand
	step backend.Func
}

func newDevAdam[T Float](d deviceBuild, host *Adam[T], n int, decay float64) (*devAdam[T], error) {
	o := &devAdam[T]{d: d, host: host, n: n}
	dt := backend.DTypeOf(d.p.Value)
	var err error
	if o.m, err = d.alloc(dt, n); err != nil {
		return nil, err
	}
	if o.v, err = d.alloc(dt, n); err != nil {
		return nil, err
	}
	c := host.cfg
	o.step, err = d.prepare(backend.AdamStep{N: n, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, Decay: decay,
		W: d.p.Value, G: d.p.Grad, M: o.m, V: o.v, Hyper: d.lr})
	return o, err
}

func (o *devAdam[T]) prepare(lr float64, h []float64) error {
	if err := checkLR(lr); err != nil {
		return err
	}
	t := float64(o.host.t + 1)
	h[0], h[1], h[2] = lr, 1-math.Pow(o.host.cfg.Beta1, t), 1-math.Pow(o.host.cfg.Beta2, t)
	return nil
}
func (o *devAdam[T]) abort()     {}
func (o *devAdam[T]) run() error { return o.step() }
func (o *devAdam[T]) commit()    { o.host.t++ }

func (o *devAdam[T]) state() (State, error) {
	var err1, err2 error
	o.host.m, err1 = download[T](o.d.s.be, o.m, o.n, o.host.t > 0)
	o.host.v, err2 = download[T](o.d.s.be, o.v, o.n, o.host.t > 0)
	return o.host.State(), errors.Join(err1, err2)
}

func (o *devAdam[T]) setState(st State) error {
	if err := o.host.SetState(st); err != nil {
		return err
	}
	// (fresh: the moments are zero, and nil)
	return errors.Join(upload(o.d.s.be, o.m, o.host.m), upload(o.d.s.be, o.v, o.host.v))
}

// ---- the frame of a constrained weight ---------------------------------------------------

// frame is an n x p weight with orthonormal columns as a step works on it:
// the weight itself, or for a wide weight its transpose in device memory,
// copied in before the step and out after it.
type frame struct {
	x, g    backend.Operand
	in, out backend.Func // nil for a tall weight
	n, p    int
}

func newFrame(d deviceBuild, n, p int) (frame, error) {
	f := frame{x: d.p.Value, g: d.p.Grad, n: n, p: p}
	if d.p.Shape[0] >= d.p.Shape[1] {
		return f, nil
	}
	dt := backend.DTypeOf(d.p.Value)
	var err error
	if f.x, err = d.alloc(dt, n*p); err != nil {
		return f, err
	}
	if f.g, err = d.alloc(dt, n*p); err != nil {
		return f, err
	}
	// The weight is p x n; its transpose X (n x p) has X[i][j] = W[j][i].
	tr := func(src, dst backend.Operand) backend.Copy {
		return backend.Copy{Shape: []int{n, p}, Src: src, Dst: dst, SrcStrides: []int{1, n}, DstStrides: []int{p, 1}}
	}
	back := backend.Copy{Shape: []int{p, n}, Src: f.x, Dst: d.p.Value, SrcStrides: []int{1, p}, DstStrides: []int{n, 1}}
	if f.in, err = d.prepare(tr(d.p.Value, f.x), tr(d.p.Grad, f.g)); err != nil {
		return f, err
	}
	f.out, err = d.prepare(back)
	return f, err
}

// around runs step between the frame's copies in and out.
func (f frame) around(step backend.Func) error {
	if f.in != nil {
		if err := f.in(); err != nil {
			return err
		}
	}
	if err := step(); err != nil {
		return err
	}
	if f.out != nil {
		return f.out()
	}
	return nil
}

// ---- RSDM ------------------------------------------------------------------------------

type devRSDM[T Float] struct {
	d       deviceBuild
	host    *RSDM[T] // its sampler, random source and counters, and its state's form
	f       frame
	rows    backend.Operand
	rowsInt []int32
	step    backend.Func
	reorth  backend.Func
}

func newDevRSDM[T Float](d deviceBuild, host *RSDM[T], n, p int) (*devRSDM[T], error) {
	o := &devRSDM[T]{d: d, host: host, rowsInt: make([]int32, host.r)}
	var err error
	if o.f, err = newFrame(d, n, p); err != nil {
		return nil, err
	}
	r := host.r
	dt := backend.DTypeOf(d.p.Value)
	ops := make([]backend.Operand, 5)
	for i, size := range []int{r * p, r * p, r * r, r * r, r * p} { // px0, pg, b, yt, upd
		if ops[i], err = d.alloc(dt, size); err != nil {
			return nil, err
		}
	}
	px0, pg, b, yt, upd := ops[0], ops[1], ops[2], ops[3], ops[4]
	if o.rows, err = d.alloc(backend.Int32, r); err != nil {
		return nil, err
	}
	y, err := d.alloc(backend.Float64, r*r)
	if err != nil {
		return nil, err
	}
	x, g := o.f.x, o.f.g
	o.step, err = d.prepare(
		backend.GatherRows{N: r, Width: p, Rows: o.rows, Src: x, Dst: px0},
		backend.GatherRows{N: r, Width: p, Rows: o.rows, Src: g, Dst: pg},
		// B = P G (PX)^T; Y = qf(I - lr skew(B)), RSDM's inner step.
		backend.Gemm{TransB: true, M: r, N: r, K: p, Alpha: 1, A: pg, B: px0, C: b, LDA: p, LDB: p, LDC: r},
		backend.SkewStep{R: r, B: b, Y: y, LR: d.lr},
		backend.QF{M: r, N: r, A: y},
		// The sampled rows become PX0 + (Y - I) PX0.
		backend.IdentityDelta{R: r, Y: y, Dst: yt},
		backend.Copy{Shape: []int{r * p}, Src: px0, Dst: upd, SrcStrides: []int{1}, DstStrides: []int{1}},
		backend.Gemm{M: r, N: p, K: r, Alpha: 1, Beta: 1, A: yt, B: px0, C: upd, LDA: r, LDB: p, LDC: p},
		backend.ScatterRows{N: r, Width: p, Rows: o.rows, Src: upd, Dst: x},
	)
	if err != nil {
		return nil, err
	}
	if host.reorth > 0 {
		o.reorth, err = d.prepare(backend.QF{M: n, N: p, A: x})
	}
	return o, err
}

func (o *devRSDM[T]) prepare(lr float64, h []float64) error {
	if err := o.host.SetLR(lr); err != nil {
		return err
	}
	h[0] = lr
	sub, err := o.host.Draw()
	if err != nil {
		return err
	}
	for i, v := range sub.Rows {
		o.rowsInt[i] = int32(v)
	}
	return nil
}

func (o *devRSDM[T]) abort() { o.host.Undraw() }

func (o *devRSDM[T]) run() error {
	if err := o.d.s.be.CopyIn(o.rows.Buf, o.rows.Off, o.rowsInt); err != nil {
		return err
	}
	return o.f.around(func() error {
		if err := o.step(); err != nil {
			return err
		}
		if o.reorth != nil && (o.host.steps+1)%o.host.reorth == 0 {
			return o.reorth()
		}
		return nil
	})
}

func (o *devRSDM[T]) commit()                 { o.host.Advance() }
func (o *devRSDM[T]) state() (State, error)   { return o.host.State(), nil }
func (o *devRSDM[T]) setState(st State) error { return o.host.SetState(st) }

// ---- RGD ---------------------------------------------------------------------------------

type devRGD[T Float] struct {
	d       deviceBuild
	host    *RGD[T]
	f       frame
	mom     backend.Operand
	step    backend.Func
	started bool
}

func newDevRGD[T Float](d deviceBuild, host *RGD[T], n, p int) (*devRGD[T], error) {
	o := &devRGD[T]{d: d, host: host}
	var err error
	if o.f, err = newFrame(d, n, p); err != nil {
		return nil, err
	}
	dt := backend.DTypeOf(d.p.Value)
	rg, err := d.alloc(dt, n*p)
	if err != nil {
		return nil, err
	}
	next, err := d.alloc(dt, n*p)
	if err != nil {
		return nil, err
	}
	pp, err := d.alloc(dt, p*p)
	if err != nil {
		return nil, err
	}
	x := o.f.x
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
	ks := proj(rg, x, o.f.g)
	dir := rg
	if host.cfg.Momentum > 0 {
		if o.mom, err = d.alloc(dt, n*p); err != nil {
			return nil, err
		}
		// mom = momentum mom + rg, the direction; moved to the new point after.
		ks = append(ks, backend.AddScaled{N: n * p, Alpha: host.cfg.Momentum, X: rg, Y: o.mom, Dst: o.mom})
		dir = o.mom
	}
	ks = append(ks,
		backend.AddScaled{N: n * p, Alpha: -1, X: x, Y: dir, Dst: next, Scale: d.lr},
		backend.QF{M: n, N: p, A: next},
	)
	if host.cfg.Momentum > 0 {
		ks = append(ks, proj(o.mom, next, o.mom)...)
	}
	ks = append(ks, backend.Copy{Shape: []int{n * p}, Src: next, Dst: x, SrcStrides: []int{1}, DstStrides: []int{1}})
	o.step, err = d.prepare(ks...)
	return o, err
}

func (o *devRGD[T]) prepare(lr float64, h []float64) error {
	if err := checkLR(lr); err != nil {
		return err
	}
	h[0] = lr
	return nil
}
func (o *devRGD[T]) abort()     {}
func (o *devRGD[T]) run() error { return o.f.around(o.step) }
func (o *devRGD[T]) commit()    { o.started = o.started || o.host.cfg.Momentum > 0 }

func (o *devRGD[T]) state() (State, error) {
	var err error
	o.host.mom, err = download[T](o.d.s.be, o.mom, o.f.n*o.f.p, o.started)
	return o.host.State(), err
}

func (o *devRGD[T]) setState(st State) error {
	if err := o.host.SetState(st); err != nil {
		return err
	}
	o.started = o.host.mom != nil
	return upload(o.d.s.be, o.mom, o.host.mom)
}
