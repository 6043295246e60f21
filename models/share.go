package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Share binds every node of dst to the value of the node at the same
// position in src, so that a copy of a network built on another graph (for
// example a forward-only evaluation graph) uses the original's tensors
// without copying them.
func Share(dst, src G.Nodes) error {
	if len(dst) != len(src) {
		return fmt.Errorf("models: sharing %d parameters with %d", len(dst), len(src))
	}
	for i, n := range dst {
		if !n.Shape().Eq(src[i].Shape()) || n.Dtype() != src[i].Dtype() {
			return fmt.Errorf("models: parameter %s is %v %v, its source %s is %v %v", n.Name(), n.Shape(), n.Dtype(), src[i].Name(), src[i].Shape(), src[i].Dtype())
		}
		if err := G.Let(n, src[i].Value()); err != nil {
			return fmt.Errorf("models: sharing %s: %w", n.Name(), err)
		}
	}
	return nil
}
