package training

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressBar is an epoch's progress bar on the terminal (stderr); nil,
// whose methods do nothing, where Config.Bar is off or stdout is not a
// terminal: the run then prints plain lines (showProgress).
type progressBar struct{ pb *progressbar.ProgressBar }

// newBar starts the current epoch's progress bar at its batch, or returns
// nil.
func (t *Trainer) newBar() *progressBar {
	// Under mpirun a rank's stdout is a pseudo-terminal even where
	// mpirun's own output goes to a file: several ranks print plain lines.
	if !t.c.Bar || t.c.ranks() != 1 || !term.IsTerminal(int(os.Stdout.Fd())) {
		return nil
	}
	pb := progressbar.NewOptions(t.steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetDescription(t.epochName(t.st.Epoch)))
	_ = pb.Set(t.st.Batch)
	return &progressBar{pb}
}

// add counts a step.
func (b *progressBar) add() {
	if b != nil {
		_ = b.pb.Add(1)
	}
}

// finish completes the bar and ends its line.
func (b *progressBar) finish() {
	if b != nil {
		_ = b.pb.Finish()
		fmt.Fprintln(os.Stderr)
	}
}

// showProgress shows the means of the training window win on the progress
// bar or, without one, as a line ten times an epoch.
func (t *Trainer) showProgress(epoch int, win Window) {
	rate := float64((t.st.Batch-t.firstBatch)*t.c.Batch) / time.Since(t.epochStart).Seconds()
	desc := fmt.Sprintf("%s loss %.4f", t.epochName(epoch), win.Loss/float64(win.Count))
	if t.m.Logits != nil {
		desc += fmt.Sprintf(" acc %.1f%%", 100*win.Accuracy/float64(win.Count))
	}
	desc += fmt.Sprintf(" %.0f samples/s", rate)
	if t.bar != nil {
		t.bar.pb.Describe(desc)
	} else if t.st.Step%max(1, t.steps/10) < t.logEvery {
		fmt.Fprintf(t.c.Log, "%s (step %d/%d)\n", desc, t.st.Step, t.totalSteps()) // steps of the run, as metrics.csv counts them
	}
}

// totalSteps returns the steps the whole run takes.
func (t *Trainer) totalSteps() int {
	n := t.c.Epochs * t.steps
	if t.c.MaxSteps > 0 {
		n = min(n, t.c.MaxSteps)
	}
	return n
}

// seconds returns the run's wall-clock time: that of its earlier sessions
// and this one's so far.
func (t *Trainer) seconds() float64 { return t.st.Seconds + time.Since(t.start).Seconds() }

// epochName names epoch (from 0) as "epoch k/N", or "epoch k" where
// MaxSteps ends the run first.
func (t *Trainer) epochName(epoch int) string {
	if t.c.MaxSteps > 0 && t.c.MaxSteps < t.c.Epochs*t.steps {
		return fmt.Sprintf("epoch %d", epoch+1)
	}
	return fmt.Sprintf("epoch %d/%d", epoch+1, t.c.Epochs)
}
