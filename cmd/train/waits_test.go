//go:build cgo

package main

import (
	"context"
	"io"
	"testing"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// TestDeviceStepWaits trains the FFN on the CUDA backend over the host
// model of the device and counts the host's blocking waits of each
// training step (standin.HostWaits): at most one, logged step or not.
func TestDeviceStepWaits(t *testing.T) {
	dir := t.TempDir()
	fixture(t, 400, "train", dir, 1)
	fixture(t, 100, "t10k", dir, 2)
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, args := range [][]string{
		{"-hidden", "64", "-r", "16"},
		{"-hidden", "64", "-optim", "rgd", "-other", "adam"},
	} {
		c, err := parseFlags(append([]string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-device", "cuda"}, args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := newTrainer(context.Background(), c, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.close()
		tr.steps = tr.train.N / c.batch
		tr.logEvery = 4
		tr.images = make([]float32, c.batch*tr.train.Dim())
		tr.labels = make([]int, c.batch)
		if err := tr.loader.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		var counts []uint64
		for range 12 {
			before := standin.HostWaits()
			lv, acc, bad, err := tr.step(0)
			if err != nil || bad != nil {
				t.Fatalf("%v: step %d: %v %v", args, tr.st.Step, err, bad)
			}
			tr.st.Batch++
			tr.st.Step++
			tr.tally(0, lv, acc, bad)
			counts = append(counts, standin.HostWaits()-before)
		}
		t.Logf("%v: host waits per step: %v", args, counts)
		for i, n := range counts {
			if n > 1 {
				t.Errorf("%v: step %d made %d blocking host waits, want at most 1 (all steps: %v)", args, i+1, n, counts)
			}
		}
	}
}
