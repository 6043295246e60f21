package lower

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/fused"
)

// lowerFused lowers an op that carries its own lowering (fused.Lowering:
// orthonet's fused ops, and any other that implements it) to its kernel.
func (l *Lowering) lowerFused(n *G.Node, in []*Value, out *Value) error {
	op := n.Op().(fused.Lowering)
	shapes, args := make([][]int, len(in)), make([]backend.Operand, len(in))
	for i, v := range in {
		shapes[i], args[i] = v.Shape, v.Operand()
	}
	k := op.Kernel(shapes, args, out.Operand())
	if err := k.Check(); err != nil {
		return fmt.Errorf("%v: %w", op, err)
	}
	l.Emit(k)
	return nil
}
