package program

import (
	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// factorGrads, the factoring phase, leaves the gradients that
// Config.Groups asks for (groupsFactor) as their
// factors (see factor): the kernels that formed and checked such a gradient
// give way to one check of its factors.
func (c *compiler) factorGrads() {
	if c.factorR = groupsFactor(c.cfg.Groups, c.cfg.Backend); c.factorR <= 0 {
		return
	}
	var kept []backend.Kernel
	from := 0 // the first kernel not yet kept or dropped
	for _, g := range c.needed {
		span, ok := c.gradKernels[g]
		if !ok {
			continue
		}
		check, ok := c.factor(c.grads[g][0], g)
		if !ok {
			continue
		}
		kept = append(append(kept, c.kernels[from:span[0]]...), check)
		from = span[1]
		delete(c.vals, g) // no buffer holds the gradient
	}
	if kept != nil {
		c.kernels = append(kept, c.kernels[from:]...)
	}
}

// factor reports whether the gradient g of parameter i stays factored:
// Config.Groups asks for it, g is a product A^T B that nothing else
// uses, and an RSDM step costs less from the factors (see Config.Groups).
// It then keeps the factors' buffers to the end of the run and returns the
// kernel that checks them.
func (c *compiler) factor(i int, g *G.Node) (backend.Kernel, bool) {
	pv := &c.pvals[i]
	r := c.factorR
	if r <= 0 || pv.Manifold == nil || c.users[g] > 0 {
		return nil, false
	}
	a, b, ok := c.thinProduct(g)
	if !ok {
		return nil, false
	}
	if n, p := a.shape[1], b.shape[1]; r*(p+r) >= n*p {
		return nil, false
	}
	a.vb.persistent, b.vb.persistent = true, true
	pv.fa, pv.fb = a, b
	return backend.CheckProduct{RA: a.shape[0], CA: a.shape[1], CB: b.shape[1], A: a.operand(), B: b.operand(), Flag: backend.At(c.flags, 2*i)}, true
}

// groupsFactor returns the submanifold size r that groups' constrained rules ask
// their gradients factored for (optim.FactoredRule), where every
// constrained rule asks for the same r and be's buffers live on the host
// (a device's RSDM takes whole gradients); else 0.
func groupsFactor(groups []optim.Group, be backend.Backend) int {
	r := 0
	for _, g := range groups {
		if g.Rule == nil || !g.Rule.Constrained() {
			continue
		}
		f, ok := g.Rule.(optim.FactoredRule)
		if !ok {
			return 0
		}
		k, ok := f.FactorsGradients()
		if !ok || (r != 0 && r != k) {
			return 0
		}
		r = k
	}
	if r == 0 || !onHost(be) {
		return 0
	}
	return r
}

// onHost reports whether be's buffers live on the host.
func onHost(be backend.Backend) bool {
	b, err := be.Alloc(backend.Float32, 1)
	if err != nil {
		return false
	}
	_, ok := b.(backend.HostBuffer)
	_ = be.Free(b)
	return ok
}
