package program

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/program/lower"
)

// newLowering returns the lowering of a Compile of g with cfg: package
// lower, which lowers every op, and what it needs to know of cfg.
func newLowering(g *G.ExprGraph, cfg Config) *lower.Lowering {
	lc := lower.Config{Graph: g, EvalMode: cfg.EvalMode, DropoutSeed: cfg.DropoutSeed, Sharing: cfg.Share != nil}
	if cfg.Share != nil {
		for _, s := range cfg.Share.states {
			lc.SharedStates = append(lc.SharedStates, lower.SharedState{Name: s.name, Type: s.v.vb.dt, Size: s.v.size,
				At: backend.At(s.v.vb.phys, s.v.vb.physOff+s.v.off)})
		}
	}
	return lower.New(lc)
}

// lowerNodes, the lowering phase, emits the program's kernels against
// virtual buffers (package lower): the dropout masks the program draws,
// the reset of the gradients' finite flags, then every needed node in
// order (lowerNode: a leaf becomes a buffer, an op its kernels) with the
// check of each gradient, and Config.Accuracy's count. It then adopts what
// the lowering emitted for the phases after it.
func (c *compiler) lowerNodes() error {
	c.low.Users, c.low.Pinned = c.users, map[*G.Node]bool{}
	for n := range c.inputs {
		c.low.Pinned[n] = true
	}
	for n := range c.grads {
		c.low.Pinned[n] = true
	}
	if err := c.drawMasks(); err != nil {
		return err
	}
	if !c.cfg.NoGrad && len(c.pvals) > 0 {
		c.lowFlags = c.low.NewBuffer(backend.Int32, 2*len(c.pvals), true, "finite flags")
		c.low.Emit(backend.Fill{N: 2 * len(c.pvals), Dst: backend.At(c.lowFlags, 0)})
	}
	for _, n := range c.needed {
		if c.low.Values[n] != nil {
			continue // a dropout mask, lowered by drawMasks
		}
		start := len(c.low.Kernels)
		if err := c.lowerNode(n); err != nil {
			return err
		}
		for _, i := range c.grads[n] {
			c.checkGrad(i, n)
		}
		if len(c.grads[n]) == 1 {
			c.gradKernels[n] = [2]int{start, len(c.low.Kernels)}
		}
	}
	if err := c.countCorrect(); err != nil {
		return err
	}
	c.adopt()
	return nil
}

// drawMasks lowers the dropout masks the outputs need, each drawn at the
// start of every Run.
func (c *compiler) drawMasks() error {
	needed := map[*G.Node]bool{}
	for _, n := range c.needed {
		needed[n] = true
	}
	for i, d := range c.cfg.Dropout {
		if !needed[d.Node] {
			continue // a mask the outputs do not need
		}
		if err := c.lowerNode(d.Node); err != nil {
			return err
		}
		v := c.low.Values[d.Node]
		c.low.Emit(backend.DropoutMask{N: v.Size, P: d.P, Seed: c.cfg.DropoutSeed, Stream: uint64(i),
			Step: c.low.StepOperand(), Dst: v.Operand()})
	}
	return nil
}

// lowerNode lowers n: a leaf becomes a resident buffer (leaf), an op its
// kernels (lower.Lowering.Lower). A panic in a lowering, which is a bug
// (each checks what it reads), becomes an error that names the node, its
// op and its shape.
func (c *compiler) lowerNode(n *G.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("program: lowering node %q (op %v, shape %v): %v", n.Name(), n.Op(), n.Shape(), r)
		}
	}()
	if n.Op() == nil {
		return c.leaf(n)
	}
	return c.low.Lower(n, c.low.ArgValues(n))
}

