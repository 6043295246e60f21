package device

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// Submanifold records the block optim.StepBlocks.Submanifold (the step
// of a rule that describes it, RSDM's) as a stepper of its own
// (submanifoldStepper), which the description's stepper is.
func (b *blocks) Submanifold(c optim.RSDMConfig) {
	if b.err != nil {
		return
	}
	st, err := submanifoldStepper(b.w, b.f, c)
	if err != nil {
		b.fail(err)
		return
	}
	b.sub = st
}

// submanifoldStepper builds the device stepper of a Submanifold step with
// c's settings: the step of Algorithm 1 with a sampler of rows, one inner
// step and the QR inner retraction, its kernels backend.GatherRows, Gemm,
// SkewStep, QF, IdentityDelta and ScatterRows.
func submanifoldStepper(w *work, f frame, c optim.RSDMConfig) (optim.Stepper, error) {
	switch {
	case c.Sampling != nil && !c.Sampling.Rows():
		return nil, errNotOnDevice(fmt.Sprintf("RSDM with %v sampling", c.Sampling), "a sampler of rows")
	case c.InnerSteps > 1 || c.Momentum != 0:
		return nil, errNotOnDevice("RSDM with inner steps or momentum", "RSDM with one inner step")
	case c.Retraction != manifold.QR:
		return nil, errNotOnDevice(fmt.Sprintf("RSDM with the %v inner retraction", c.Retraction), "QR")
	}
	if w.dt == backend.Float32 {
		return newSubmanifoldStep[float32](w, f, c)
	}
	return newSubmanifoldStep[float64](w, f, c)
}

// submanifoldStep is the Submanifold step whose draws (and state) the
// host's RSDM of the same settings makes, through its hooks Draw, Undraw
// and Advance, so that the host and the device draw the same submanifolds
// for the same seed.
type submanifoldStep[T optim.Float] struct {
	*work
	host    *optim.RSDM[T]
	rows    backend.Operand
	rowsInt []int32
	step    backend.Func
	reorth  backend.Func
}

func newSubmanifoldStep[T optim.Float](w *work, f frame, c optim.RSDMConfig) (*submanifoldStep[T], error) {
	m, err := manifold.NewStiefel[T](f.n, f.p)
	if err != nil {
		return nil, err
	}
	// The host's RSDM of the same settings, seeded as optim's own stepper is;
	// Prepare gives it each step's step size.
	c.LR, c.Seed = 0, optim.WeightSeed(c.Seed, w.b.Index)
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
	o := &submanifoldStep[T]{work: w, host: host, rows: rows[0], rowsInt: make([]int32, r)}
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
func (o *submanifoldStep[T]) Prepare(_ optim.Gradient, lr float64) error {
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

func (o *submanifoldStep[T]) Abort() { o.host.Undraw() }

func (o *submanifoldStep[T]) Commit() error {
	reorth := o.reorth != nil && (o.host.Steps()+1)%o.host.ReorthEvery() == 0
	o.host.Advance()
	if reorth { // the step, then the Q factor of the weight
		return o.commit(o.reorth)
	}
	return o.commit(o.step)
}

func (o *submanifoldStep[T]) State() optim.State            { return o.host.State() }
func (o *submanifoldStep[T]) SetState(st optim.State) error { return o.host.SetState(st) }
