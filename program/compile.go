package program

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
	"github.com/orthonet/orthonet/program/lower"
)

// compiler holds the state of one Compile, which its phases fill in turn.
type compiler struct {
	cfg Config
	g   *G.ExprGraph

	// checkConfig's: the leaves by role and the nodes the program computes.
	inputs  map[*G.Node]bool  // inputs and dropout masks
	params  map[*G.Node]int   // parameter node -> its index in pvals
	grads   map[*G.Node][]int // gradient node -> parameters it is the gradient of
	pvals   []paramVal
	targets []*G.Node // outputs, parameters and gradients

	// orderNodes': the needed nodes, children first, and how many needed
	// nodes (or outputs) take each as an argument. low holds the lowering
	// (package lower), with the fused patterns it rewrites (Fuse).
	needed []*G.Node
	users  map[*G.Node]int
	low    *lower.Lowering

	// lowerNodes': the flags and count it emits kernels for, as the
	// lowering's buffers; then, adopted (adopt), every node's value, the
	// kernels against virtual buffers. A kernel that a later node's
	// lowering replaced (accumulate) is nil in kernels until dropKernels
	// removes it, after factoring.
	lowFlags, lowCorrect *lower.Buffer
	vals                 map[*G.Node]*val
	kernels              []backend.Kernel
	vbufs                []*vbuf
	flags                *vbuf        // the gradients' finite flags, two per parameter
	correct              *vbuf        // Config.Accuracy's count
	state                compileState // the step of the random draws, batch norm's statistics
	// gradKernels is, for a gradient node of one parameter, the span of
	// kernels that form and check it, which factorGrads may replace.
	gradKernels map[*G.Node][2]int
	// factorR is the RSDM r that factorGrads leaves gradients factored for
	// (Config.Groups's), 0 for none.
	factorR int
}

// Compile compiles the part of g that computes cfg.Outputs and, unless
// cfg.NoGrad, the gradients of cfg.Params. It runs seven phases, each a
// function of its own over the compiler's state: check the config and
// order the nodes (here), lower them to kernels (lowering.go and package
// lower, the one package a new op touches), factor the gradients RSDM
// takes as products (factor.go), chain runs of elementwise kernels
// (chain.go), plan the memory (plan.go) and bind the parameters, inputs
// and outputs to their buffers (here).
//
// Compile does not panic: a panic inside a phase (a bug, since every
// lowering checks what it reads) becomes an error, which for the lowering
// names the node, its op and its shape.
func Compile(g *G.ExprGraph, cfg Config) (p *Program, err error) {
	phase := "checking the config"
	defer func() {
		if r := recover(); r != nil {
			if p != nil {
				p.Close()
			}
			p, err = nil, fmt.Errorf("program: %s: %v", phase, r)
		}
	}()
	if g == nil {
		return nil, errors.New("program: the graph is nil")
	}
	c, err := checkConfig(g, cfg)
	if err != nil {
		return nil, err
	}
	phase = "ordering the nodes"
	if err := c.orderNodes(); err != nil {
		return nil, err
	}
	phase = "lowering the nodes"
	if err := c.lowerNodes(); err != nil {
		return nil, err
	}
	phase = "factoring the gradients"
	c.factorGrads()
	c.dropKernels()
	phase = "chaining the elementwise kernels"
	c.chainElementwise()
	phase = "planning the memory"
	if p, err = c.planMemory(); err != nil {
		return nil, err
	}
	phase = "binding the parameters"
	c.bindParams(p)
	return p, nil
}

// checkConfig checks cfg and sorts the leaves it names by role: inputs,
// dropout masks and parameters, whose gradient nodes it finds.
func checkConfig(g *G.ExprGraph, cfg Config) (*compiler, error) {
	if cfg.Backend == nil {
		return nil, errors.New("program: Config.Backend is nil")
	}
	if cfg.Share != nil && cfg.Share.be != cfg.Backend {
		return nil, errors.New("program: Config.Share is a program on another backend")
	}
	c := &compiler{cfg: cfg, g: g, vals: map[*G.Node]*val{}, inputs: map[*G.Node]bool{},
		params: map[*G.Node]int{}, grads: map[*G.Node][]int{}, gradKernels: map[*G.Node][2]int{},
		low: newLowering(g, cfg)}
	if err := c.checkInputs(); err != nil {
		return nil, err
	}
	if err := c.checkParams(); err != nil {
		return nil, err
	}
	for _, n := range cfg.Outputs {
		if n == nil {
			return nil, errors.New("program: an output is nil")
		}
		c.targets = append(c.targets, n)
	}
	if len(c.targets) == 0 {
		return nil, errors.New("program: nothing to compute: no outputs and no parameters")
	}
	return c, nil
}

