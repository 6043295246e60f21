package program

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// Solver updates a compiled program's parameters where they live, from the
// gradients of its last Run: RSDM or RGD on the constrained weights, SGD or
// Adam on the rest, as optim.Solver does. It implements checkpoint.Solver.
type Solver struct {
	p *Program
	s *optim.Solver
}

// NewSolver returns a Solver over p's parameters. On a backend whose
// buffers live on the host (the CPU backend) it steps optim's slice
// optimizers on the buffers themselves.
func NewSolver(p *Program, cfg optim.SolverConfig) (*Solver, error) {
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
	s, err := optim.NewSliceSolver(params, cfg)
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

// SetLR changes the step sizes of the constrained weights and of the other
// parameters.
func (s *Solver) SetLR(constrained, other float64) error { return s.s.SetLR(constrained, other) }

// Params returns the name and shape of every parameter.
func (s *Solver) Params() []optim.ParamInfo { return s.s.Params() }

// State returns every parameter's optimizer state, for a checkpoint.
func (s *Solver) State() []optim.State { return s.s.State() }

// SetState restores states returned by State; on error nothing changes.
func (s *Solver) SetState(st []optim.State) error { return s.s.SetState(st) }
