// Package param marks Gorgonia nodes as trainable parameters and records
// the manifold each lives on, in one place (as geoopt's ManifoldParameter
// does): layers create their weights as Params, and optimizers, compiled
// programs and checkpoints read the marking from them. It knows the kinds of
// manifold (package manifold) but not the optimizers: package paramopt
// builds package optim's Solver over Params.
package param

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
)

// Param is a trainable Gorgonia node and the manifold it lives on.
type Param struct {
	Node *G.Node
	// Manifold is the kind of manifold the node's value lives on; nil for
	// an unconstrained parameter.
	Manifold manifold.Kind
}

// Plain marks n as an unconstrained parameter.
func Plain(n *G.Node) Param { return Param{Node: n} }

// OnStiefel marks n, an n x p matrix, as a point of the Stiefel manifold:
// orthonormal columns (W^T W = I) when n >= p, orthonormal rows
// (W W^T = I) when n < p.
func OnStiefel(n *G.Node) Param { return Param{Node: n, Manifold: manifold.StiefelKind{}} }

// OnGrassmann marks n, an n x p matrix with n >= p, as a point of the
// Grassmann manifold Gr(n,p).
func OnGrassmann(n *G.Node) Param { return Param{Node: n, Manifold: manifold.GrassmannKind{}} }

// On marks n as a point of m: a manifold with settings of its own
// (manifold.StiefelKind{Retraction: manifold.Cayley}) or of one's own type.
func On(n *G.Node, m manifold.Kind) Param { return Param{Node: n, Manifold: m} }

// Orthonormalize puts the node's value on its manifold (see
// manifold.Orthonormalize): a weight initialized any other way becomes
// one the solvers accept.
func (p Param) Orthonormalize() error {
	v, rows, cols, err := p.matrix()
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case []float32:
		err = manifold.Orthonormalize(p.Manifold, rows, cols, v)
	case []float64:
		err = manifold.Orthonormalize(p.Manifold, rows, cols, v)
	}
	if err != nil {
		return fmt.Errorf("param: weight %q: %w", p.Name(), err)
	}
	return nil
}

// Feasibility returns how far the node's value is from its manifold (see
// manifold.Feasibility): ||W^T W - I||_F of a Stiefel weight with
// orthonormal columns, ||W W^T - I||_F of a wide one.
func (p Param) Feasibility() (float64, error) {
	v, rows, cols, err := p.matrix()
	if err != nil {
		return 0, err
	}
	var f float64
	switch v := v.(type) {
	case []float32:
		f, err = manifold.Feasibility(p.Manifold, rows, cols, v)
	case []float64:
		f, err = manifold.Feasibility(p.Manifold, rows, cols, v)
	}
	if err != nil {
		return 0, fmt.Errorf("param: weight %q: %w", p.Name(), err)
	}
	return f, nil
}

// matrix returns the slice behind the value of a constrained weight, a
// []float32 or []float64, and the shape of its matrix view
// (manifold.MatrixOf), or why it has none.
func (p Param) matrix() (v any, rows, cols int, err error) {
	if p.Node == nil {
		return nil, 0, 0, fmt.Errorf("param: parameter has no node")
	}
	d, ok := p.Node.Value().(*tensor.Dense)
	if !ok || d == nil {
		return nil, 0, 0, fmt.Errorf("param: %q has no dense tensor value (give it one with gorgonia.WithValue or WithInit)", p.Name())
	}
	v = d.Data()
	switch v.(type) {
	case []float32, []float64:
	default:
		return nil, 0, 0, fmt.Errorf("param: parameter %q: value %T, want []float32 or []float64", p.Name(), v)
	}
	if p.Manifold == nil {
		return nil, 0, 0, fmt.Errorf("param: parameter %q is not constrained", p.Name())
	}
	shape := p.Node.Shape()
	rows, cols, ok = manifold.MatrixOf(shape)
	if !ok {
		return nil, 0, 0, fmt.Errorf("param: weight %q: marked as constrained but has shape %v, want a matrix or a tensor of 3 or more axes (a convolution kernel, taken as a matrix of its first axis by the rest)", p.Name(), shape)
	}
	if n := d.DataSize(); n != rows*cols {
		return nil, 0, 0, fmt.Errorf("param: weight %q of shape %v: value has %d entries", p.Name(), shape, n)
	}
	return v, rows, cols, nil
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
