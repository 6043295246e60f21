package device

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// describedStepper builds the device stepper of a rule that writes its
// step once in optim.StepBlocks (optim.Described, as optim.RGDConfig
// does): the same description the host's stepper runs, recorded as
// kernels (blocks, below). A rule's states move between host and device
// under the names its description gives its state buffers.
func describedStepper(w *work, d optim.Described) (optim.Stepper, error) {
	f, err := newFrame(w)
	if err != nil {
		return nil, err
	}
	host, err := w.hostStepper()
	if err != nil {
		return nil, err
	}
	if host.State().Kind != d.String() { // a rule that wraps another's stepper, refused by name
		return nil, errNotOnDevice(fmt.Sprintf("the %v rule", d), ruleNames(true))
	}
	o := &buffered{work: w, kind: d.String()}
	b := &blocks{w: w, o: o, n: f.n, p: f.p, refs: []backend.Operand{f.x, f.g}}
	if err := d.Describe(b); err != nil {
		return nil, fmt.Errorf("%v: %w", d, err)
	}
	if b.err != nil {
		return nil, fmt.Errorf("%v: %w", d, b.err)
	}
	step, err := w.prepare(b.ks...)
	if err != nil {
		return nil, err
	}
	o.step = f.around(step)
	return o, nil
}

// blocks records a description as kernels on a Stiefel weight's n x p
// frame: Proj by Gemm and Symmetrize, AddScaled by backend.AddScaled (its
// scale the step size where the coefficient takes it), Retract by
// AddScaled and the Q factor QF, Move by Copy.
type blocks struct {
	w    *work
	o    *buffered
	n, p int
	refs []backend.Operand // of each optim.Ref
	pp   backend.Operand   // Proj's p x p workspace
	ks   []backend.Kernel
	err  error
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
