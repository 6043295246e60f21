// Package param marks Gorgonia nodes as trainable parameters and records
// the manifold each lives on, in one place (as geoopt's ManifoldParameter
// does): layers create their weights as Params, and optimizers, compiled
// programs and checkpoints read the marking from them. Its Solver is
// package optim's Solver over parameters whose values and gradients live in
// Gorgonia nodes run by a tape machine.
package param

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/optim"
)

// Param is a trainable Gorgonia node and the manifold it lives on.
type Param struct {
	Node *G.Node
	// Manifold is the manifold the node's value lives on; nil for an
	// unconstrained parameter.
	Manifold optim.Manifold
}

// Plain marks n as an unconstrained parameter.
func Plain(n *G.Node) Param { return Param{Node: n} }

// OnStiefel marks n, an n x p matrix, as a point of the Stiefel manifold:
// orthonormal columns (W^T W = I) when n >= p, orthonormal rows
// (W W^T = I) when n < p.
func OnStiefel(n *G.Node) Param { return Param{Node: n, Manifold: optim.Stiefel{}} }

// OnGrassmann marks n, an n x p matrix with n >= p, as a point of the
// Grassmann manifold Gr(n,p).
func OnGrassmann(n *G.Node) Param { return Param{Node: n, Manifold: optim.Grassmann{}} }

// On marks n as a point of m: a manifold with settings of its own
// (optim.Stiefel{Retraction: manifold.Cayley}) or of one's own type.
func On(n *G.Node, m optim.Manifold) Param { return Param{Node: n, Manifold: m} }

// Orthonormalize puts the node's value on its manifold (see
// optim.Param.Orthonormalize): a weight initialized any other way becomes
// one the solvers accept.
func (p Param) Orthonormalize() error {
	op, err := Optim([]Param{p})
	if err != nil {
		return err
	}
	return op[0].Orthonormalize()
}

// Feasibility returns how far the node's value is from its manifold (see
// optim.Param.Feasibility): ||W^T W - I||_F of a Stiefel weight with
// orthonormal columns, ||W W^T - I||_F of a wide one.
func (p Param) Feasibility() (float64, error) {
	op, err := Optim([]Param{p})
	if err != nil {
		return 0, err
	}
	return op[0].Feasibility()
}

// Name returns the node's name.
func (p Param) Name() string { return p.Node.Name() }

// Constrained reports whether the parameter lives on a manifold.
func (p Param) Constrained() bool { return p.Manifold != nil }

// Nodes returns the nodes of ps, in order: what gorgonia.Grad and
// gorgonia.BindDualValues take.
func Nodes(ps []Param) G.Nodes {
	ns := make(G.Nodes, len(ps))
	for i, p := range ps {
		ns[i] = p.Node
	}
	return ns
}

// Constrained returns the parameters of ps that live on a manifold.
func Constrained(ps []Param) []Param {
	var out []Param
	for _, p := range ps {
		if p.Constrained() {
			out = append(out, p)
		}
	}
	return out
}

// Optim returns ps as package optim's parameters: each value is the slice
// behind its node's value, and each gradient is read through the node at
// every step (gorgonia.Grad and a tape machine run with BindDualValues
// bind it).
func Optim(ps []Param) ([]optim.Param, error) {
	out := make([]optim.Param, len(ps))
	for i, p := range ps {
		if p.Node == nil {
			return nil, fmt.Errorf("param: parameter %d has no node", i)
		}
		d, ok := p.Node.Value().(*tensor.Dense)
		if !ok || d == nil {
			return nil, fmt.Errorf("param: %q has no dense tensor value (give it one with gorgonia.WithValue or WithInit)", p.Name())
		}
		n := p.Node
		out[i] = optim.Param{Name: n.Name(), Shape: n.Shape().Clone(), Manifold: p.Manifold, Value: d.Data(),
			GradFunc: func() (any, error) { return gradOf(n) }}
	}
	return out, nil
}

// gradOf returns the slice behind a node's gradient.
func gradOf(n *G.Node) (any, error) {
	g, err := n.Grad()
	if err != nil {
		return nil, fmt.Errorf("%w (is the graph run by a tape machine with BindDualValues, after gorgonia.Grad?)", err)
	}
	d, ok := g.(*tensor.Dense)
	if !ok || d == nil {
		return nil, fmt.Errorf("gradient of %T, want a dense tensor", g)
	}
	return d.Data(), nil
}
