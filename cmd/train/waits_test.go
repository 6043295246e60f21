//go:build cgo

package main

import (
	"context"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// standInTrainer returns a trainer of args on the CUDA backend over the
// host model of the device (the caller sets ORTHONET_CUDA_STANDIN), ready
// for its first step and closed at the test's end.
func standInTrainer(t *testing.T, args ...string) *trainer {
	t.Helper()
	tr, err := newTrainer(context.Background(), parsed(t, append([]string{"-out", t.TempDir(), "-device", "cuda"}, args...)...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.close)
	tr.begin()
	if err := tr.loader.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	return tr
}

// stepOnce takes the next step of tr as its loop does, but for the clock,
// the evaluations and the checkpoints, and returns what step returned.
func stepOnce(tr *trainer) (lv, acc float64, bad, err error) {
	lv, acc, bad, err = tr.step(0)
	tr.st.Batch++
	tr.st.Step++
	tr.tally(0, lv, acc, bad)
	return lv, acc, bad, err
}

// TestDeviceStepWaits trains the FFN (with RSDM and SGD, and with RGD and
// Adam) and a small ViT on the CUDA backend over the host model of the
// device and counts the host's blocking waits of each training step
// (standin.HostWaits): at most one, logged step or not (before Collect:
// three, the loss, the logits and the gradients' check).
func TestDeviceStepWaits(t *testing.T) {
	dir := mnistDir(t, 400, 100)
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, args := range [][]string{
		{"-hidden", "64", "-r", "16"},
		{"-hidden", "64", "-optim", "rgd", "-other", "adam"},
		{"-model", "vit", "-dim", "16", "-heads", "2", "-mlp", "16", "-depth", "1", "-patch", "8", "-r", "4", "-other", "adam"},
	} {
		tr := standInTrainer(t, append([]string{"-dataset", "mnist", "-data", dir}, args...)...)
		tr.logEvery = 3
		var counts []uint64
		for range 6 {
			before := standin.HostWaits()
			if _, _, bad, err := stepOnce(tr); err != nil || bad != nil {
				t.Fatalf("%v: step %d: %v %v", args, tr.st.Step, err, bad)
			}
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

// TestKernelProfileCounts trains the FFN and a small ViT on the host model
// with -kernel-profile: the profile gives the device's work per training
// step, its launches split between the forward and backward pass and the
// optimizer's step, one wait, and the copies in of a step (the inputs and,
// for the ViT, the dropout step; each RSDM weight's rows; one of every step
// size).
func TestKernelProfileCounts(t *testing.T) {
	dir := mnistDir(t, 160, 100)
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	line := regexp.MustCompile(`device work per training step: (\d+) kernel launches \((\d+) forward and backward, (\d+) in the optimizer's step\); (\d+) copies in, 1 wait for the device`)
	for _, tc := range []struct {
		args   []string
		copies int
	}{
		{[]string{"-hidden", "32", "-depth", "3", "-r", "8"}, 2 + 3 + 1},
		{[]string{"-model", "vit", "-dim", "16", "-heads", "2", "-mlp", "16", "-depth", "1", "-patch", "8", "-r", "4", "-other", "adam"}, 3 + 3 + 1},
	} {
		c, err := parseFlags(append([]string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-device", "cuda", "-kernel-profile", "-limit-train", "48", "-limit-test", "20", "-eval-every", "-1"}, tc.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := runForAccuracy(t, c, hooks{})
		m := line.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%v: no line of the device's work per step in:\n%s", tc.args, out)
		}
		n := make([]int, 4)
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+1])
		}
		if n[0] != n[1]+n[2] || n[1] == 0 || n[2] == 0 || n[3] != tc.copies {
			t.Errorf("%v: %q: want the launches' parts to add up, and %d copies in", tc.args, m[0], tc.copies)
		}
	}
}

// TestNonFiniteSkipOnDevice trains the FFN on the host model of the device
// with -nonfinite skip and a NaN in the batch of one step: that step is
// skipped with nothing moved (the weights, the optimizer's state and its
// random draws the same bit for bit before and after it), the next one
// steps, and each step still waits once.
func TestNonFiniteSkipOnDevice(t *testing.T) {
	dir := mnistDir(t, 200, 100)
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	tr := standInTrainer(t, "-dataset", "mnist", "-data", dir, "-hidden", "32", "-depth", "2", "-r", "8", "-other", "adam", "-nonfinite", "skip")
	tr.hooks = nanAt(2)
	tr.logEvery = 1
	// snapshot returns the weights and the optimizer's state.
	snapshot := func() ([][]float32, any) {
		if err := tr.eng.store(); err != nil {
			t.Fatal(err)
		}
		var w [][]float32
		for _, n := range tr.net.Nodes() {
			w = append(w, append([]float32(nil), n.Value().Data().([]float32)...))
		}
		return w, tr.solver.State()
	}
	for step := range 4 {
		w0, s0 := snapshot()
		waits := standin.HostWaits()
		lv, _, bad, err := stepOnce(tr)
		if got := standin.HostWaits() - waits; got != 1 {
			t.Errorf("step %d waited %d times for the device, want once", step, got)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		w1, s1 := snapshot()
		moved := !reflect.DeepEqual(w0, w1) || !reflect.DeepEqual(s0, s1)
		switch {
		case step == 2 && (bad == nil || !math.IsNaN(lv)):
			t.Errorf("step %d, a NaN batch: loss %v, skipped for %v", step, lv, bad)
		case step == 2 && moved:
			t.Errorf("step %d, skipped: the weights or the optimizer's state moved", step)
		case step != 2 && (bad != nil || !moved):
			t.Errorf("step %d: skipped for %v, moved %v", step, bad, moved)
		}
	}
	if n := len(tr.st.Metrics); n != 4 || tr.st.Metrics[2].Skipped != 1 || !tr.st.Metrics[2].NoLoss {
		t.Errorf("training rows %+v, want 4 with the third skipped", tr.st.Metrics)
	}
}
