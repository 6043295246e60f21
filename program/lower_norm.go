package program

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
)

// The lowerings of gorgonia's normalizations (BatchNorm, GroupNorm) and of
// its random ops (Dropout, the random nodes), and their gradients.
//
// Where gorgonia's own gradient ops are wrong, the lowering computes the
// derivative of what the forward op computes, and says so:
//   - dropoutDiffOp divides the gradient by the drop probability p where the
//     op's output is not zero, and is zero everywhere for p = 0; the
//     derivative keeps the forward's mask and divides by 1 - p (the same
//     for p = 0.5), and is the identity in inference.
//   - batchnormDiffOp on inputs of more than two axes in inference mode
//     scales by the batch statistics its forward did not compute (it
//     zeroes them in float64, keeps the last training batch's in float32);
//     the derivative scales by 1/sqrt(running variance + eps), as gorgonia
//     does on matrices.
//   - GroupNormOp's moments are wrong for groups of 264 values or more
//     (its pairwise merge passes the means for the second moments); the
//     lowering normalizes with the groups' exact mean and variance.

// streamOf is the stream of the random draws of a gorgonia node (a
// dropoutOp's, a random node's): 2^32 plus its ID, apart from the streams of
// Config.Dropout's masks (their positions in the list).
func streamOf(n *G.Node) uint64 { return 1<<32 + uint64(n.ID()) }

// bnSettings are a BatchNormOp's settings as Compile reads them.
type bnSettings struct {
	momentum, eps float64
	training      bool
}

// bnSettingsOf reads op's settings; its mode is Config.EvalMode's.
func (c *compiler) bnSettingsOf(op *G.BatchNormOp) (bnSettings, error) {
	s := bnSettings{training: !c.cfg.EvalMode}
	var err1, err2 error
	s.momentum, err1 = gorgoniaop.FloatField(op, "momentum")
	s.eps, err2 = gorgoniaop.FloatField(op, "epsilon")
	if err1 != nil {
		return s, err1
	}
	return s, err2
}

// bnShape splits the shape of a batch norm's input into the batch, the
// channels and the values of a channel in a sample.
func bnShape(s tensor.Shape) (batch, ch, spatial int, err error) {
	if len(s) < 2 {
		return 0, 0, 0, fmt.Errorf("batch norm of shape %v: want (batch, channels, ...)", s)
	}
	return s[0], s[1], max(s[2:].TotalSize(), 1), nil
}

// batchNorm lowers gorgonia's BatchNormOp: in training (unless
// Config.EvalMode) with the batch's statistics, moving the running ones; in
// inference with the running ones. The running statistics are program
// state (Program.StateNames).
func (c *compiler) batchNorm(n *G.Node, in []*val, out *val) error {
	op, ok := n.Op().(*G.BatchNormOp)
	if !ok {
		return fmt.Errorf("op %T is not gorgonia's BatchNormOp", n.Op())
	}
	set, err := c.bnSettingsOf(op)
	if err != nil {
		return err
	}
	x := in[0]
	b, ch, sp, err := bnShape(x.shape)
	if err != nil {
		return err
	}
	if set.training && b*sp < 2 {
		return fmt.Errorf("batch norm in training over %d value(s) per channel (shape %v): the unbiased running variance needs at least 2", b*sp, x.shape)
	}
	run, err := c.bnRunning(op, n, ch, x.vb.dt)
	if err != nil {
		return err
	}
	c.emit(backend.BatchNorm{Batch: b, C: ch, Spatial: sp, Momentum: set.momentum, Eps: set.eps, Training: set.training,
		X: x.operand(), Y: out.operand(), Mean: run.mean.operand(), Var: run.vr.operand()})
	return nil
}

// batchNormGrad lowers gorgonia's batchnormDiffOp (arguments x and the
// gradient of the op's output): the derivative of the forward, in the
// forward's mode.
func (c *compiler) batchNormGrad(n *G.Node, in []*val, out *val) error {
	f := gorgoniaop.Field(n.Op(), "BatchNormOp")
	if !f.IsValid() || !f.CanInterface() {
		return fmt.Errorf("op %T has no BatchNormOp (gorgonia's internals changed?)", n.Op())
	}
	op, ok := f.Interface().(*G.BatchNormOp)
	if !ok || op == nil {
		return fmt.Errorf("op %T has no BatchNormOp", n.Op())
	}
	set, err := c.bnSettingsOf(op)
	if err != nil {
		return err
	}
	if len(in) != 2 || in[1].size != in[0].size {
		return fmt.Errorf("batch norm gradient of %d arguments", len(in))
	}
	x := in[0]
	b, ch, sp, err := bnShape(x.shape)
	if err != nil {
		return err
	}
	run, err := c.bnRunning(op, nil, ch, x.vb.dt)
	if err != nil {
		return err
	}
	c.emit(backend.BatchNormGrad{Batch: b, C: ch, Spatial: sp, Eps: set.eps, Training: set.training,
		X: x.operand(), DY: in[1].operand(), Var: run.vr.operand(), DX: out.operand()})
	return nil
}

