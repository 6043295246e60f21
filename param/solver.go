package param

import (
	"errors"

	"github.com/orthonet/orthonet/optim"
)

// Solver is optim's Solver over Gorgonia parameters run by a tape machine.
// It zeroes the gradients after every Step, failed or not, as Gorgonia's
// own solvers do: a tape machine adds each run's gradients to the bound
// ones. It implements checkpoint.Solver.
type Solver struct {
	s *optim.Solver
}

// NewSolver returns a Solver over ps, grouped by groups (see
// optim.NewSolver); every constrained weight is checked here.
func NewSolver(ps []Param, groups []optim.Group, o optim.Options) (*Solver, error) {
	op, err := Optim(ps)
	if err != nil {
		return nil, err
	}
	s, err := optim.NewSolver(op, groups, o)
	if err != nil {
		return nil, err
	}
	return &Solver{s: s}, nil
}

// Step updates every parameter from its gradient (see optim.Solver.Step),
// then zeroes the gradients.
func (s *Solver) Step() error {
	err := s.s.Step()
	if zerr := s.s.ZeroGrad(); zerr != nil {
		return errors.Join(err, zerr)
	}
	return err
}

// ZeroGrad sets every gradient to zero.
func (s *Solver) ZeroGrad() error { return s.s.ZeroGrad() }

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
