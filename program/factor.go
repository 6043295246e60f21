package program

import (
	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
)

// factorGrads, the factoring phase, leaves the gradients that
// Config.FactorForRSDM asks for as their factors (see factor): the kernels
// that formed and checked such a gradient give way to one check of its
// factors.
func (c *compiler) factorGrads() {
	if c.cfg.FactorForRSDM <= 0 {
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
// Config.FactorForRSDM asks for it, g is a product A^T B that nothing else
// uses, and an RSDM step costs less from the factors (see FactorForRSDM).
// It then keeps the factors' buffers to the end of the run and returns the
// kernel that checks them.
func (c *compiler) factor(i int, g *G.Node) (backend.Kernel, bool) {
	pv := &c.pvals[i]
	r := c.cfg.FactorForRSDM
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