// bnRunning returns the running statistics of op, making them program
// state at their first use: named after the op's node (found in the graph
// when node is nil, for the gradient); the buffers of the same names of
// the program Config.Share names, or else buffers of their own that start,
// in training, from mean 0 and variance 1 (where a training VM's
// SetTraining(true) resets them) and, in inference, from the op's values at
// Compile (its Stats: a tape machine's, or a program's after StoreParams).
func (c *compiler) bnRunning(op *G.BatchNormOp, node *G.Node, ch int, dt backend.DType) (*bnStats, error) {
	if r, ok := c.state.bn[op]; ok {
		if node != nil && node != r.node {
			return nil, fmt.Errorf("one BatchNormOp at two nodes, %q and %q: gorgonia would share its running statistics between them; build a BatchNorm for each", r.node.Name(), node.Name())
		}
		if r.mean.size != ch {
			return nil, fmt.Errorf("batch norm of %d channels whose running statistics have %d", ch, r.mean.size)
		}
		return r, nil
	}
	if node == nil {
		for _, m := range c.g.AllNodes() {
			if o, ok := m.Op().(*G.BatchNormOp); ok && o == op {
				node = m
				break
			}
		}
		if node == nil {
			return nil, fmt.Errorf("the gradient's BatchNormOp has no node in the graph")
		}
	}
	m, v := op.Stats()
	mean, ok1 := m.(*tensor.Dense)
	vr, ok2 := v.(*tensor.Dense)
	if !ok1 || !ok2 || mean == nil || vr == nil {
		return nil, fmt.Errorf("the BatchNormOp has no running statistics (build it with gorgonia.BatchNorm)")
	}
	r := &bnStats{node: node}
	var err error
	if r.mean, err = c.newState(node.Name()+"/running_mean", op, false, mean, ch, dt); err != nil {
		return nil, err
	}
	if r.vr, err = c.newState(node.Name()+"/running_var", op, true, vr, ch, dt); err != nil {
		return nil, err
	}
	if c.state.bn == nil {
		c.state.bn = map[*G.BatchNormOp]*bnStats{}
	}
	c.state.bn[op] = r
	return r, nil
}

// newState makes a resident buffer of program state: its own, holding
// init's values, or the shared program's of the same name.
func (c *compiler) newState(name string, op *G.BatchNormOp, variance bool, init *tensor.Dense, size int, dt backend.DType) (*val, error) {
	v := &val{shape: tensor.Shape{size}, size: size, vb: c.newBuf(dt, size, true, name)}
	if share := c.cfg.Share; share != nil {
		var o *val
		var names []string
		for _, s := range share.states {
			names = append(names, s.name)
			if s.name == name {
				o = s.v
			}
		}
		switch {
		case o == nil:
			return nil, fmt.Errorf("the program of Config.Share has no state %q (it has %q): share a program compiled from a graph with the same batch norms, or compile without Share", name, names)
		case o.vb.dt != dt || o.size != size:
			return nil, fmt.Errorf("state %q has %d values of %v, the shared program's %d of %v", name, size, dt, o.size, o.vb.dt)
		}
		v.vb.phys, v.vb.physOff = o.vb.phys, o.vb.physOff+o.off
	} else {
		reset := 0.0 // a training VM's reset: mean 0, variance 1
		if variance {
			reset = 1
		}
		var ok bool
		switch d := init.Data().(type) {
		case []float32:
			ok = dt == backend.Float32 && len(d) == size
			v.vb.init = append([]float32(nil), d...)
			if !c.cfg.EvalMode {
				v.vb.init = filled(make([]float32, size), float32(reset))
			}
		case []float64:
			ok = dt == backend.Float64 && len(d) == size
			v.vb.init = append([]float64(nil), d...)
			if !c.cfg.EvalMode {
				v.vb.init = filled(make([]float64, size), reset)
			}
		}
		if !ok {
			return nil, fmt.Errorf("state %q: the op's running statistics are %v of shape %v, want %d values of %v", name, init.Dtype(), init.Shape(), size, dt)
		}
	}
	c.state.stats = append(c.state.stats, stateVal{name: name, v: v, op: op, variance: variance})
	return v, nil
}

// groupNorm lowers gorgonia's GroupNormOp and its gradient groupNormDiffOp
// (arguments x and the gradient of the op's output): the group of a
// sample is a row of consecutive values, which LayerNorm normalizes with a
// unit scale and a zero shift (the op's scale and shift are ops of their
// own), and whose gradient LayerNormGrad takes.
func (c *compiler) groupNorm(n *G.Node, in []*val, out *val) error {
	op := n.Op()
	groups, err := gorgoniaop.IntField(op, "numGroups")
	if err != nil {
		return err
	}
	eps, err := gorgoniaop.FloatField(op, "epsilon")
	if err != nil {
		return err
	}
	x := in[0]
	if len(x.shape) < 2 || groups < 1 || x.shape[1]%groups != 0 {
		return fmt.Errorf("group norm of %d groups of shape %v: want (batch, channels, ...) with the channels a multiple of the groups", groups, x.shape)
	}
	rows := x.shape[0] * groups
	d := x.size / rows
	ones, err := c.units(x.vb.dt, d, 1)
	if err != nil {
		return err
	}
	if gorgoniaop.OpName(op) == gorgoniaop.GroupNormDiffOp {
		if len(in) != 2 || in[1].size != x.size {
			return fmt.Errorf("group norm gradient of %d arguments", len(in))
		}
		c.emit(backend.LayerNormGrad{Rows: rows, D: d, Eps: eps, X: x.operand(), Gamma: ones.operand(), DY: in[1].operand(), DX: out.operand()})
		return nil
	}
	zeros, err := c.units(x.vb.dt, d, 0)
	if err != nil {
		return err
	}
	c.emit(backend.LayerNorm{Rows: rows, D: d, Eps: eps, X: x.operand(), Gamma: ones.operand(), Beta: zeros.operand(), Y: out.operand()})
	return nil
}

