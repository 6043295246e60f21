//go:build cgo

package main

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/orthonet/orthonet/internal/mpitest"
	"github.com/orthonet/orthonet/internal/runtest"
)

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
