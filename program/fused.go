package program

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/fused"
)

// lowerFused lowers an op that carries its own lowering (fused.Lowering:
// orthonet's fused ops, and any other that implements it) to its kernel;
// ok is false for any other op.
func (c *compiler) lowerFused(n *G.Node, in []*val) (ok bool, err error) {
	op, ok := n.Op().(fused.Lowering)
	if !ok {
		return false, nil
	}
	out, err := c.newVal(n, false)
	if err != nil {
		return true, err
	}
	shapes, args := make([][]int, len(in)), make([]backend.Operand, len(in))
	for i, v := range in {
		shapes[i], args[i] = v.shape, v.operand()
	}
	k := op.Kernel(shapes, args, out.operand())
	if err := k.Check(); err != nil {
		return true, fmt.Errorf("%v: %w", op, err)
	}
	c.emit(k)
	return true, nil
}
