package main

import (
	"context"
	"fmt"
	"time"
)

// The training loop: epochs of steps, each step a batch trained on, with
// the evaluations and checkpoints due after it.

// run trains the remaining epochs and prints the summary.
func (t *trainer) run(ctx context.Context) error {
	if t.done {
		t.finished()
		return nil
	}
	t.begin()
	t.announce()
	t.start, t.clock0 = time.Now(), t.st.TrainSeconds
	var final metric
	if n := len(t.st.Metrics); n > 0 && t.st.Metrics[n-1].Kind == "test" {
		final = t.st.Metrics[n-1]
	}
	if c := t.c; c.timeLimit > 0 && t.st.TrainSeconds >= c.timeLimit.Seconds() {
		fmt.Fprintf(t.w, "the run has trained %.1f s, its -time-limit of %v: nothing to do; resume with a larger -time-limit to go on\n", t.st.TrainSeconds, c.timeLimit)
		return nil
	}
	for t.st.Epoch < t.c.epochs && !t.timeUp {
		m, err := t.epoch(ctx)
		if err != nil {
			return err
		}
		final = m
	}
	return t.summary(final)
}

// begin sets the loop's state for this session: the steps of an epoch,
// how often it logs and evaluates, and the batch's buffers.
func (t *trainer) begin() {
	c := t.c
	t.steps = t.train.N / c.batch // the last partial batch is dropped
	t.logEvery = max(1, t.steps/100)
	t.evalEvery = c.evalEvery
	if t.evalEvery == 0 { // auto: ten evaluations an epoch, so that the accuracy panel is a curve
		t.evalEvery = max(1, t.steps/10)
	}
	t.images = make([]float32, c.batch*t.train.Dim())
	t.labels = make([]int, c.batch)
}

// epoch trains the rest of the current epoch, then evaluates on the whole
// test set and saves a checkpoint; it returns that evaluation.
func (t *trainer) epoch(ctx context.Context) (metric, error) {
	epoch := t.st.Epoch
	if err := t.beginEpoch(); err != nil {
		return metric{}, err
	}
	for t.st.Batch < t.steps {
		if stop, err := t.stopRequested(ctx); err != nil || stop {
			if err == nil {
				err = t.interrupted(ctx)
			}
			return metric{}, err
		}
		if err := t.trainStep(epoch); err != nil {
			return metric{}, err
		}
		if err := t.midEpoch(); err != nil {
			return metric{}, err
		}
		if m, stop, err := t.timed(epoch); err != nil || stop {
			t.bar.finish()
			return m, err
		}
	}
	t.bar.finish()
	return t.endEpoch(epoch)
}

// beginEpoch puts the loader where the epoch stands and starts its
// progress bar.
func (t *trainer) beginEpoch() error {
	if err := t.loader.Seek(t.st.Epoch, t.st.Batch*t.c.batch); err != nil {
		return err
	}
	if t.st.Batch == 0 {
		t.st.Window = window{}
	}
	t.bar = t.newBar()
	t.epochStart, t.firstBatch = time.Now(), t.st.Batch
	return nil
}

// trainStep takes the next step, its time on the training clock, and
// counts it; a batch that -nonfinite skip drops counts as a step.
func (t *trainer) trainStep(epoch int) error {
	t0 := time.Now()
	lv, acc, bad, err := t.step(epoch)
	t.st.TrainSeconds += time.Since(t0).Seconds()
	if err != nil && (bad == nil || t.c.nonFinite != "skip") {
		return err
	}
	if err := t.syncClock(); err != nil {
		return err
	}
	t.st.Batch++
	t.st.Step++
	t.taken++
	t.tally(epoch, lv, acc, bad)
	if err != nil { // -nonfinite skip: too many batches in a row
		writeOutputs(t.dir, t.st.Metrics, t.w)
		return err
	}
	t.bar.add()
	return nil
}

// step trains on the next batch: it returns the training loss and accuracy
// of the batch, or in bad why the step was not taken (a non-finite loss or
// gradient that -nonfinite skip drops). err ends the run.
func (t *trainer) step(epoch int) (lv, acc float64, bad, err error) {
	labels, err := t.nextBatch(epoch)
	if err != nil {
		return 0, 0, nil, err
	}
	lv, acc, err = t.eng.run(t.st.Step, labels)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("step %d: %w", t.st.Step, err)
	}
	// Every rank sees the global batch's loss, so all skip or step alike.
	if lv, acc, err = t.batchMean(lv, acc); err != nil {
		return 0, 0, nil, err
	}
	if bad, err = t.update(lv); err != nil {
		return 0, 0, nil, err
	}
	if bad != nil {
		return lv, 0, bad, t.skip(bad, epoch)
	}
	t.st.SkipRun = 0
	return lv, acc, nil, nil
}

// midEpoch evaluates on the test subset every evalEvery steps and saves a
// checkpoint every -save-every steps, except after an epoch's last batch,
// which the epoch's end evaluates and saves.
func (t *trainer) midEpoch() error {
	if t.st.Batch >= t.steps {
		return nil
	}
	save := t.c.saveEvery > 0 && t.st.Step%t.c.saveEvery == 0
	if t.evalEvery > 0 && t.st.Step%t.evalEvery == 0 {
		_, err := t.evaluateAndSave(save)
		return err
	}
	if save {
		return t.save(false)
	}
	return nil
}

// endEpoch ends an epoch with an evaluation on the whole test set, unless
// -eval-interval has just made it, and saves the epoch's checkpoint.
func (t *trainer) endEpoch(epoch int) (metric, error) {
	var m metric
	var err error
	if n := len(t.st.Metrics); n > 0 && t.st.Metrics[n-1].Kind == "test" && t.st.Metrics[n-1].Step == t.st.Step && t.st.Metrics[n-1].Examples == t.test.N {
		m = t.st.Metrics[n-1]
	} else if m, err = t.evaluate(epoch); err != nil {
		return m, err
	}
	best := t.noteBest(m)
	t.st.Epoch, t.st.Batch = epoch+1, 0
	return m, t.save(best)
}
