package device

import (
	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// rgdStepper builds RGD's device stepper (optim.RGDConfig, the rule in
// optim/rgd.go): the QR retraction of the step along the tangent part of
// the gradient, with heavy-ball momentum carried by tangent projection,
// from the kernels backend.Gemm, Symmetrize, Copy, AddScaled and QF.
func rgdStepper(w *work, c optim.RGDConfig) (optim.Stepper, error) {
	f, err := newFrame(w)
	if err != nil {
		return nil, err
	}
	o, err := newMomentum(w, c.Momentum)
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
	if err != nil {
		return nil, err
	}
	o.step = f.around(step)
	return o, nil
}
