package lower

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

// StreamOf is the stream of the random draws of a gorgonia node (a
// dropoutOp's, a random node's): 2^32 plus its ID, apart from the streams of
// Config.Dropout's masks (their positions in the list).
func StreamOf(n *G.Node) uint64 { return 1<<32 + uint64(n.ID()) }

// bnSettings are a BatchNormOp's settings as Compile reads them.
type bnSettings struct {
	momentum, eps float64
	training      bool
}

// bnSettingsOf reads op's settings; its mode is Config.EvalMode's.
func (l *Lowering) bnSettingsOf(op *G.BatchNormOp) (bnSettings, error) {
	f := gorgoniaop.FieldsOf(op)
	s := bnSettings{momentum: f.Float("momentum"), eps: f.Float("epsilon"), training: !l.cfg.EvalMode}
	return s, f.Err()
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
func (l *Lowering) batchNorm(n *G.Node, in []*Value, out *Value) error {
	op, ok := n.Op().(*G.BatchNormOp)
	if !ok {
		return fmt.Errorf("op %T is not gorgonia's BatchNormOp", n.Op())
	}
	set, err := l.bnSettingsOf(op)
	if err != nil {
		return err
	}
	x := in[0]
	b, ch, sp, err := bnShape(x.Shape)
	if err != nil {
		return err
	}
	if set.training && b*sp < 2 {
		return fmt.Errorf("batch norm in training over %d value(s) per channel (shape %v): the unbiased running variance needs at least 2", b*sp, x.Shape)
	}
	run, err := l.bnRunning(op, n, ch, x.Buf.Type)
	if err != nil {
		return err
	}
	l.Emit(backend.BatchNorm{Batch: b, C: ch, Spatial: sp, Momentum: set.momentum, Eps: set.eps, Training: set.training,
		X: x.Operand(), Y: out.Operand(), Mean: run.mean.Operand(), Var: run.vr.Operand()})
	return nil
}

// batchNormGrad lowers gorgonia's batchnormDiffOp (arguments x and the
// gradient of the op's output): the derivative of the forward, in the
// forward's mode.
func (l *Lowering) batchNormGrad(n *G.Node, in []*Value, out *Value) error {
	f := gorgoniaop.Field(n.Op(), "BatchNormOp")
	if !f.IsValid() || !f.CanInterface() {
		return fmt.Errorf("op %T has no BatchNormOp (gorgonia's internals changed?)", n.Op())
	}
	op, ok := f.Interface().(*G.BatchNormOp)
	if !ok || op == nil {
		return fmt.Errorf("op %T has no BatchNormOp", n.Op())
	}
	set, err := l.bnSettingsOf(op)
	if err != nil {
		return err
	}
	if len(in) != 2 || in[1].Size != in[0].Size {
		return fmt.Errorf("batch norm gradient of %d arguments", len(in))
	}
	x := in[0]
	b, ch, sp, err := bnShape(x.Shape)
	if err != nil {
		return err
	}
	run, err := l.bnRunning(op, nil, ch, x.Buf.Type)
	if err != nil {
		return err
	}
	l.Emit(backend.BatchNormGrad{Batch: b, C: ch, Spatial: sp, Eps: set.eps, Training: set.training,
		X: x.Operand(), DY: in[1].Operand(), Var: run.vr.Operand(), DX: out.Operand()})
	return nil
}

// bnRunning returns the running statistics of op, making them program
// state at their first use: named after the op's node (found in the graph
// when node is nil, for the gradient); the buffers of the same names of
// the program Config.Share names, or else buffers of their own that start,
// in training, from mean 0 and variance 1 (where a training VM's
// SetTraining(true) resets them) and, in inference, from the op's values at
// Compile (its Stats: a tape machine's, or a program's after StoreParams).
func (l *Lowering) bnRunning(op *G.BatchNormOp, node *G.Node, ch int, dt backend.DType) (*bnStats, error) {
	if r, ok := l.bn[op]; ok {
		if node != nil && node != r.node {
			return nil, fmt.Errorf("one BatchNormOp at two nodes, %q and %q: gorgonia would share its running statistics between them; build a BatchNorm for each", r.node.Name(), node.Name())
		}
		if r.mean.Size != ch {
			return nil, fmt.Errorf("batch norm of %d channels whose running statistics have %d", ch, r.mean.Size)
		}
		return r, nil
	}
	if node == nil {
		for _, m := range l.cfg.Graph.AllNodes() {
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
	if r.mean, err = l.newState(node.Name()+"/running_mean", op, false, mean, ch, dt); err != nil {
		return nil, err
	}
	if r.vr, err = l.newState(node.Name()+"/running_var", op, true, vr, ch, dt); err != nil {
		return nil, err
	}
	if l.bn == nil {
		l.bn = map[*G.BatchNormOp]*bnStats{}
	}
	l.bn[op] = r
	return r, nil
}

// newState makes a resident buffer of program state: its own, holding
// init's values, or the shared program's of the same name.
func (l *Lowering) newState(name string, op *G.BatchNormOp, variance bool, init *tensor.Dense, size int, dt backend.DType) (*Value, error) {
	v := &Value{Shape: tensor.Shape{size}, Size: size, Buf: l.NewBuffer(dt, size, true, name)}
	if l.cfg.Sharing {
		var o *SharedState
		var names []string
		for i, s := range l.cfg.SharedStates {
			names = append(names, s.Name)
			if s.Name == name {
				o = &l.cfg.SharedStates[i]
			}
		}
		switch {
		case o == nil:
			return nil, fmt.Errorf("the program of Config.Share has no state %q (it has %q): share a program compiled from a graph with the same batch norms, or compile without Share", name, names)
		case o.Type != dt || o.Size != size:
			return nil, fmt.Errorf("state %q has %d values of %v, the shared program's %d of %v", name, size, dt, o.Size, o.Type)
		}
		v.Buf.Alias = o.At
	} else {
		reset := 0.0 // a training VM's reset: mean 0, variance 1
		if variance {
			reset = 1
		}
		var ok bool
		switch d := init.Data().(type) {
		case []float32:
			ok = dt == backend.Float32 && len(d) == size
			v.Buf.Init = append([]float32(nil), d...)
			if !l.cfg.EvalMode {
				v.Buf.Init = filled(make([]float32, size), float32(reset))
			}
		case []float64:
			ok = dt == backend.Float64 && len(d) == size
			v.Buf.Init = append([]float64(nil), d...)
			if !l.cfg.EvalMode {
				v.Buf.Init = filled(make([]float64, size), reset)
			}
		}
		if !ok {
			return nil, fmt.Errorf("state %q: the op's running statistics are %v of shape %v, want %d values of %v", name, init.Dtype(), init.Shape(), size, dt)
		}
	}
	l.States = append(l.States, State{Name: name, Value: v, Op: op, Variance: variance})
	return v, nil
}

// groupNorm lowers gorgonia's GroupNormOp and its gradient groupNormDiffOp
// (arguments x and the gradient of the op's output): the group of a
// sample is a row of consecutive values, which LayerNorm normalizes with a
// unit scale and a zero shift (the op's scale and shift are ops of their
// own), and whose gradient LayerNormGrad takes.
func (l *Lowering) groupNorm(n *G.Node, in []*Value, out *Value) error {
	op := n.Op()
	f := gorgoniaop.FieldsOf(op)
	groups, eps := f.Int("numGroups"), f.Float("epsilon")
	if err := f.Err(); err != nil {
		return err
	}
	x := in[0]
	if len(x.Shape) < 2 || groups < 1 || x.Shape[1]%groups != 0 {
		return fmt.Errorf("group norm of %d groups of shape %v: want (batch, channels, ...) with the channels a multiple of the groups", groups, x.Shape)
	}
	rows := x.Shape[0] * groups
	d := x.Size / rows
	ones, err := l.units(x.Buf.Type, d, 1)
	if err != nil {
		return err
	}
	if gorgoniaop.OpName(op) == gorgoniaop.GroupNormDiffOp {
		if len(in) != 2 || in[1].Size != x.Size {
			return fmt.Errorf("group norm gradient of %d arguments", len(in))
		}
		l.Emit(backend.LayerNormGrad{Rows: rows, D: d, Eps: eps, X: x.Operand(), Gamma: ones.Operand(), DY: in[1].Operand(), DX: out.Operand()})
		return nil
	}
	zeros, err := l.units(x.Buf.Type, d, 0)
	if err != nil {
		return err
	}
	l.Emit(backend.LayerNorm{Rows: rows, D: d, Eps: eps, X: x.Operand(), Gamma: ones.Operand(), Beta: zeros.Operand(), Y: out.Operand()})
	return nil
}

// units returns a constant of n values v of type dt, one for each.
func (l *Lowering) units(dt backend.DType, n int, v float64) (*Value, error) {
	key := unitKey{dt, n, v}
	if u, ok := l.unitVals[key]; ok {
		return u, nil
	}
	u := &Value{Shape: tensor.Shape{n}, Size: n, Buf: l.NewBuffer(dt, n, true, fmt.Sprintf("%v x %d", v, n))}
	switch dt {
	case backend.Float32:
		u.Buf.Init = filled(make([]float32, n), float32(v))
	case backend.Float64:
		u.Buf.Init = filled(make([]float64, n), v)
	default:
		return nil, fmt.Errorf("constant of %v", dt)
	}
	if l.unitVals == nil {
		l.unitVals = map[unitKey]*Value{}
	}
	l.unitVals[key] = u
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
func (l *Lowering) dropout(n *G.Node, in []*Value, out *Value) error {
	op := n.Op()
	p, err := gorgoniaop.FloatField(op, "probability")
	if err != nil {
		return err
	}
	training := !l.cfg.EvalMode
	src, fwd := in[0], n
	if gorgoniaop.OpName(op) == gorgoniaop.DropoutDiffOp {
		ch := l.Children(n)
		if len(in) != 3 || len(ch) != 3 || in[2].Size != src.Size {
			return fmt.Errorf("dropout gradient of %d arguments", len(in))
		}
		src, fwd = in[2], ch[1] // the gradient of the forward node's output
	}
	if !(p >= 0 && p < 1) {
		return fmt.Errorf("dropout of probability %v, want [0, 1)", p)
	}
	if !training || p == 0 {
		l.View(n, src, 0)
		return nil
	}
	l.Emit(backend.Dropout{N: out.Size, P: p, Seed: l.cfg.DropoutSeed, Stream: StreamOf(fwd), X: src.Operand(), Y: out.Operand(), Step: l.StepOperand()})
	return nil
}

// randomDists are gorgonia's randomness values (uniform, gaussian,
// binomial) as backend's distributions.
var randomDists = [...]backend.RandomDist{backend.DrawUniform, backend.DrawGaussian, backend.DrawBinomial}

// random lowers gorgonia's randomOp (UniformRandomNode and its kin): the
// program draws the node's values at every Run from Config.DropoutSeed,
// the node and the step (backend.Random).
func (l *Lowering) random(n *G.Node, _ []*Value, out *Value) error {
	f := gorgoniaop.FieldsOf(n.Op())
	which, a, b := f.Int("which"), f.Float("a"), f.Float("b")
	if err := f.Err(); err != nil {
		return err
	}
	if which < 0 || which >= len(randomDists) {
		return fmt.Errorf("random op of kind %d (gorgonia's internals changed?)", which)
	}
	k := backend.Random{Dist: randomDists[which], N: out.Size, A: a, B: b, Seed: l.cfg.DropoutSeed, Stream: StreamOf(n),
		Dst: out.Operand(), Step: l.StepOperand()}
	if k.Dist == backend.DrawBinomial {
		if !(a >= 0 && a < backend.MaxTrials+1) || !(b >= 0 && b <= 1) {
			return fmt.Errorf("binomial of %v trials of probability %v: want 0 to %d trials (whole ones) and a probability in [0, 1]", a, b, backend.MaxTrials)
		}
		k.A = float64(int64(a)) // gorgonia truncates the trials
	}
	if err := k.Check(); err != nil {
		return err
	}
	l.Emit(k)
	return nil
}
