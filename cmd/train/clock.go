package main

import (
	"fmt"
	"time"
)

// The clocks of a run: its wall-clock seconds, and its training clock, the
// time spent in steps only (trainStep adds each step's), which every rank
// reads as rank 0's and which -time-limit and -eval-interval go by.

// seconds returns the run's wall-clock time: that of its earlier sessions
// and this one's so far.
func (t *trainer) seconds() float64 { return t.st.Seconds + time.Since(t.start).Seconds() }

// syncClock sets every rank's training clock to rank 0's, which
// -time-limit and -eval-interval read: the ranks evaluate and stop at the
// same step.
func (t *trainer) syncClock() error {
	if t.c.ranks() == 1 {
		return nil
	}
	t.sync[0] = t.st.TrainSeconds
	if err := t.c.comm.Broadcast64(t.sync[:1], 0); err != nil {
		return fmt.Errorf("broadcast of the training clock: %w", err)
	}
	t.st.TrainSeconds = t.sync[0]
	return nil
}

// timed makes the evaluations that -eval-interval asks for at this much
// training time and, once -time-limit is reached, evaluates, saves a
// checkpoint and reports stop with that evaluation.
func (t *trainer) timed(epoch int) (m metric, stop bool, err error) {
	c := t.c
	due := false
	if iv := c.evalInterval.Seconds(); iv > 0 {
		for t.st.TrainSeconds >= float64(t.st.TimedEvals+1)*iv {
			t.st.TimedEvals++
			due = true
		}
	}
	up := c.timeLimit > 0 && t.st.TrainSeconds >= c.timeLimit.Seconds()
	if !due && !up {
		return metric{}, false, nil
	}
	if m, err = t.evaluate(epoch); err != nil {
		return m, false, err
	}
	best := t.noteBest(m)
	if !up {
		if best {
			return m, false, t.save(true)
		}
		return m, false, nil
	}
	t.timeUp = true
	fmt.Fprintf(t.w, "time limit: %v of training reached at epoch %d, step %d\n", c.timeLimit, epoch+1, t.st.Step)
	return m, true, t.save(best)
}
