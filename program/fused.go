package program

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/fused"
)

// lowerFused lowers an op that carries its own lowering (fused.Lowering:
// orthonet's fused ops, and any other that implements it) to its kernel.
func (c *compiler) lowerFused(n *G.Node, in []*val, out *val) error {
	op := n.Op().(fused.Lowering)
	shapes, args := make([][]int, len(in)), make([]backend.Operand, len(in))
	for i, v := range in {
		shapes[i], args[i] = v.shape, v.operand()
	}
	k := op.Kernel(shapes, args, out.operand())
	if err := k.Check(); err != nil {
		return fmt.Errorf("%v: %w", op, err)
	}
	c.emit(k)
	return nil
}
