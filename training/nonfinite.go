package training

import (
	"errors"
	"fmt"
	"math"

	"github.com/orthonet/orthonet/optim"
)

// The non-finite policy (Config.NonFinite): a batch whose loss or gradient
// is NaN or Inf moves nothing; Stop ends the run there, Skip drops the
// batch and goes on, up to MaxSkipRun in a row.

// update steps the optimizer on the batch whose loss is lv, unless that
// loss or the gradients are not finite: then bad says which, and nothing
// moved. err is any other failure, which ends the run.
func (t *Trainer) update(lv float64) (bad, err error) {
	if math.IsNaN(lv) || math.IsInf(lv, 0) {
		t.eng.discard()
		return fmt.Errorf("the training loss is %v", lv), nil
	}
	if err := t.solver.Step(); errors.Is(err, optim.ErrNotFinite) {
		return err, nil // on every rank: the Solver fails a step on all ranks together
	} else if err != nil {
		return nil, fmt.Errorf("step %d: %w", t.st.Step, err)
	}
	return nil, nil
}

// skip handles a step whose loss or gradient was not finite (why): Stop
// ends the run, Skip counts the batch, which moved nothing, and goes on
// unless MaxSkipRun batches in a row were skipped.
func (t *Trainer) skip(why error, epoch int) error {
	// Steps are named as metrics.csv counts them: the n-th step is step n.
	where := fmt.Sprintf("epoch %d, step %d", epoch+1, t.st.Step+1)
	if t.c.NonFinite == Stop {
		t.writeOutputs()
		msg := fmt.Sprintf("%s: %v; stopping rather than training on garbage (try a smaller -lr or -lr-other, or -nonfinite skip to drop such batches)", where, why)
		if t.last != "" {
			msg += "; the last checkpoint is " + t.last
		}
		return shared("%s", msg)
	}
	t.st.Skipped++
	t.st.SkipRun++
	fmt.Fprintf(t.c.Log, "%s: %v; skipping the batch (nothing was updated)\n", where, why)
	if t.st.SkipRun >= MaxSkipRun {
		return shared("%s: %d batches in a row had a non-finite loss or gradient; stopping (try a smaller -lr or -lr-other)", where, t.st.SkipRun)
	}
	return nil
}
