package program

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// compiler holds the state of one Compile.
type compiler struct {
	cfg     Config
	g       *G.ExprGraph
	vals    map[*G.Node]*val
	kernels []backend.Kernel
	vbufs   []*vbuf
	inputs  map[*G.Node]bool
	params  map[*G.Node]int
	grads   map[*G.Node][]int // gradient node -> parameters it is the gradient of
	flags   *vbuf
	correct *vbuf // Config.Accuracy's count
	pvals   []paramVal
	// users counts, for every needed node, the needed nodes that take it
	// as an argument.
	users map[*G.Node]int
	state compileState // the step of the random draws, batch norm's statistics
	// rewrites are the fused lowerings of nodes whose arguments they
	// replace (see fuse).
	rewrites map[*G.Node]rewrite
}

// Compile compiles the part of g that computes cfg.Outputs and, unless
// cfg.NoGrad, the gradients of cfg.Params.
func Compile(g *G.ExprGraph, cfg Config) (*Program, error) {
	if cfg.Backend == nil {
		return nil, errors.New("program: Config.Backend is nil")
	}
	if cfg.Share != nil && cfg.Share.be != cfg.Backend {
		return nil, errors.New("program: Config.Share is a program on another backend")
	}
	c := &compiler{cfg: cfg, g: g, vals: map[*G.Node]*val{}, inputs: map[*G.Node]bool{},
		params: map[*G.Node]int{}, grads: map[*G.Node][]int{}}
	for _, n := range cfg.Inputs {
		if n == nil || n.Op() != nil {
			return nil, fmt.Errorf("program: input %v is not a leaf node", n)
		}
		c.inputs[n] = true
	}
	for _, d := range cfg.Dropout {
		switch {
		case d.Node == nil || d.Node.Op() != nil:
			return nil, fmt.Errorf("program: dropout mask %v is not a leaf node", d.Node)
		case c.inputs[d.Node]:
			return nil, fmt.Errorf("program: %q is listed both as an input and as a dropout mask", d.Node.Name())
		case !(d.P >= 0 && d.P < 1):
			return nil, fmt.Errorf("program: dropout mask %q has probability %v, want [0, 1)", d.Node.Name(), d.P)
		}
		c.inputs[d.Node] = true // a resident buffer, written by its kernel
	}
	var targets []*G.Node
	for i, p := range cfg.Params {
		n := p.Node
		_, dup := c.params[n]
		switch {
		case n == nil:
			return nil, fmt.Errorf("program: parameter %d has no node", i)
		case n.Op() != nil:
			return nil, fmt.Errorf("program: parameter %q is not a leaf node", n.Name())
		case !isFloat(n.Dtype()):
			return nil, fmt.Errorf("program: parameter %q holds %v: parameters are float32 or float64", n.Name(), n.Dtype())
		case dup:
			return nil, fmt.Errorf("program: parameter %q is listed twice", n.Name())
		case c.inputs[n]:
			return nil, fmt.Errorf("program: %q is listed both as a parameter and as an input", n.Name())
		}
		c.params[n] = i
		c.pvals = append(c.pvals, paramVal{Param: Param{Node: n, Manifold: p.Manifold}})
		targets = append(targets, n)
		if cfg.NoGrad {
			continue
		}
		d := n.Deriv()
		if d == nil {
			return nil, fmt.Errorf("program: parameter %q has no gradient node: call gorgonia.Grad(cost, params...) before Compile, or set NoGrad", n.Name())
		}
		c.grads[d] = append(c.grads[d], i)
		targets = append(targets, d)
	}
	for _, n := range cfg.Outputs {
		if n == nil {
			return nil, errors.New("program: an output is nil")
		}
		targets = append(targets, n)
	}
	if len(targets) == 0 {
		return nil, errors.New("program: nothing to compute: no outputs and no parameters")
	}
	order, err := c.order(targets)
	if err != nil {
		return nil, err
	}
	if !cfg.unfused && c.fuse(order, targets) { // order again, without the fused patterns' inner nodes
		if order, err = c.order(targets); err != nil {
			return nil, err
		}
	}
	if !cfg.NoGrad && len(c.pvals) > 0 {
		c.flags = c.newBuf(backend.Int32, 2*len(c.pvals), true, "finite flags")
		c.emit(backend.Fill{N: 2 * len(c.pvals), Dst: backend.At(c.flags, 0)})
	}
	c.users = map[*G.Node]int{}
	for _, n := range order {
		for _, ch := range c.children(n) {
			c.users[ch]++
		}
	}
	for _, n := range cfg.Outputs {
		c.users[n]++
	}
	for _, n := range order {
		if ps := c.grads[n]; len(ps) == 1 && c.factor(ps[0], n) {
			continue
		}
		if err := c.node(n); err != nil {
			return nil, err
		}
		for _, i := range c.grads[n] {
			c.checkGrad(i, n)
		}
	}
	if err := c.countCorrect(); err != nil {
		return nil, err
	}
	reads, inputs := map[*G.Node]*val{}, map[*G.Node]*val{}
	for n := range c.inputs {
		if v, ok := c.vals[n]; ok { // an input the outputs need
			inputs[n], reads[n] = v, v
		}
	}
	// The dropout masks the outputs need are drawn first in every Run.
	var masks []backend.Kernel
	for i, d := range cfg.Dropout {
		v, ok := inputs[d.Node]
		if !ok {
			continue // a mask the outputs do not need
		}
		delete(inputs, d.Node) // SetInput does not set it
		masks = append(masks, backend.DropoutMask{N: v.size, P: d.P, Seed: cfg.DropoutSeed, Stream: uint64(i),
			Step: c.stepOperand(), Dst: v.operand()})
	}
	c.kernels = append(masks, c.kernels...)
	for _, n := range cfg.Outputs {
		reads[n] = c.vals[n]
		c.vals[n].vb.persistent = true
	}
	for i := range c.pvals {
		pv := &c.pvals[i]
		pv.v = c.vals[pv.Node]
		reads[pv.Node] = pv.v
		if !cfg.NoGrad && pv.fa == nil {
			pv.g = c.vals[pv.Node.Deriv()]
			pv.g.vb.persistent = true
		}
	}
	p := &Program{be: cfg.Backend, inputs: inputs, reads: reads}
	if err := c.plan(p); err != nil {
		_ = p.Close()
		return nil, err
	}
	c.finishState(p)
	for i := range c.pvals {
		pv := &c.pvals[i]
		pv.Value = backend.At(pv.v.vb.phys, pv.v.vb.physOff+pv.v.off)
		pv.Size = pv.v.size
		if pv.g != nil {
			pv.Grad = backend.At(pv.g.vb.phys, pv.g.vb.physOff+pv.g.off)
		}
		if pv.fa != nil {
			pv.GradA = backend.At(pv.fa.vb.phys, pv.fa.vb.physOff+pv.fa.off)
			pv.GradB = backend.At(pv.fb.vb.phys, pv.fb.vb.physOff+pv.fb.off)
			pv.GradK = pv.fa.shape[0]
		}
	}
	p.params = c.pvals
	if c.flags != nil {
		p.flags = c.flags.phys
		p.flagsHost = make([]int32, c.flags.n)
		p.flagsAny = p.flagsHost
	}
	if c.correct != nil {
		p.correct, p.correctHost = c.correct.phys, make([]int32, 1)
		p.correctAny = p.correctHost
	}
	return p, nil
}

