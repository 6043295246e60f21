package program

import (
	"slices"

	"github.com/orthonet/orthonet/backend"
)

// chainElementwise, a phase after the lowering, fuses runs of elementwise
// kernels (Map, Zip and the Chains it makes) into backend.Chains: where a
// kernel's whole result is a temporary that one later elementwise kernel
// of the same size reads and nothing else touches, the later kernel
// becomes one Chain of both, so the value never goes through memory and a
// small tensor's run of ops costs one dispatch (a recurrent cell's gates,
// an activation's gradient). A Chain rounds every step as its kernel did,
// so the program's results do not change by a bit. The fused kernel runs
// where the later one did: the earlier one's inputs must not be touched by
// any kernel between them.
//
// It chains on device backends (onDevice), where a launch costs
// microseconds, and not on the host: there a kernel's dispatch costs tens of nanoseconds, and
// programs with chains measured no faster (docs/results.md).
func (c *compiler) chainElementwise() {
	if c.cfg.unfused || c.cfg.unchained || !c.cfg.chainOnHost && !onDevice(c.cfg.Backend) {
		return
	}
	c.keepResident()
	users := map[*vbuf][]int{} // the kernels that have an operand in each buffer, in order
	for k, kern := range c.kernels {
		for _, op := range backend.Operands(kern) {
			if vb, ok := op.Buf.(*vbuf); ok {
				if u := users[vb]; len(u) == 0 || u[len(u)-1] != k {
					users[vb] = append(u, k)
				}
			}
		}
	}
	for j, kern := range c.kernels {
		ch, ok := asChain(kern)
		if !ok {
			continue
		}
		for changed := true; changed; {
			changed = false
			for r, op := range ch.Inputs() {
				p, ok := c.chainable(ch, r, op, j, users)
				if !ok {
					continue
				}
				merged, ok := joinChains(p.chain, ch, r)
				if !ok || merged.Check() != nil {
					continue
				}
				c.kernels[p.at], c.kernels[j] = nil, merged
				retarget(users, p.chain, p.at, j)
				delete(users, op.Buf.(*vbuf))
				ch, changed = merged, true
				break
			}
		}
	}
	c.dropKernels()
}

// onDevice reports whether be runs its kernels on a device, whose buffers
// have device addresses (the CUDA backend), without allocating anything
// (Compile allocates nothing before its memory check).
func onDevice(be backend.Backend) bool {
	_, ok := be.(interface {
		Addr(backend.Operand) (uint64, error)
	})
	return ok
}

// keepResident marks the buffers that outlive a run: the outputs and the
// parameters' gradients (but factored ones'). chainElementwise leaves them
// unchained, and planMemory gives each a slot of its own.
func (c *compiler) keepResident() {
	for _, n := range c.cfg.Outputs {
		c.vals[n].vb.persistent = true
	}
	for i := range c.pvals {
		pv := &c.pvals[i]
		if !c.cfg.NoGrad && pv.fa == nil {
			c.vals[pv.Node.Deriv()].vb.persistent = true
		}
	}
}

// producer is an elementwise kernel, as a Chain, and its index.
type producer struct {
	chain backend.Chain
	at    int
}

// chainable returns the kernel that computes input r (op) of chain ch, the
// kernel at j, when that kernel can be fused into ch: op is the whole of a
// temporary of ch's size, which only that elementwise kernel writes and
// only ch reads, and no kernel between them touches that kernel's inputs.
func (c *compiler) chainable(ch backend.Chain, r int, op backend.Operand, j int, users map[*vbuf][]int) (producer, bool) {
	vb, ok := op.Buf.(*vbuf)
	if !ok || ch.Scalar&(1<<r) != 0 || op.Off != 0 || vb.n != ch.N || vb.persistent || vb.init != nil {
		return producer{}, false
	}
	for i, in := range ch.Inputs() { // every read of the temporary is of its whole
		if in.Buf == op.Buf && (in.Off != 0 || ch.Scalar&(1<<i) != 0 && ch.N > 1) {
			return producer{}, false
		}
	}
	u := users[vb]
	if len(u) != 2 || u[1] != j {
		return producer{}, false
	}
	pc, ok := asChain(c.kernels[u[0]])
	if !ok || pc.N != ch.N || pc.Dst.Buf != op.Buf || pc.Dst.Off != 0 {
		return producer{}, false
	}
	for _, in := range pc.Inputs() {
		ib, ok := in.Buf.(*vbuf)
		if !ok {
			continue
		}
		for _, k := range users[ib] {
			if k > u[0] && k < j {
				return producer{}, false
			}
		}
	}
	return producer{chain: pc, at: u[0]}, true
}