// units returns a constant of n values v of type dt, one for each.
func (c *compiler) units(dt backend.DType, n int, v float64) (*val, error) {
	key := unitKey{dt, n, v}
	if u, ok := c.state.units[key]; ok {
		return u, nil
	}
	u := &val{shape: tensor.Shape{n}, size: n, vb: c.newBuf(dt, n, true, fmt.Sprintf("%v x %d", v, n))}
	switch dt {
	case backend.Float32:
		u.vb.init = filled(make([]float32, n), float32(v))
	case backend.Float64:
		u.vb.init = filled(make([]float64, n), v)
	default:
		return nil, fmt.Errorf("constant of %v", dt)
	}
	if c.state.units == nil {
		c.state.units = map[unitKey]*val{}
	}
	c.state.units[key] = u
	return u, nil
}

// filled sets every element of d to v and returns d.
func filled[T float32 | float64](d []T, v T) []T {
	for i := range d {
		d[i] = v
	}
	return d
}

// unitKey tells the constants of units apart.
type unitKey struct {
	dt backend.DType
	n  int
	v  float64
}

// dropout lowers gorgonia's dropoutOp and its gradient dropoutDiffOp
// (arguments x, the op's output and its gradient): in training (unless
// Config.EvalMode) with p > 0 the program draws the mask from
// Config.DropoutSeed, the op's node and the step (backend.Dropout); the
// gradient draws the forward's mask again. Otherwise both are the identity,
// a view of the argument.
func (c *compiler) dropout(n *G.Node, in []*val, out *val) error {
	op := n.Op()
	p, err := gorgoniaop.FloatField(op, "probability")
	if err != nil {
		return err
	}
	training := !c.cfg.EvalMode
	src, fwd := in[0], n
	if gorgoniaop.OpName(op) == gorgoniaop.DropoutDiffOp {
		ch := c.children(n)
		if len(in) != 3 || len(ch) != 3 || in[2].size != src.size {
			return fmt.Errorf("dropout gradient of %d arguments", len(in))
		}
		src, fwd = in[2], ch[1] // the gradient of the forward node's output
	}
	if !(p >= 0 && p < 1) {
		return fmt.Errorf("dropout of probability %v, want [0, 1)", p)
	}
	if !training || p == 0 {
		c.view(n, src, 0)
		return nil
	}
	c.emit(backend.Dropout{N: out.size, P: p, Seed: c.cfg.DropoutSeed, Stream: streamOf(fwd), X: src.operand(), Y: out.operand(), Step: c.stepOperand()})
	return nil
}

// randomDists are gorgonia's randomness values (uniform, gaussian,
// binomial) as backend's distributions.
var randomDists = [...]backend.RandomDist{backend.DrawUniform, backend.DrawGaussian, backend.DrawBinomial}

// random lowers gorgonia's randomOp (UniformRandomNode and its kin): the
// program draws the node's values at every Run from Config.DropoutSeed,
// the node and the step (backend.Random).
func (c *compiler) random(n *G.Node, _ []*val, out *val) error {
	op := n.Op()
	which, err := gorgoniaop.IntField(op, "which")
	if err != nil {
		return err
	}
	a, err := gorgoniaop.FloatField(op, "a")
	if err != nil {
		return err
	}
	b, err := gorgoniaop.FloatField(op, "b")
	if err != nil {
		return err
	}
	if which < 0 || which >= len(randomDists) {
		return fmt.Errorf("random op of kind %d (gorgonia's internals changed?)", which)
	}
	k := backend.Random{Dist: randomDists[which], N: out.size, A: a, B: b, Seed: c.cfg.DropoutSeed, Stream: streamOf(n),
		Dst: out.operand(), Step: c.stepOperand()}
	if k.Dist == backend.DrawBinomial {
		if !(a >= 0 && a < backend.MaxTrials+1) || !(b >= 0 && b <= 1) {
			return fmt.Errorf("binomial of %v trials of probability %v: want 0 to %d trials (whole ones) and a probability in [0, 1]", a, b, backend.MaxTrials)
		}
		k.A = float64(int64(a)) // gorgonia truncates the trials
	}
	if err := k.Check(); err != nil {
		return err
	}
	c.emit(k)
	return nil
}
