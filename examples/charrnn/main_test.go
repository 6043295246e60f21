package main

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/orthonet/orthonet/internal/mpitest"
	"github.com/orthonet/orthonet/internal/runtest"
	"github.com/orthonet/orthonet/training"
)

func TestMain(m *testing.M) {
	if os.Getenv(runtest.MainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// smallArgs trains a small LSTM for 40 steps on the CPU.
var smallArgs = []string{"-hidden", "24", "-r", "12", "-seq", "12", "-batch", "8", "-steps", "40", "-save-every", "10", "-device", "cpu"}

func TestInterruptThenResume(t *testing.T) {
	runtest.InterruptThenResume(t, 7, smallArgs...)
}

// TestFeasibleAfterRun checks the constrained weight's ||W^T W - I||_F
// after a run of the command's default length.
func TestFeasibleAfterRun(t *testing.T) {
	out := t.TempDir()
	if code := run([]string{"-out", out, "-hidden", "64", "-r", "32", "-device", "cpu"}, devNull(t), os.Stderr); code != 0 {
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

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestMPIMatchesOneProcess trains 20 steps with 2 MPI ranks and with one
// process: every loss the runs log agrees to a relative 1e-5.
func TestMPIMatchesOneProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-hidden", "24", "-r", "12", "-seq", "12", "-batch", "8", "-steps", "20", "-device", "cpu"}
	one, two := t.TempDir(), t.TempDir()
	if out, err := runtest.Command(ctx, append(args, "-out", one)...).CombinedOutput(); err != nil {
		t.Fatalf("one process: %v\n%s", err, out)
	}
	cmd := mpitest.Command(t, ctx, 2, []string{runtest.MainEnv + "=1"}, append(args, "-dist", "mpi", "-out", two)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mpirun -np 2: %v\n%s", err, out)
	}
	_, pa := runtest.Final(t, one)
	_, pb := runtest.Final(t, two)
	if len(pa.Metrics) != len(pb.Metrics) || pa.Step != 20 || pb.Step != 20 {
		t.Fatalf("one process: %d rows, step %d; 2 ranks: %d rows, step %d", len(pa.Metrics), pa.Step, len(pb.Metrics), pb.Step)
	}
	worst := 0.0
	for i, a := range pa.Metrics {
		b := pb.Metrics[i]
		rel := math.Abs(a.Loss-b.Loss) / max(math.Abs(a.Loss), 1e-12)
		worst = max(worst, rel)
		if a.Kind != b.Kind || a.Step != b.Step || !(rel < 1e-5) {
			t.Errorf("row %d: %s at step %d loss %.9g (one process), %s at step %d loss %.9g (2 ranks)", i, a.Kind, a.Step, a.Loss, b.Kind, b.Step, b.Loss)
		}
	}
	t.Logf("largest relative loss difference over %d rows: %.2g", len(pa.Metrics), worst)
}
