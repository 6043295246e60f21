//go:build cgo

package main

import (
	"context"
	"errors"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak/standin"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/training"
)

// standInRun runs args on the CUDA backend over the host model of the
// device (the caller sets ORTHONET_CUDA_STANDIN) with the hooks h, stopped
// (as Ctrl-C does) before its step n+1.
func standInRun(t *testing.T, n int, h hooks, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	after := h.afterBatch
	h.afterBatch = func(b planted) {
		if after != nil {
			after(b)
		}
		if b.step == n-1 { // step n, the last, is under way
			cancel()
		}
	}
	c := parsed(t, append([]string{"-out", t.TempDir(), "-device", "cuda", "-eval-every", "-1", "-save-every", "0"}, args...)...)
	var interrupted *training.InterruptedError
	if err := run(ctx, c, io.Discard, h); !errors.As(err, &interrupted) {
		t.Fatalf("%v: %v, want the run stopped before step %d", args, err, n+1)
	}
}

// TestDeviceStepWaits trains the FFN (with RSDM and SGD, and with RGD and
// Adam) and a small ViT on the CUDA backend over the host model of the
// device and counts the host's blocking waits of each training step
// (standin.HostWaits): at most one, logged step or not (before Collect:
// three, the loss, the logits and the gradients' check).
func TestDeviceStepWaits(t *testing.T) {
	dir := mnistDir(t, 4800, 100)
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, args := range [][]string{
		{"-hidden", "64", "-r", "16"},
		{"-hidden", "64", "-optim", "rgd", "-other", "adam"},
		{"-model", "vit", "-dim", "16", "-heads", "2", "-mlp", "16", "-depth", "1", "-patch", "8", "-r", "4", "-other", "adam"},
	} {
		// 4800 images in batches of 16: 300 steps an epoch, a training row
		// of the metrics every 3 steps (training's logEvery).
		var counts []uint64
		var before uint64
		h := hooks{
			afterBatch: func(planted) { before = standin.HostWaits() },
			onStep: func(s training.StepInfo, _ *training.Trainer) {
				if s.Skipped {
					t.Errorf("%v: step %d skipped", args, s.Step)
				}
				counts = append(counts, standin.HostWaits()-before)
			},
		}
		standInRun(t, 6, h, append([]string{"-dataset", "mnist", "-data", dir}, args...)...)
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
	// snapshot returns the weights and the optimizer's state.
	snapshot := func(tr *training.Trainer) ([][]float32, any) {
		ps, err := tr.Params()
		if err != nil {
			t.Fatal(err)
		}
		var w [][]float32
		for _, n := range param.Nodes(ps) {
			w = append(w, append([]float32(nil), n.Value().Data().([]float32)...))
		}
		return w, tr.Solver().State()
	}
	var w0 [][]float32
	var s0 any
	var waits uint64
	var rows []training.Row
	h := nanAt(2)
	nan := h.afterBatch
	h.afterBatch = func(b planted) {
		w0, s0 = snapshot(b.run)
		nan(b)
		waits = standin.HostWaits()
	}
	h.onStep = func(st training.StepInfo, tr *training.Trainer) {
		step := st.Step - 1
		if got := standin.HostWaits() - waits; got != 1 {
			t.Errorf("step %d waited %d times for the device, want once", step, got)
		}
		w1, s1 := snapshot(tr)
		moved := !reflect.DeepEqual(w0, w1) || !reflect.DeepEqual(s0, s1)
		switch {
		case step == 2 && (!st.Skipped || !math.IsNaN(st.Loss)):
			t.Errorf("step %d, a NaN batch: loss %v, skipped %v", step, st.Loss, st.Skipped)
		case step == 2 && moved:
			t.Errorf("step %d, skipped: the weights or the optimizer's state moved", step)
		case step != 2 && (st.Skipped || !moved):
			t.Errorf("step %d: skipped %v, moved %v", step, st.Skipped, moved)
		}
		rows = tr.Progress().Metrics
	}
	standInRun(t, 4, h, "-dataset", "mnist", "-data", dir, "-hidden", "32", "-depth", "2", "-r", "8", "-other", "adam", "-nonfinite", "skip")
	if n := len(rows); n != 4 || rows[2].Skipped != 1 || !rows[2].NoLoss {
		t.Errorf("training rows %+v, want 4 with the third skipped", rows)
	}
}
