// Package paramopt trains Gorgonia parameters (package param) with package
// optim: Params gives optim's view of them, and NewSolver the Solver over
// them that a tape machine's graph steps. It is the glue that sits above
// both, so that neither the layers nor the optimizers import the other:
// param and nn know the manifolds (package manifold) but not the
// optimizers, and optim knows nothing of Gorgonia.
package paramopt

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// Params returns ps as package optim's parameters: each value is the slice
// behind its node's value, and each gradient is read through the node at
// every step (gorgonia.Grad and a tape machine run with BindDualValues
// bind it).
func Params(ps []param.Param) ([]optim.Param, error) {
	out := make([]optim.Param, len(ps))
	for i, p := range ps {
		if p.Node == nil {
			return nil, fmt.Errorf("paramopt: parameter %d has no node", i)
		}
		d, ok := p.Node.Value().(*tensor.Dense)
		if !ok || d == nil {
			return nil, fmt.Errorf("paramopt: %q has no dense tensor value (give it one with gorgonia.WithValue or WithInit)", p.Name())
		}
		v, err := hostOf(d)
		if err != nil {
			return nil, fmt.Errorf("paramopt: value of %q: %w", p.Name(), err)
		}
		n := p.Node
		out[i] = optim.Param{Name: n.Name(), Shape: n.Shape().Clone(), Manifold: p.Manifold, Value: v,
			GradFunc: func() (optim.Value, error) { return gradOf(n) }}
	}
	return out, nil
}

// hostOf returns the slice behind a dense tensor as an optim.Host.
func hostOf(d *tensor.Dense) (optim.Value, error) {
	switch s := d.Data().(type) {
	case []float32:
		return optim.Host[float32](s), nil
	case []float64:
		return optim.Host[float64](s), nil
	}
	return nil, fmt.Errorf("a tensor of %v, want float32 or float64", d.Dtype())
}

// gradOf returns the slice behind a node's gradient.
func gradOf(n *G.Node) (optim.Value, error) {
	g, err := n.Grad()
	if err != nil {
		return nil, fmt.Errorf("%w (is the graph run by a tape machine with BindDualValues, after gorgonia.Grad?)", err)
	}
	d, ok := g.(*tensor.Dense)
	if !ok || d == nil {
		return nil, fmt.Errorf("gradient of %T, want a dense tensor", g)
	}
	return hostOf(d)
}

// NewSolver returns optim's Solver over ps, Gorgonia parameters run by a
// tape machine, grouped by groups (see optim.NewSolver; every constrained
// weight is checked there). Its Step zeroes the gradients after every
// step, failed or not, as Gorgonia's own solvers do: a tape machine adds
// each run's gradients to the bound ones. It implements checkpoint.Solver.
func NewSolver(ps []param.Param, groups []optim.Group, o optim.Options) (*optim.Solver, error) {
	op, err := Params(ps)
	if err != nil {
		return nil, err
	}
	o.ZeroGrad = true
	return optim.NewSolver(op, groups, o)
}
