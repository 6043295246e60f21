package main

import (
	"io"
	"math"
	"os"
	"testing"

	"github.com/orthonet/orthonet/internal/runtest"
	"github.com/orthonet/orthonet/training"
)

func TestMain(m *testing.M) { runtest.Main(m, run) }

// smallArgs trains a small LSTM for 40 steps on the CPU.
var smallArgs = []string{"-hidden", "24", "-r", "12", "-seq", "12", "-batch", "8", "-steps", "40", "-save-every", "10", "-device", "cpu"}

func TestInterruptThenResume(t *testing.T) {
	runtest.InterruptThenResume(t, 7, smallArgs...)
}

// TestFeasibleAfterRun checks the constrained weight's ||W^T W - I||_F
// after a run of the command's default length.
func TestFeasibleAfterRun(t *testing.T) {
	out := t.TempDir()
	if code := run([]string{"-out", out, "-hidden", "64", "-r", "32", "-device", "cpu"}, io.Discard, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	f, st := runtest.Final(t, out)
	var worst float64
	for _, r := range st.Metrics {
		if r.Kind == "test" && r.Feasibility != nil {
			worst = max(worst, *r.Feasibility)
		}
	}
	if len(f.Tensors) == 0 || !(worst < 1e-5) {
		t.Errorf("max ||W^T W - I||_F over the run's evaluations = %g, want < 1e-5", worst)
	}
	first, last := firstLast(st)
	if !(last < 0.8*first) {
		t.Errorf("test loss %.4f at the first evaluation, %.4f at the last: want a fall of 20%% or more", first, last)
	}
}

// firstLast returns the run's first and last test losses.
func firstLast(st training.Progress) (first, last float64) {
	first = math.NaN()
	for _, r := range st.Metrics {
		if r.Kind == "test" {
			if math.IsNaN(first) {
				first = r.Loss
			}
			last = r.Loss
		}
	}
	return first, last
}