// leaf gives a leaf its resident buffer: a constant's or (unless the
// program shares another's) a parameter's value at Compile, an input's, or
// the shared program's parameter of the same name.
func (c *compiler) leaf(n *G.Node) error {
	_, isParam := c.params[n]
	if !isParam && !c.inputs[n] {
		if err := c.low.Constant(n); err != nil {
			return fmt.Errorf("%w (a leaf that is neither a parameter nor an input is a constant)", err)
		}
		return nil
	}
	if isParam && c.cfg.Share == nil {
		return c.low.Constant(n) // its value at Compile, in a buffer of its own
	}
	v, err := c.low.NewValue(n, true)
	if err != nil {
		return err
	}
	if !isParam {
		v.Buf.Init, _ = lower.HostData(n) // an input's value at Compile (if it has one), until SetInput
		return nil
	}
	// A parameter of the shared program.
	share := c.cfg.Share.params
	j := slices.IndexFunc(share, func(pv paramVal) bool { return pv.Node.Name() == n.Name() })
	if j < 0 {
		return fmt.Errorf("program: parameter %q is not a parameter of the shared program", n.Name())
	}
	other := share[j].v
	if other.vb.dt != v.Buf.Type || other.size != v.Size {
		return fmt.Errorf("program: parameter %q has %d values of %v, the shared program's %d of %v", n.Name(), v.Size, v.Buf.Type, other.size, other.vb.dt)
	}
	v.Buf.Alias = backend.At(other.vb.phys, other.vb.physOff+other.off)
	return nil
}

// checkGrad adds the kernels that flag a non-finite gradient of parameter
// i, whose gradient node g has just been lowered. A gradient that is the
// product A^T B of two thin matrices (a linear layer's batch) is checked
// through its factors, at a fraction of the cost of scanning it.
func (c *compiler) checkGrad(i int, g *G.Node) {
	v := c.low.Values[g]
	if a, b, ok := c.low.ThinProduct(g); ok && a.Shape[0]*(a.Shape[1]+b.Shape[1]) < v.Size {
		c.low.Emit(backend.CheckProduct{RA: a.Shape[0], CA: a.Shape[1], CB: b.Shape[1], A: a.Operand(), B: b.Operand(), Flag: backend.At(c.lowFlags, 2*i)})
		return
	}
	c.low.Emit(backend.CheckFinite{N: v.Size, Src: v.Operand(), Flag: backend.At(c.lowFlags, 2*i+1)})
}

// adopt takes over what the lowering emitted for the phases after it:
// each lower.Buffer becomes a vbuf (which the planner maps onto a physical
// buffer), each lower.Value a val, and the kernels' operands the vbufs. A
// kernel that accumulate replaced stays nil until dropKernels.
func (c *compiler) adopt() {
	bufs := make(map[*lower.Buffer]*vbuf, len(c.low.Buffers))
	for _, b := range c.low.Buffers {
		vb := &vbuf{dt: b.Type, n: b.N, persistent: b.Resident, def: -1, last: -1, init: b.Init, name: b.Name,
			phys: b.Alias.Buf, physOff: b.Alias.Off}
		bufs[b] = vb
		c.vbufs = append(c.vbufs, vb)
	}
	valOf := map[*lower.Value]*val{}
	adopt := func(v *lower.Value) *val {
		if w, ok := valOf[v]; ok {
			return w
		}
		w := &val{shape: v.Shape, size: v.Size, vb: bufs[v.Buf], off: v.Off}
		valOf[v] = w
		return w
	}
	for n, v := range c.low.Values {
		c.vals[n] = adopt(v)
	}
	for _, s := range c.low.States {
		c.state.stats = append(c.state.stats, stateVal{name: s.Name, v: adopt(s.Value), op: s.Op, variance: s.Variance})
	}
	c.flags, c.correct, c.state.step = bufs[c.lowFlags], bufs[c.lowCorrect], bufs[c.low.Step]
	c.kernels = make([]backend.Kernel, len(c.low.Kernels))
	for i, k := range c.low.Kernels {
		if k == nil {
			continue
		}
		c.kernels[i] = backend.MapOperands(k, func(op backend.Operand) backend.Operand {
			if b, ok := op.Buf.(*lower.Buffer); ok {
				return backend.Operand{Buf: bufs[b], Off: op.Off}
			}
			return op
		})
	}
}

// thinProduct reports whether g is the matrix product A^T B, and returns
// A's and B's values (lower.Lowering.ThinProduct).
func (c *compiler) thinProduct(g *G.Node) (a, b *val, ok bool) {
	if _, _, ok := c.low.ThinProduct(g); !ok {
		return nil, nil, false
	}
	ch := c.low.Children(g)
	return c.vals[ch[0]], c.vals[ch[1]], true
}

// dropKernels removes the kernels that accumulate replaced (nil).
func (c *compiler) dropKernels() {
	kept := c.kernels[:0]
	for _, k := range c.kernels {
		if k != nil {
			kept = append(kept, k)
		}
	}
	c.kernels = kept
}
