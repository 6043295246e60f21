package main

import (
	"fmt"

	"github.com/orthonet/orthonet/param"
)

// What a run says at its start and its end.

// announce prints what the run trains, how, and where it writes.
func (t *trainer) announce() {
	c := t.c
	verb := "training"
	if c.resumed != nil {
		verb = fmt.Sprintf("resuming from %s at epoch %d, step %d:", c.resume, t.st.Epoch+1, t.st.Step)
	}
	fmt.Fprintf(t.w, "%s %s on %s (%d train, %d test images of %dx%dx%d), %s/%s r=%d lr=%g, %s lr=%g, batch %d, %d epochs, BLAS %s\nrun folder: %s\n",
		verb, c.model, c.dataset, t.train.N, t.test.N, t.train.C, t.train.H, t.train.W, c.optim, c.sampling, c.r, c.lr, c.other, c.lrOther, c.batch, c.epochs, blasName, t.dirName())
	if n := c.ranks(); c.comm != nil {
		fmt.Fprintf(t.w, "data-parallel: rank 0 of %d, each training on %d rows of every batch of %d\n", n, c.shard(), c.batch)
	}
}

// summary writes the metrics files and prints the run's outcome: the final
// test accuracy, skipped batches, feasibility and the last checkpoint; it
// fails when the accuracy is below -min-accuracy.
func (t *trainer) summary(final metric) error {
	c, w := t.c, t.w
	writeOutputs(t.dir, t.st.Metrics, w)
	t.eng.report(w)
	t.trafficLine(w)
	if t.st.Skipped > 0 {
		fmt.Fprintf(w, "skipped %d batches with a non-finite loss or gradient (-nonfinite skip)\n", t.st.Skipped)
	}
	fmt.Fprintf(w, "test accuracy: %.2f%%\n", 100*final.Accuracy)
	for _, p := range param.Constrained(t.net.Params()) {
		fmt.Fprintf(w, "||W^T W - I||_F of %s: %.2e\n", p.Name(), feasibility(p))
	}
	fmt.Fprintf(w, "checkpoint: %s\n", t.last)
	if c.minAccuracy > 0 && 100*final.Accuracy < c.minAccuracy {
		return shared("test accuracy %.2f%% is below -min-accuracy %.2f%%", 100*final.Accuracy, c.minAccuracy)
	}
	return nil
}

// finished reports a resumed run that has trained all its epochs.
func (t *trainer) finished() {
	acc := ""
	for i := len(t.st.Metrics) - 1; i >= 0; i-- {
		if m := t.st.Metrics[i]; m.Kind == "test" {
			acc = fmt.Sprintf(", test accuracy %.2f%% (best %.2f%% at step %d)", 100*m.Accuracy, 100*t.st.Best, t.st.BestStep)
			break
		}
	}
	fmt.Fprintf(t.w, "%s: the run is finished: %d epochs done, step %d%s; nothing to do.\nTo train it further, resume with -epochs N, N larger than %d: train -resume %s -epochs %d\n",
		t.c.resume, t.st.Epoch, t.st.Step, acc, t.st.Epoch, t.c.resume, t.st.Epoch+1)
}
