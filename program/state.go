package program

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/program/lower"
)

// compileState is what a Compile gathers of the program's state: the step
// that keys its random draws, and the running statistics of gorgonia's
// BatchNorm ops.
type compileState struct {
	step  *vbuf
	stats []stateVal
}

// stateVal is one tensor of program state: a BatchNormOp's running mean
// or variance.
type stateVal struct {
	name     string
	v        *val
	op       *G.BatchNormOp
	variance bool
}

// finishState hands the state gathered by Compile to the planned program.
func (c *compiler) finishState(p *Program) {
	if c.state.step != nil {
		p.step, p.stepHost = c.state.step.phys, make([]float64, 1)
		p.stepAny = p.stepHost
	}
	p.states = c.state.stats
}

// copyStep copies the step into the program's buffer before a Run.
func (p *Program) copyStep() error {
	if p.step == nil {
		return nil
	}
	p.stepHost[0] = float64(p.stepN)
	return p.be.CopyIn(p.step, 0, p.stepAny)
}

// Step returns the step whose random values the next Run draws (SetStep).
func (p *Program) Step() int { return p.stepN }

// StateNames returns the names of the program's state tensors, in the
// order Compile met them: the running mean and variance of every gorgonia
// BatchNorm, "<node>/running_mean" and "<node>/running_var", <node> the name
// of the op's node. A program compiled with Config.Share uses the shared
// program's tensors of the same names.
func (p *Program) StateNames() []string {
	out := make([]string, len(p.states))
	for i, s := range p.states {
		out[i] = s.name
	}
	return out
}

// stateOf returns the state tensor of that name.
func (p *Program) stateOf(name string) (*stateVal, error) {
	i := slices.IndexFunc(p.states, func(s stateVal) bool { return s.name == name })
	if i < 0 {
		return nil, fmt.Errorf("program: no state %q (the program's state: %q)", name, p.StateNames())
	}
	return &p.states[i], nil
}

// StateInfo returns the shape and element type of the state tensor name,
// and whether the program has it.
func (p *Program) StateInfo(name string) (tensor.Shape, tensor.Dtype, bool) {
	s, err := p.stateOf(name)
	if err != nil {
		return nil, tensor.Dtype{}, false
	}
	dt := tensor.Float64
	if s.v.vb.dt == backend.Float32 {
		dt = tensor.Float32
	}
	return s.v.shape.Clone(), dt, true
}

// ReadState copies the state tensor name into dst ([]float32 or []float64
// of its type and size).
func (p *Program) ReadState(name string, dst any) error {
	s, err := p.stateFor(name, dst)
	if err != nil {
		return err
	}
	return p.be.CopyOut(dst, s.v.vb.phys, s.v.vb.physOff+s.v.off)
}

// WriteState copies src ([]float32 or []float64 of its type and size) into
// the state tensor name: the next Run uses it.
func (p *Program) WriteState(name string, src any) error {
	s, err := p.stateFor(name, src)
	if err != nil {
		return err
	}
	return p.be.CopyIn(s.v.vb.phys, s.v.vb.physOff+s.v.off, src)
}

// stateFor returns the state tensor name if data is a slice of its type
// and size, else an error that names the mismatch.
func (p *Program) stateFor(name string, data any) (*stateVal, error) {
	s, err := p.stateOf(name)
	if err != nil {
		return nil, err
	}
	var dt backend.DType
	switch data.(type) {
	case []float32:
		dt = backend.Float32
	case []float64:
		dt = backend.Float64
	}
	if l, _ := lower.HostLen(data); dt != s.v.vb.dt || l != s.v.size {
		return nil, fmt.Errorf("program: state %q has %d values of %v, not %T of %d", s.name, s.v.size, s.v.vb.dt, data, l)
	}
	return s, nil
}

// storeStates copies every BatchNormOp's running statistics into the op's
// own (what its Stats returns).
func (p *Program) storeStates() error {
	for i := range p.states {
		s := &p.states[i]
		mean, vr := s.op.Stats()
		t := mean
		if s.variance {
			t = vr
		}
		if err := p.be.CopyOut(t.Data(), s.v.vb.phys, s.v.vb.physOff+s.v.off); err != nil {
			return fmt.Errorf("program: storing %q into its op: %w", s.name, err)
		}
	}
	return nil
}
