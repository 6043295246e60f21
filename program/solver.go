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
	s solver
}

// solver is optim.Solver or optim.DeviceSolver, with the step a Solver
// takes and what it frees.
type solver interface {
	step() error
	close() error
	SetLR(group int, lr float64) error
	LR(group int) float64
	Steps() int
	SetSteps(n int) error
	Params() []optim.ParamInfo
	State() []optim.State
	SetState([]optim.State) error
}

// hostSolver is optim.Solver with the Step a Solver takes.
type hostSolver struct{ *optim.Solver }

func (h hostSolver) step() error  { return h.StepChecked() }
func (h hostSolver) close() error { return nil }

// deviceSolver is optim.DeviceSolver with the Step a Solver takes.
type deviceSolver struct{ *optim.DeviceSolver }

func (d deviceSolver) step() error  { return d.Step() }
func (d deviceSolver) close() error { return d.Close() }

// NewSolver returns a Solver over p's parameters, grouped by groups (see
// optim.NewSolver). On a backend whose buffers live on the host (the CPU
// backend) it steps optim's slice optimizers on the buffers themselves; on
// another (a GPU) it steps them on the device with optim.DeviceSolver,
// which takes fewer settings (see there). Close frees what it holds on the
// device.
func NewSolver(p *Program, groups []optim.Group, o optim.Options) (*Solver, error) {
	if p.flags == nil {
		return nil, fmt.Errorf("program: the program has no gradients (compiled with NoGrad or without parameters)")
	}
	if len(p.params) > 0 {
		if _, ok := p.params[0].Value.Buf.(backend.HostBuffer); !ok {
			return newDeviceSolver(p, groups, o)
		}
	}
	params := make([]optim.Param, len(p.params))
	for i, pv := range p.params {
		off := fmt.Errorf("program: the %s backend keeps parameter %q off the host", p.be.Name(), pv.Node.Name())
		value, ok := hostSlice(pv.Value, pv.Size)
		if !ok {
			return nil, off
		}
		params[i] = optim.Param{Name: pv.Node.Name(), Shape: pv.v.shape, Manifold: pv.Manifold, Value: value}
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
	return &Solver{p: p, s: hostSolver{s}}, nil
}

// newDeviceSolver returns a Solver that steps p's parameters on its device.
func newDeviceSolver(p *Program, groups []optim.Group, o optim.Options) (*Solver, error) {
	params := make([]optim.DeviceParam, len(p.params))
	for i, pv := range p.params {
		if pv.fa != nil {
			return nil, fmt.Errorf("program: parameter %q has a factored gradient, which the %s backend's optimizer does not take (compile without Config.FactorForRSDM)", pv.Node.Name(), p.be.Name())
		}
		params[i] = optim.DeviceParam{Name: pv.Node.Name(), Shape: pv.v.shape, Manifold: pv.Manifold, Value: pv.Value, Grad: pv.Grad}
	}
	s, err := optim.NewDeviceSolver(p.be, params, groups, o)
	if err != nil {
		return nil, err
	}
	return &Solver{p: p, s: deviceSolver{s}}, nil
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
	return s.s.step()
}

// Close frees what the Solver holds on the device (nothing on the host).
func (s *Solver) Close() error { return s.s.close() }

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
