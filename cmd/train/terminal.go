package main

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressBar is an epoch's progress bar on the terminal (stderr); nil,
// whose methods do nothing, where stdout is not a terminal: the run then
// prints plain lines (showProgress).
type progressBar struct{ pb *progressbar.ProgressBar }

// newBar starts the current epoch's progress bar at its batch, or returns
// nil where stdout is not a terminal.
func (t *trainer) newBar() *progressBar {
	// Under mpirun a rank's stdout is a pseudo-terminal even where
	// mpirun's own output goes to a file: several ranks print plain lines.
	if t.c.ranks() != 1 || !term.IsTerminal(int(os.Stdout.Fd())) {
		return nil
	}
	pb := progressbar.NewOptions(t.steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30),
		progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", t.st.Epoch+1, t.c.epochs)))
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
// bar or, without a terminal, as a line ten times an epoch.
func (t *trainer) showProgress(epoch int, win window) {
	rate := float64((t.st.Batch-t.firstBatch)*t.c.batch) / time.Since(t.epochStart).Seconds()
	desc := fmt.Sprintf("epoch %d/%d loss %.4f acc %.1f%% %.0f samples/s", epoch+1, t.c.epochs, win.Loss/float64(win.Count), 100*win.Accuracy/float64(win.Count), rate)
	if t.bar != nil {
		t.bar.pb.Describe(desc)
	} else if t.st.Step%max(1, t.steps/10) < t.logEvery {
		fmt.Fprintf(t.w, "%s (step %d/%d)\n", desc, t.st.Step, t.c.epochs*t.steps) // steps of the run, as metrics.csv counts them
	}
}
