package training

import (
	"context"
	"fmt"
	"time"
)

// The training loop: epochs of steps, each step a batch trained on, with
// the evaluations and checkpoints due after it.

// run trains the remaining epochs and writes the summary.
func (t *Trainer) run(ctx context.Context) (Eval, error) {
	t.begin()
	t.announce()
	t.start, t.clock0 = time.Now(), t.st.TrainSeconds
	final := t.lastEval()
	if c := t.c; c.TimeLimit > 0 && t.st.TrainSeconds >= c.TimeLimit.Seconds() {
		fmt.Fprintf(c.Log, "the run has trained %.1f s, its time limit of %v: nothing to do; resume with a larger time limit to go on\n", t.st.TrainSeconds, c.TimeLimit)
		return final, nil
	}
	if t.stepsDone() {
		fmt.Fprintf(t.c.Log, "the run has taken %d steps, its step limit: nothing to do; resume with a larger one to go on\n", t.st.Step)
		return final, nil
	}
	for t.st.Epoch < t.c.Epochs && !t.timeUp && !t.stepsDone() {
		m, err := t.epoch(ctx)
		if err != nil {
			return m, err
		}
		final = m
	}
	return final, t.summary(final)
}

// lastEval returns the newest evaluation on the test set the run recorded.
func (t *Trainer) lastEval() Eval {
	if n := len(t.st.Metrics); n > 0 && t.st.Metrics[n-1].Kind == "test" {
		return t.st.Metrics[n-1].eval()
	}
	return Eval{Loss: nan()}
}

// begin sets the loop's state for this session: the steps of an epoch,
// how often it logs and evaluates, and the batch's buffers.
func (t *Trainer) begin() {
	c := t.c
	t.steps = c.Train.Len() / c.Batch // the last partial batch is dropped
	t.logEvery = max(1, t.steps/100)
	t.evalEvery = c.EvalEvery
	if t.evalEvery == 0 { // auto: ten evaluations an epoch, so that the accuracy panel is a curve
		t.evalEvery = max(1, t.steps/10)
	}
	if c.Test == nil {
		t.evalEvery = -1
	}
}

