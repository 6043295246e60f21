package program

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// Solver updates a compiled program's parameters where they live, from the
// gradients of its last Run, as optim.Solver does (groups, schedules,
// clipping). It implements checkpoint.Solver.
type Solver struct {
	p *Program
	s *optim.Solver
}

// NewSolver returns a Solver over p's parameters, grouped by groups (see
// optim.NewSolver). On a backend whose buffers live on the host (the CPU
// backend) it steps optim's slice optimizers on the buffers themselves.
func NewSolver(p *Program, groups []optim.Group, o optim.Options) (*Solver, error) {
	if p.flags == nil {
		return nil, fmt.Errorf("program: the program has no gradients (compiled with NoGrad or without parameters)")
	}
	params := make([]optim.Param, len(p.params))
	for i, pv := range p.params {
		off := fmt.Errorf("program: the %s backend keeps parameter %q off the host, and has no optimizer of its own", p.be.Name(), pv.Node.Name())
		value, ok := hostSlice(pv.Value, pv.Size)
		if !ok {
			return nil, off
		}
		params[i] = optim.Param{Name: pv.Node.Name(), Shape: pv.v.shape, Constraint: pv.Constraint, Value: value}
		if pv.fa != nil {
			a, ok1 := hostSlice(pv.GradA, pv.fa.size)
			b, ok2 := hostSlice(pv.GradB, pv.fb.size)
			if !ok1 || !ok2 {
				return nil, off
			}
			params[i].GradA, params[i].GradB, params[i].GradK = a, b, pv.GradK
			continue
		}
		if params[i].Grad, ok = hostSlice(pv.Grad, pv.Size); !ok {
			return nil, off
		}
	}
	s, err := optim.NewSolver(params, groups, o)
	if err != nil {
		return nil, err
	}
	return &Solver{p: p, s: s}, nil
}

// hostSlice returns the n host elements at op, if its buffer is on the host.
func hostSlice(op backend.Operand, n int) (any, bool) {
	h, ok := op.Buf.(backend.HostBuffer)
	if !ok {
		return nil, false
	}
	switch d := h.Host().(type) {
	case []float32:
		return d[op.Off : op.Off+n], true
	case []float64:
		return d[op.Off : op.Off+n], true
	}
	return nil, false
}

// Step updates every parameter from the gradients of the program's last
// Run. A NaN or Inf gradient fails the step before any parameter moves,
// with an error naming the parameter and wrapping optim.ErrNotFinite; so
// does any other failure (every parameter and optimizer state stays as it
// was).
func (s *Solver) Step() error {
	if err := s.p.CheckGrads(); err != nil {
		return err
	}
	return s.s.StepChecked()
}

// SetLR sets the base step size of group i.
func (s *Solver) SetLR(group int, lr float64) error { return s.s.SetLR(group, lr) }

// LR returns the step size group i takes at the next Step.
func (s *Solver) LR(group int) float64 { return s.s.LR(group) }

// Steps returns the number of steps taken.
func (s *Solver) Steps() int { return s.s.Steps() }

// SetSteps sets the step count that drives the schedules.
func (s *Solver) SetSteps(n int) error { return s.s.SetSteps(n) }

// Params returns the name and shape of every parameter.
func (s *Solver) Params() []optim.ParamInfo { return s.s.Params() }

// State returns every parameter's optimizer state, for a checkpoint.
func (s *Solver) State() []optim.State { return s.s.State() }

// SetState restores states returned by State; on error nothing changes.
func (s *Solver) SetState(st []optim.State) error { return s.s.SetState(st) }