// asChain returns an elementwise kernel of floats (Map, Zip, Chain) as a
// Chain.
func asChain(k backend.Kernel) (backend.Chain, bool) {
	var ch backend.Chain
	switch k := k.(type) {
	case backend.Chain:
		return k, true
	case backend.Map:
		ch = backend.Chain{N: k.N, In0: k.Src, Dst: k.Dst}
		ch.Steps.Len, ch.Steps.At[0] = 1, backend.ChainStep{Unary: k.Op, A: 0}
	case backend.Zip:
		ch = backend.Chain{N: k.N, In0: k.A, In1: k.B, Dst: k.Dst}
		ch.Steps.Len, ch.Steps.At[0] = 1, backend.ChainStep{Binary: k.Op, A: 0, B: 1}
		if k.AScalar {
			ch.Scalar |= 1
		}
		if k.BScalar {
			ch.Scalar |= 2
		}
	default:
		return ch, false
	}
	if dt := backend.DTypeOf(ch.Dst); dt != backend.Float32 && dt != backend.Float64 {
		return ch, false
	}
	return ch, true
}

// joinChains returns the chain that computes p's steps and then q's, q's
// input r being p's result: p's inputs and q's others, each once.
func joinChains(p, q backend.Chain, r int) (backend.Chain, bool) {
	out := backend.Chain{N: q.N, Dst: q.Dst}
	var ins [backend.MaxChainInputs]backend.Operand
	n := 0
	// input returns the register of operand op (scalar or not) in out,
	// adding it; false when out's inputs are full.
	input := func(op backend.Operand, scalar bool) (uint8, bool) {
		for i := range n {
			if ins[i] == op && (out.Scalar&(1<<i) != 0) == scalar {
				return uint8(i), true
			}
		}
		if n == backend.MaxChainInputs {
			return 0, false
		}
		ins[n] = op
		if scalar {
			out.Scalar |= 1 << n
		}
		n++
		return uint8(n - 1), true
	}
	if p.Steps.Len+q.Steps.Len > backend.MaxChainSteps {
		return out, false
	}
	pm, ok := remap(p, input, nil, 0)
	if !ok {
		return out, false
	}
	last := uint8(backend.MaxChainInputs + p.Steps.Len - 1) // p's result
	fixed := map[int]uint8{}
	for i, op := range q.Inputs() {
		if op == q.Inputs()[r] {
			fixed[i] = last
		}
	}
	qm, ok := remap(q, input, fixed, p.Steps.Len)
	if !ok {
		return out, false
	}
	for s := range p.Steps.Len {
		out.Steps.At[s] = mapStep(p.Steps.At[s], pm)
	}
	for s := range q.Steps.Len {
		out.Steps.At[p.Steps.Len+s] = mapStep(q.Steps.At[s], qm)
	}
	out.Steps.Len = p.Steps.Len + q.Steps.Len
	return out.SetInputs(ins), true
}

// remap returns the registers of chain k's in a joined chain: its inputs
// through input (or fixed), its steps' results shifted by shift steps.
func remap(k backend.Chain, input func(backend.Operand, bool) (uint8, bool), fixed map[int]uint8, shift int) ([backend.MaxChainInputs + backend.MaxChainSteps]uint8, bool) {
	var m [backend.MaxChainInputs + backend.MaxChainSteps]uint8
	for r, op := range k.Inputs() {
		if reg, ok := fixed[r]; ok {
			m[r] = reg
			continue
		}
		if op.Buf == nil {
			continue
		}
		reg, ok := input(op, k.Scalar&(1<<r) != 0)
		if !ok {
			return m, false
		}
		m[r] = reg
	}
	for s := range backend.MaxChainSteps {
		m[backend.MaxChainInputs+s] = uint8(backend.MaxChainInputs + shift + s)
	}
	return m, true
}

// mapStep returns step s with its registers mapped by m.
func mapStep(s backend.ChainStep, m [backend.MaxChainInputs + backend.MaxChainSteps]uint8) backend.ChainStep {
	s.A = m[s.A]
	if s.Binary != 0 {
		s.B = m[s.B]
	}
	return s
}

// retarget records that the kernel at from, p, now runs inside the kernel
// at to: every buffer p had an operand in is used at to instead.
func retarget(users map[*vbuf][]int, p backend.Chain, from, to int) {
	ins := p.Inputs()
	for _, op := range append(ins[:], p.Dst) {
		vb, ok := op.Buf.(*vbuf)
		if !ok {
			continue
		}
		u := users[vb][:0]
		seen := false
		for _, k := range users[vb] {
			if k == from {
				k = to
			}
			if k == to {
				if seen {
					continue
				}
				seen = true
			}
			u = append(u, k)
		}
		slices.Sort(u)
		users[vb] = u
	}
}
