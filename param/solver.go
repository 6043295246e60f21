package param

import (
	"github.com/orthonet/orthonet/optim"
)

// NewSolver returns optim's Solver over ps, Gorgonia parameters run by a
// tape machine, grouped by groups (see optim.NewSolver; every constrained
// weight is checked there). Its Step zeroes the gradients after every
// step, failed or not, as Gorgonia's own solvers do: a tape machine adds
// each run's gradients to the bound ones. It implements checkpoint.Solver.
func NewSolver(ps []Param, groups []optim.Group, o optim.Options) (*optim.Solver, error) {
	op, err := Optim(ps)
	if err != nil {
		return nil, err
	}
	o.ZeroGrad = true
	return optim.NewSolver(op, groups, o)
}