// checkInputs checks that Config.Inputs and Config.Dropout are leaves,
// each listed once.
func (c *compiler) checkInputs() error {
	for _, n := range c.cfg.Inputs {
		if n == nil || n.Op() != nil {
			return fmt.Errorf("program: input %v is not a leaf node", n)
		}
		c.inputs[n] = true
	}
	for _, d := range c.cfg.Dropout {
		switch {
		case d.Node == nil || d.Node.Op() != nil:
			return fmt.Errorf("program: dropout mask %v is not a leaf node", d.Node)
		case c.inputs[d.Node]:
			return fmt.Errorf("program: %q is listed both as an input and as a dropout mask", d.Node.Name())
		case !(d.P >= 0 && d.P < 1):
			return fmt.Errorf("program: dropout mask %q has probability %v, want [0, 1)", d.Node.Name(), d.P)
		}
		c.inputs[d.Node] = true // a resident buffer, written by its kernel
	}
	return nil
}

// checkParams checks Config.Params and makes each parameter, and unless
// Config.NoGrad its gradient, a target.
func (c *compiler) checkParams() error {
	for i, p := range c.cfg.Params {
		n := p.Node
		_, dup := c.params[n]
		switch {
		case n == nil:
			return fmt.Errorf("program: parameter %d has no node", i)
		case n.Op() != nil:
			return fmt.Errorf("program: parameter %q is not a leaf node", n.Name())
		case !lower.IsFloat(n.Dtype()):
			return fmt.Errorf("program: parameter %q holds %v: parameters are float32 or float64", n.Name(), n.Dtype())
		case dup:
			return fmt.Errorf("program: parameter %q is listed twice", n.Name())
		case c.inputs[n]:
			return fmt.Errorf("program: %q is listed both as a parameter and as an input", n.Name())
		}
		c.params[n] = i
		c.pvals = append(c.pvals, paramVal{Param: Param{Node: n, Manifold: p.Manifold}})
		c.targets = append(c.targets, n)
		if c.cfg.NoGrad {
			continue
		}
		d := n.Deriv()
		if d == nil {
			return fmt.Errorf("program: parameter %q has no gradient node: call gorgonia.Grad(cost, params...) before Compile, or set NoGrad", n.Name())
		}
		c.grads[d] = append(c.grads[d], i)
		c.targets = append(c.targets, d)
	}
	return nil
}

// orderNodes orders the nodes the targets need, children first, with the
// fused patterns (lower.Lowering.Fuse) rewritten: a pattern's inner
// nodes are then not needed. It counts every needed node's users.
func (c *compiler) orderNodes() error {
	order, err := c.order(c.targets)
	if err != nil {
		return err
	}
	if !c.cfg.unfused && c.low.Fuse(order, c.targets) { // order again, without the fused patterns' inner nodes
		if order, err = c.order(c.targets); err != nil {
			return err
		}
	}
	c.needed = order
	c.users = map[*G.Node]int{}
	for _, n := range order {
		for _, ch := range c.low.Children(n) {
			c.users[ch]++
		}
	}
	for _, n := range c.cfg.Outputs {
		c.users[n]++
	}
	return nil
}

// order returns the nodes the targets depend on, children before parents.
func (c *compiler) order(targets []*G.Node) ([]*G.Node, error) {
	order, err := gorgoniaop.Order(c.g, targets, c.low.Children)
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return order, nil
}

// bindParams, the last phase, hands the planned buffers to the program:
// the parameters' values and gradients (or their factors), the inputs
// SetInput sets, the nodes Read reads, the finite flags, the accuracy
// count and the state.
func (c *compiler) bindParams(p *Program) {
	p.inputs, p.reads = map[*G.Node]*val{}, map[*G.Node]*val{}
	masks := map[*G.Node]bool{}
	for _, d := range c.cfg.Dropout {
		masks[d.Node] = true
	}
	for n := range c.inputs {
		if v, ok := c.vals[n]; ok { // an input the outputs need
			p.reads[n] = v
			if !masks[n] { // a mask is drawn, not set
				p.inputs[n] = v
			}
		}
	}
	for _, n := range c.cfg.Outputs {
		p.reads[n] = c.vals[n]
	}
	for i := range c.pvals {
		pv := &c.pvals[i]
		p.reads[pv.Node] = pv.v
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
	c.finishState(p)
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
