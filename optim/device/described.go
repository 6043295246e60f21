package device

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// describedStepper builds the device stepper of a rule that writes its
// step once in optim.StepBlocks (optim.Described: RSDM, RGD, SGD, Adam,
// AdamW):
// the same description the host's stepper runs, recorded as kernels
// (blocks, below), on a constrained weight's frame or an unconstrained
// parameter's elements. A rule's states move between host and device
// under the names its description gives its state buffers and counter.
func describedStepper(w *work, d optim.Described) (optim.Stepper, error) {
	f := frame{x: w.value, g: w.grad, n: size(w.shape), p: 1, in: backend.Sequence(nil), out: backend.Sequence(nil)}
	if d.Constrained() {
		var err error
		if f, err = newFrame(w); err != nil {
			return nil, err
		}
	}
	// describedKind binds d on the host first, which refuses a description
	// whose blocks are out of order (a Decay not followed by SGD or Adam,
	// Adam before a counter, a second move, Submanifold beside other
	// blocks): what blocks records is a description the host accepted.
	kind, err := w.describedKind(d)
	if err != nil {
		return nil, err
	}
	o := &buffered{work: w, kind: kind}
	b := &blocks{w: w, o: o, f: f, n: f.n, p: f.p, constrained: d.Constrained(), refs: []backend.Operand{f.x, f.g}}
	if err := d.Describe(b); err != nil {
		return nil, fmt.Errorf("%v: %w", d, err)
	}
	if b.err != nil {
		return nil, fmt.Errorf("%v: %w", d, b.err)
	}
	if b.sub != nil {
		return b.sub, nil
	}
	step, err := w.prepare(b.ks...)
	if err != nil {
		return nil, err
	}
	o.step = f.around(step)
	return o, nil
}

// describedKind returns the Kind of the States of d's host stepper, which
// builds from d's description: a rule that wraps another's stepper (one
// of one's own that embeds a Described rule) is refused by name.
func (w *work) describedKind(d optim.Described) (string, error) {
	host, err := w.hostStepper()
	if err != nil {
		return "", err
	}
	ref, err := optim.BindDescribed(w.hostParam(), w.b, d)
	if err != nil {
		return "", err
	}
	if kind := ref.State().Kind; host.State().Kind == kind {
		return kind, nil
	}
	return "", errNotOnDevice(fmt.Sprintf("the %v rule", d), ruleNames(d.Constrained()))
}

// blocks records a description as kernels on a Stiefel weight's n x p
// frame: Proj by Gemm and Symmetrize, AddScaled by backend.AddScaled (its
// scale the step size where the coefficient takes it), Retract by
// AddScaled and the Q factor QF, Move by Copy; Submanifold by a stepper
// of its own (submanifold.go), which the description's stepper is.
type blocks struct {
	w           *work
	o           *buffered
	f           frame
	sub         optim.Stepper // Submanifold's stepper
	n, p        int
	constrained bool
	refs        []backend.Operand // of each optim.Ref
	pp          backend.Operand   // Proj's p x p workspace
	ks          []backend.Kernel
	err         error
	// decay is Decay's rate, which the next SGD or Adam kernel takes
	// (decayed).
	decay   float64
	decayed bool
}

var _ optim.StepBlocks = (*blocks)(nil)

func (b *blocks) Buffer(name string) optim.Ref {
	ops, err := b.w.alloc(b.w.dt, b.n*b.p)
	if err != nil {
		b.fail(err)
		ops = []backend.Operand{{}}
	}
	if name != "" {
		b.o.names, b.o.bufs = append(b.o.names, name), append(b.o.bufs, ops[0])
	}
	b.refs = append(b.refs, ops[0])
	return optim.Ref(len(b.refs) - 1)
}

func (b *blocks) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// ref returns the operand of r.
func (b *blocks) ref(r optim.Ref) backend.Operand {
	if r < 0 || int(r) >= len(b.refs) {
		b.fail(fmt.Errorf("a block names matrix %d, which StepBlocks did not give", r))
		return backend.Operand{}
	}
	return b.refs[r]
}

