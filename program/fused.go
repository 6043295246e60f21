package program

import G "gorgonia.org/gorgonia"

// lowerFused lowers orthonet's fused ops (package fused); ok is false for
// any other op.
func (c *compiler) lowerFused(n *G.Node, in []*val) (ok bool, err error) {
	return false, nil
}