// order returns the nodes the targets depend on, children before parents.
func (c *compiler) order(targets []*G.Node) ([]*G.Node, error) {
	const active, done = 1, 2 // a node's state; 0 is unseen
	state := map[*G.Node]int{}
	var out []*G.Node
	var visit func(n *G.Node) error
	visit = func(n *G.Node) error {
		switch state[n] {
		case active:
			return fmt.Errorf("program: the graph has a cycle through node %q", n.Name())
		case done:
			return nil
		}
		state[n] = active
		for _, ch := range c.children(n) {
			if err := visit(ch); err != nil {
				return err
			}
		}
		state[n] = done
		out = append(out, n)
		return nil
	}
	for _, t := range targets {
		if t.Graph() != c.g {
			return nil, fmt.Errorf("program: node %q belongs to another graph", t.Name())
		}
		if err := visit(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// children returns n's arguments in order: those of its rewrite, if it
// has one.
func (c *compiler) children(n *G.Node) []*G.Node {
	if rw, ok := c.rewrites[n]; ok {
		return rw.inputs
	}
	it := c.g.From(n.ID())
	var out []*G.Node
	for it.Next() {
		out = append(out, it.Node().(*G.Node))
	}
	return out
}

// newBuf registers a virtual buffer.
func (c *compiler) newBuf(dt backend.DType, n int, persistent bool, name string) *vbuf {
	b := &vbuf{dt: dt, n: max(n, 1), persistent: persistent, def: -1, last: -1, name: name}
	c.vbufs = append(c.vbufs, b)
	return b
}

// emit appends a kernel to the program.
func (c *compiler) emit(k backend.Kernel) { c.kernels = append(c.kernels, k) }

// newVal gives n a fresh buffer of its shape and type: a temporary, or
// resident (persistent) to the end of the run.
func (c *compiler) newVal(n *G.Node, persistent bool) (*val, error) {
	dt, ok := dtypeOf(n.Dtype())
	if !ok {
		return nil, fmt.Errorf("program: node %q holds %v: only float32, float64, integers and booleans are supported", n.Name(), n.Dtype())
	}
	v := &val{shape: n.Shape(), size: n.DataSize()} // Shape is a copy
	v.vb = c.newBuf(dt, v.size, persistent, n.Name())
	c.vals[n] = v
	return v, nil
}

// view makes n's value a window of base's buffer at element offset off.
func (c *compiler) view(n *G.Node, base *val, off int) {
	c.vals[n] = &val{shape: n.Shape(), size: n.DataSize(), vb: base.vb, off: base.off + off}
}

var dtypes = map[tensor.Dtype]backend.DType{tensor.Float32: backend.Float32, tensor.Float64: backend.Float64}

// node lowers one node: a leaf becomes a resident buffer, an op its kernels.
func (c *compiler) node(n *G.Node) error {
	if n.Op() == nil {
		return c.leaf(n)
	}
	ch := c.children(n)
	in := make([]*val, len(ch))
	for i, x := range ch {
		in[i] = c.vals[x]
	}
	if err := c.lower(n, in); err != nil {
		if errors.Is(err, ErrUnknownOp) {
			return err
		}
		return fmt.Errorf("program: node %q (op %v, %T): %w", n.Name(), n.Op(), n.Op(), err)
	}
	if c.vals[n] == nil {
		return fmt.Errorf("program: node %q (op %v): lowering produced no value", n.Name(), n.Op())
	}
	return nil
}

func (c *compiler) leaf(n *G.Node) error {
	_, isParam := c.params[n]
	if !isParam && !c.inputs[n] {
		if err := c.constant(n); err != nil {
			return fmt.Errorf("%w (a leaf that is neither a parameter nor an input is a constant)", err)
		}
		return nil
	}
	if isParam && c.cfg.Share == nil {
		return c.constant(n) // its value at Compile, in a buffer of its own
	}
	v, err := c.newVal(n, true)
	if err != nil {
		return err
	}
	if !isParam {
		v.vb.init, _ = hostData(n) // an input's value at Compile (if it has one), until SetInput
		return nil
	}
	// A parameter of the shared program.
	share := c.cfg.Share.params
	j := slices.IndexFunc(share, func(pv paramVal) bool { return pv.Node.Name() == n.Name() })
	if j < 0 {
		return fmt.Errorf("program: parameter %q is not a parameter of the shared program", n.Name())
	}
	other := share[j].v
	if other.vb.dt != v.vb.dt || other.size != v.size {
		return fmt.Errorf("program: parameter %q has %d values of %v, the shared program's %d of %v", n.Name(), v.size, v.vb.dt, other.size, other.vb.dt)
	}
	v.vb.phys, v.vb.physOff = other.vb.phys, other.vb.physOff+other.off
	return nil
}

// hostData returns a copy of a leaf's value as a host slice.
func hostData(n *G.Node) (any, error) {
	val := n.Value()
	if val == nil {
		return nil, fmt.Errorf("program: leaf %q has no value", n.Name())
	}
	switch d := val.Data().(type) {
	case []float32:
		return append([]float32(nil), d...), nil
	case []float64:
		return append([]float64(nil), d...), nil
	case float32:
		return []float32{d}, nil
	case float64:
		return []float64{d}, nil
	}
	if !isFloat(n.Dtype()) {
		return intData(n.Name(), val.Data())
	}
	return nil, fmt.Errorf("program: leaf %q holds %T, want float32 or float64 values", n.Name(), val.Data())
}

// factor leaves the gradient g of parameter i as its factors when
// Config.FactorForRSDM asks for it, g is a product A^T B that nothing else
// uses, and an RSDM step costs less from the factors (see FactorForRSDM):
// the factors' buffers are kept to the end of the run.
func (c *compiler) factor(i int, g *G.Node) bool {
	pv := &c.pvals[i]
	r := c.cfg.FactorForRSDM
	if r <= 0 || pv.Manifold == nil || c.users[g] > 0 {
		return false
	}
	a, b, ok := c.thinProduct(g)
	if !ok {
		return false
	}
	if n, p := a.shape[1], b.shape[1]; r*(p+r) >= n*p {
		return false
	}
	a.vb.persistent, b.vb.persistent = true, true
	pv.fa, pv.fb = a, b
	c.emit(backend.CheckProduct{RA: a.shape[0], CA: a.shape[1], CB: b.shape[1], A: a.operand(), B: b.operand(), Flag: backend.At(c.flags, 2*i)})
	return true
}

// checkGrad adds the kernels that flag a non-finite gradient of parameter
// i, whose gradient node g has just been lowered. A gradient that is the
// product A^T B of two thin matrices (a linear layer's batch) is checked
// through its factors, at a fraction of the cost of scanning it.
func (c *compiler) checkGrad(i int, g *G.Node) {
	v := c.vals[g]
	if a, b, ok := c.thinProduct(g); ok && a.shape[0]*(a.shape[1]+b.shape[1]) < v.size {
		c.emit(backend.CheckProduct{RA: a.shape[0], CA: a.shape[1], CB: b.shape[1], A: a.operand(), B: b.operand(), Flag: backend.At(c.flags, 2*i)})
		return
	}
	c.emit(backend.CheckFinite{N: v.size, Src: v.operand(), Flag: backend.At(c.flags, 2*i+1)})
}

// plan maps every virtual buffer onto a physical one, prepares the
// kernels and copies the constants in.
func (c *compiler) plan(p *Program) error {
	for k, kern := range c.kernels {
		for _, op := range backend.Operands(kern) {
			vb, ok := op.Buf.(*vbuf)
			if !ok {
				continue
			}
			if vb.def < 0 {
				vb.def = k
			}
			vb.last = k
		}
	}
	// Linear scan: a temporary takes the smallest free physical buffer of
	// its type that is large enough, else a new one; buffers are sized to
	// their largest tenant and allocated at the end. A resident buffer has
	// a slot of its own, never free.
	type slot struct {
		dt      backend.DType
		n       int
		freeAt  int // kernel index after which the slot is free
		tenants []*vbuf
	}
	var slots []*slot
	var temps []*vbuf
	for _, vb := range c.vbufs {
		switch {
		case vb.phys != nil: // shared
		case vb.persistent:
			slots = append(slots, &slot{dt: vb.dt, n: vb.n, freeAt: math.MaxInt, tenants: []*vbuf{vb}})
		case vb.def >= 0:
			temps = append(temps, vb)
		}
	}
	sort.SliceStable(temps, func(i, j int) bool { return temps[i].def < temps[j].def })
	for _, vb := range temps {
		var best *slot
		for _, s := range slots {
			if s.dt == vb.dt && s.freeAt < vb.def && (best == nil || fit(s.n, vb.n) < fit(best.n, vb.n)) {
				best = s
			}
		}
		if best == nil {
			best = &slot{dt: vb.dt}
			slots = append(slots, best)
		}
		best.n = max(best.n, vb.n)
		best.freeAt = vb.last
		best.tenants = append(best.tenants, vb)
	}
	be := c.cfg.Backend
	for _, s := range slots {
		b, err := be.Alloc(s.dt, s.n)
		if err != nil {
			return fmt.Errorf("program: allocating %d values of %v: %w", s.n, s.dt, err)
		}
		p.owned = append(p.owned, b)
		for _, vb := range s.tenants {
			vb.phys = b
			if vb.init == nil {
				continue
			}
			if err := be.CopyIn(b, vb.physOff, vb.init); err != nil {
				return fmt.Errorf("program: copying %q in: %w", vb.name, err)
			}
		}
	}
	for _, k := range c.kernels {
		// The kernel on the physical buffers of its virtual ones.
		k = backend.MapOperands(k, func(op backend.Operand) backend.Operand {
			if vb, ok := op.Buf.(*vbuf); ok {
				return backend.Operand{Buf: vb.phys, Off: vb.physOff + op.Off}
			}
			return op
		})
		f, err := be.Prepare(k)
		if err != nil {
			return fmt.Errorf("program: preparing %s: %w", backend.Name(k), err)
		}
		p.funcs = append(p.funcs, f)
		p.kernels = append(p.kernels, k)
	}
	if c.cfg.Profile {
		p.profile = make([]time.Duration, len(c.kernels))
	}
	return nil
}

// fit scores how well a slot of n elements holds a tenant of m: a slot
// that needs no growth and wastes least comes first.
func fit(n, m int) int {
	if n >= m {
		return n - m
	}
	return 1<<40 + m - n
}

// describe names a kernel and its sizes (every field but the operands),
// for profiles.
func describe(k backend.Kernel) string {
	v := reflect.ValueOf(k)
	var b strings.Builder
	b.WriteString(backend.Name(k))
	for i := range v.NumField() {
		if f := v.Field(i); f.Type() != reflect.TypeFor[backend.Operand]() {
			fmt.Fprintf(&b, " %s=%v", v.Type().Field(i).Name, f.Interface())
		}
	}
	return b.String()
}