// Proj sets dst = v - x sym(x^T v), the tangent part of v at x.
func (b *blocks) Proj(dst, x, v optim.Ref) {
	n, p := b.n, b.p
	if b.pp.Buf == nil {
		ops, err := b.w.alloc(b.w.dt, p*p)
		if err != nil {
			b.fail(err)
			return
		}
		b.pp = ops[0]
	}
	d, xo, vo := b.ref(dst), b.ref(x), b.ref(v)
	b.ks = append(b.ks,
		backend.Gemm{TransA: true, M: p, N: p, K: n, Alpha: 1, A: xo, B: vo, C: b.pp, LDA: p, LDB: p, LDC: p},
		backend.Symmetrize{N: p, A: b.pp})
	if dst != v {
		b.ks = append(b.ks, b.copy(d, vo))
	}
	b.ks = append(b.ks, backend.Gemm{M: n, N: p, K: p, Alpha: -1, Beta: 1, A: xo, B: b.pp, C: d, LDA: p, LDB: p, LDC: p})
}

func (b *blocks) copy(dst, src backend.Operand) backend.Kernel {
	return backend.Copy{Shape: []int{b.n * b.p}, Src: src, Dst: dst, SrcStrides: []int{1}, DstStrides: []int{1}}
}

// addScaled returns the kernel dst = x + a y.
func (b *blocks) addScaled(dst, x backend.Operand, a optim.Coef, y backend.Operand) backend.Kernel {
	k := backend.AddScaled{N: b.n * b.p, Alpha: a.Value, X: x, Y: y, Dst: dst}
	if a.TimesLR {
		k.Scale = b.w.hyper
	}
	return k
}

func (b *blocks) AddScaled(dst, x optim.Ref, a optim.Coef, y optim.Ref) {
	b.ks = append(b.ks, b.addScaled(b.ref(dst), b.ref(x), a, b.ref(y)))
}

// Retract sets dst = qf(x + a v), the QR retraction.
func (b *blocks) Retract(dst, x optim.Ref, a optim.Coef, v optim.Ref) {
	d := b.ref(dst)
	b.ks = append(b.ks, b.addScaled(d, b.ref(x), a, b.ref(v)), backend.QF{M: b.n, N: b.p, A: d})
}

func (b *blocks) Move(src optim.Ref) { b.ks = append(b.ks, b.copy(b.refs[optim.X], b.ref(src))) }

// WeightDecay returns the group's decoupled weight decay (0 for a
// constrained weight, as on the host).
func (b *blocks) WeightDecay() float64 {
	if b.constrained {
		return 0
	}
	return b.w.b.WeightDecay
}

// Counter makes the stepper count its steps under name; its Prepare
// writes the step's count beside the step size (Adam's t).
func (b *blocks) Counter(name string) { b.o.counter = name }

// Decay keeps the rate for the kernel of the SGD or Adam block after it,
// which applies it first.
func (b *blocks) Decay(rate float64) { b.decay, b.decayed = rate, true }

// inPlace starts the kernel of an in-place move and returns the rate of
// the Decay before it.
func (b *blocks) inPlace() float64 {
	decay := 0.0
	if b.decayed {
		decay, b.decayed = b.decay, false
	}
	return decay
}

// SGD is the kernel backend.SGDStep, in place on the parameter.
func (b *blocks) SGD(mom optim.Ref, mu float64) {
	k := backend.SGDStep{N: b.n, Momentum: mu, Decay: b.inPlace(), W: b.refs[optim.X], G: b.refs[optim.G], LR: b.w.hyper}
	if mom != optim.None {
		k.Mom = b.ref(mom)
	}
	b.ks = append(b.ks, k)
}

// Adam is the kernel backend.AdamStep, in place on the parameter and its
// moments, at the step count the stepper's Prepare writes.
func (b *blocks) Adam(m, v optim.Ref, beta1, beta2, eps float64) {
	decay := b.inPlace()
	b.ks = append(b.ks, backend.AdamStep{N: b.n, Beta1: beta1, Beta2: beta2, Eps: eps, Decay: decay,
		W: b.refs[optim.X], G: b.refs[optim.G], M: b.ref(m), V: b.ref(v), Hyper: b.w.hyper})
}