// epoch trains the rest of the current epoch, then evaluates on the whole
// test set and saves a checkpoint; it returns that evaluation.
func (t *Trainer) epoch(ctx context.Context) (Eval, error) {
	epoch := t.st.Epoch
	if err := t.beginEpoch(); err != nil {
		return Eval{}, err
	}
	for t.st.Batch < t.steps {
		if stop, err := t.anyRank(ctx.Err() != nil); err != nil || stop {
			if err == nil {
				err = t.interrupted(ctx)
			}
			return Eval{}, err
		}
		if err := t.trainStep(epoch); err != nil {
			return Eval{}, err
		}
		if err := t.midEpoch(); err != nil {
			return Eval{}, err
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
func (t *Trainer) beginEpoch() error {
	if err := t.loader.Seek(t.st.Epoch, t.st.Batch*t.c.Batch); err != nil {
		return err
	}
	if t.st.Batch == 0 {
		t.st.Window = Window{}
	}
	t.bar = t.newBar()
	t.epochStart, t.firstBatch = time.Now(), t.st.Batch
	return nil
}

// trainStep takes the next step, its time on the training clock, and
// counts it; a batch that Skip drops counts as a step.
func (t *Trainer) trainStep(epoch int) error {
	t0 := time.Now()
	lv, acc, bad, err := t.step(epoch)
	t.st.TrainSeconds += time.Since(t0).Seconds()
	if err != nil && (bad == nil || t.c.NonFinite != Skip) {
		return err
	}
	if err := t.syncClock(); err != nil {
		return err
	}
	t.st.Batch++
	t.st.Step++
	t.taken++
	t.tally(epoch, lv, acc, bad)
	if err != nil { // Skip: too many batches in a row
		t.writeOutputs()
		return err
	}
	t.bar.add()
	if cb := t.c.Callbacks.OnStep; cb != nil {
		if err := call("OnStep", func() error { return cb(t.stepInfo(lv, acc, bad != nil)) }); err != nil {
			t.writeOutputs()
			return err
		}
	}
	return nil
}

// step trains on the next batch: it returns the training loss and accuracy
// of the batch, or in bad why the step was not taken (a non-finite loss or
// gradient that Skip drops). err ends the run.
func (t *Trainer) step(epoch int) (lv, acc float64, bad, err error) {
	labels, err := t.nextBatch(epoch)
	if err != nil {
		return 0, 0, nil, err
	}
	lv, correct, err := t.eng.run(t.st.Step)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("step %d: %w", t.st.Step, err)
	}
	if acc, err = t.batchAccuracy(correct, labels); err != nil {
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

// batchAccuracy returns the accuracy of the batch of labels: the count the
// engine made, or the logits' read back (0 for a model without logits).
func (t *Trainer) batchAccuracy(correct int, labels []int) (float64, error) {
	switch {
	case correct >= 0:
		return float64(correct) / float64(len(labels)), nil
	case t.m.Logits == nil:
		return 0, nil
	}
	z, err := t.eng.trainLogits()
	if err != nil {
		return 0, err
	}
	return accuracyOf(z, labels, t.classes)
}

// nextBatch reads the next global batch and puts this rank's rows of it
// into the model's inputs; it returns those labels.
func (t *Trainer) nextBatch(epoch int) ([]int, error) {
	n, err := t.loader.Next(t.images, t.labels)
	if err != nil {
		return nil, fmt.Errorf("epoch %d, batch %d: %w", epoch+1, t.st.Batch, err)
	}
	if n < t.c.Batch {
		return nil, fmt.Errorf("epoch %d: batch %d holds %d examples, want %d", epoch+1, t.st.Batch, n, t.c.Batch)
	}
	if err := checkLabels(t.labels[:n], t.classes); err != nil {
		return nil, fmt.Errorf("epoch %d, batch %d: %w", epoch+1, t.st.Batch, err)
	}
	return t.feed(t.st.Step)
}

// checkLabels refuses a label outside [0, classes).
func checkLabels(labels []int, classes int) error {
	for i, y := range labels {
		if y < 0 || (classes > 0 && y >= classes) {
			return fmt.Errorf("training: the data set gave label %d for the batch's example %d, outside [0, %d)", y, i, classes)
		}
	}
	return nil
}

// midEpoch evaluates on the test subset every evalEvery steps and saves a
// checkpoint every SaveEvery steps, except after an epoch's last batch,
// which the epoch's end evaluates and saves.
func (t *Trainer) midEpoch() error {
	if t.st.Batch >= t.steps {
		return nil
	}
	save := t.c.SaveEvery > 0 && t.st.Step%t.c.SaveEvery == 0
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
// one has just been made, and saves the epoch's checkpoint.
func (t *Trainer) endEpoch(epoch int) (Eval, error) {
	var m Eval
	var err error
	if n := len(t.st.Metrics); n > 0 && t.st.Metrics[n-1].Kind == "test" && t.st.Metrics[n-1].Step == t.st.Step && t.st.Metrics[n-1].Examples == t.testLen() {
		m = t.st.Metrics[n-1].eval()
	} else if m, err = t.evaluate(epoch); err != nil {
		return m, err
	}
	best := t.noteBest(m)
	t.st.Epoch, t.st.Batch = epoch+1, 0
	return m, t.save(best)
}

// timed makes the evaluations that EvalInterval asks for at this much
// training time and, once TimeLimit or MaxSteps is reached, evaluates,
// saves a checkpoint and reports stop with that evaluation.
func (t *Trainer) timed(epoch int) (m Eval, stop bool, err error) {
	c := t.c
	due := false
	if iv := c.EvalInterval.Seconds(); iv > 0 {
		for t.st.TrainSeconds >= float64(t.st.TimedEvals+1)*iv {
			t.st.TimedEvals++
			due = true
		}
	}
	timeUp := c.TimeLimit > 0 && t.st.TrainSeconds >= c.TimeLimit.Seconds()
	stepsUp := c.MaxSteps > 0 && t.st.Step >= c.MaxSteps && t.st.Batch < t.steps
	if !due && !timeUp && !stepsUp {
		return Eval{}, false, nil
	}
	if m, err = t.evaluate(epoch); err != nil {
		return m, false, err
	}
	best := t.noteBest(m)
	if !timeUp && !stepsUp {
		if best {
			return m, false, t.save(true)
		}
		return m, false, nil
	}
	t.timeUp = true
	if timeUp {
		fmt.Fprintf(c.Log, "time limit: %v of training reached at epoch %d, step %d\n", c.TimeLimit, epoch+1, t.st.Step)
	} else {
		fmt.Fprintf(c.Log, "step limit: %d steps reached at epoch %d\n", c.MaxSteps, epoch+1)
	}
	return m, true, t.save(best)
}

// stepsDone reports whether the run has taken its MaxSteps.
func (t *Trainer) stepsDone() bool { return t.c.MaxSteps > 0 && t.st.Step >= t.c.MaxSteps }
