package program

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
)

// Accuracy names a classifier's outputs for Config.Accuracy: Logits, an
// output of the program (rows x classes), and Targets, an input of the same
// shape holding one-hot rows.
type Accuracy struct {
	Logits, Targets *G.Node
}

// Read is an output, parameter or input of a program and the host slice
// Collect copies its value into ([]float32 or []float64 of the node's type
// and size).
type Read struct {
	Node *G.Node
	Dst  any
}

// countCorrect adds Config.Accuracy's kernel at the end of the program.
func (c *compiler) countCorrect() error {
	a := c.cfg.Accuracy
	if a.Logits == nil {
		return nil
	}
	switch {
	case !slices.Contains(c.cfg.Outputs, a.Logits):
		return fmt.Errorf("program: Config.Accuracy: the logits %q are not an output", a.Logits.Name())
	case a.Targets == nil || !slices.Contains(c.cfg.Inputs, a.Targets):
		return fmt.Errorf("program: Config.Accuracy: the targets %v are not an input", a.Targets)
	}
	z, t := c.low.Values[a.Logits], c.low.Values[a.Targets]
	switch {
	case t == nil:
		return fmt.Errorf("program: Config.Accuracy: the outputs do not need the targets %q", a.Targets.Name())
	case len(z.Shape) != 2 || !z.Shape.Eq(t.Shape) || z.Buf.Type != t.Buf.Type:
		return fmt.Errorf("program: Config.Accuracy: logits %q of shape %v and %v, targets %q of %v and %v: want one matrix shape and type",
			a.Logits.Name(), z.Shape, z.Buf.Type, a.Targets.Name(), t.Shape, t.Buf.Type)
	}
	c.lowCorrect = c.low.NewBuffer(backend.Int32, 1, true, "correct predictions")
	c.low.Emit(backend.CountCorrect{Rows: z.Shape[0], Classes: z.Shape[1], Scores: z.Operand(), Targets: t.Operand(),
		Count: backend.At(c.lowCorrect, 0)})
	return nil
}

// Collect waits for the last Run and copies out, in one wait on a backend
// that makes several copies in one (backend.Reader: a GPU), the values of
// reads' nodes, the correct predictions Config.Accuracy counted (-1 without
// it), and the gradients' finite flags, which the next CheckGrads uses
// instead of reading them itself. A training step that reads its loss
// this way, then steps its Solver, waits for the device once.
func (p *Program) Collect(reads ...Read) (correct int, err error) {
	p.collect = p.collect[:0]
	for _, r := range reads {
		v, err := p.readVal(r.Node)
		if err != nil {
			return -1, err
		}
		if err := fitsRead(r.Node, v, r.Dst); err != nil {
			return -1, err
		}
		p.collect = append(p.collect, backend.Read{Dst: r.Dst, Src: v.vb.phys, Off: v.vb.physOff + v.off})
	}
	if p.correct != nil {
		p.collect = append(p.collect, backend.Read{Dst: p.correctAny, Src: p.correct})
	}
	if p.flags != nil {
		p.collect = append(p.collect, backend.Read{Dst: p.flagsAny, Src: p.flags})
	}
	err = backend.CopyOutAll(p.be, p.collect)
	clear(p.collect) // no reference to the caller's memory is kept
	if err != nil {
		return -1, err
	}
	p.flagsRead = p.flags != nil
	if p.correct == nil {
		return -1, nil
	}
	return int(p.correctHost[0]), nil
}
