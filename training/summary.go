package training

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/param"
)

// What a run says at its start and its end.

// announce prints what the run trains, how, and where it writes.
func (t *Trainer) announce() {
	c := t.c
	verb := "training"
	if t.resumed != nil {
		verb = fmt.Sprintf("resuming from %s at epoch %d, step %d:", t.resumePath, t.st.Epoch+1, t.st.Step)
	}
	what := c.Describe
	if what == "" {
		what = fmt.Sprintf("a model of %d parameters (%d constrained) on %d training and %d test examples of shape %v, batch %d, %d epochs",
			len(t.m.Params), len(param.Constrained(t.m.Params)), c.Train.Len(), t.testLen(), c.Train.Shape(), c.Batch, c.Epochs)
	}
	fmt.Fprintf(c.Log, "%s %s, BLAS %s\nrun folder: %s\n", verb, what, linalg.Backend(), t.RunDir())
	if n := c.ranks(); c.Comm != nil {
		fmt.Fprintf(c.Log, "data-parallel: rank 0 of %d, each training on %d rows of every batch of %d\n", n, c.shard(), c.Batch)
	}
}

// summary writes the metrics files and prints the run's outcome: the final
// test accuracy, skipped batches, feasibility and the last checkpoint; it
// fails when the accuracy is below MinAccuracy.
func (t *Trainer) summary(final Eval) error {
	c, w := t.c, t.c.Log
	t.writeOutputs()
	t.eng.report(w)
	t.trafficLine(w)
	if t.st.Skipped > 0 {
		fmt.Fprintf(w, "skipped %d batches with a non-finite loss or gradient (-nonfinite skip)\n", t.st.Skipped)
	}
	if t.ev.Logits != nil {
		fmt.Fprintf(w, "test accuracy: %.2f%%\n", 100*final.Accuracy)
	} else if t.testLen() > 0 {
		fmt.Fprintf(w, "test loss: %.4f\n", final.Loss)
	}
	if err := t.eng.store(); err != nil {
		return err
	}
	for _, p := range param.Constrained(t.m.Params) {
		fmt.Fprintf(w, "||W^T W - I||_F of %s: %.2e\n", p.Name(), Feasibility(p))
	}
	fmt.Fprintf(w, "checkpoint: %s\n", t.last)
	if c.MinAccuracy > 0 && 100*final.Accuracy < c.MinAccuracy {
		msg := fmt.Sprintf("test accuracy %.2f%% is below -min-accuracy %.2f%%", 100*final.Accuracy, c.MinAccuracy)
		return &SharedError{&cause{msg, ErrBelowAccuracy}}
	}
	return nil
}
