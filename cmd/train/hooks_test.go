package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orthonet/orthonet/param"
)

// What the tests plant in a run (hooks): a NaN in a batch, a stop before a
// step, and, in a process of this test binary run as cmd/train, a fault
// named by faultEnv.

// faultEnv names the variable (KIND:RANK:STEP) that plants a fault in a run
// of this test binary as cmd/train (TestMain, faultHooks).
const faultEnv = "ORTHONET_TRAIN_FAULT"

// TestMain lets tests run this test binary as cmd/train
// (ORTHONET_TRAIN_MAIN=1), with the fault of faultEnv if set.
func TestMain(m *testing.M) {
	if os.Getenv("ORTHONET_TRAIN_MAIN") == "1" {
		var h hooks
		if v := os.Getenv(faultEnv); v != "" { // KIND:RANK:STEP
			var f fault
			if _, err := fmt.Sscanf(strings.ReplaceAll(v, ":", " "), "%s %d %d", &f.kind, &f.rank, &f.step); err != nil {
				fmt.Fprintf(os.Stderr, "%s=%q: %v\n", faultEnv, v, err)
				os.Exit(2)
			}
			h = faultHooks(f)
		}
		os.Exit(mainCode(h))
	}
	os.Exit(m.Run())
}

// trainCmd returns the command that runs this test binary as cmd/train
// (TestMain) with args, as one process; the context's end kills it.
func trainCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "ORTHONET_TRAIN_MAIN=1")
	return cmd
}

// nanAt puts a NaN into the first image of the batches of steps (from 0:
// the batch of step s is the one metrics.csv counts as step s+1).
func nanAt(steps ...int) hooks {
	return hooks{afterBatch: func(b planted) {
		if slices.Contains(steps, b.step) {
			b.x[0] = float32(math.NaN())
		}
	}}
}

// stopBefore returns a context that the run cancels, as Ctrl-C does, once
// it has loaded the batch of step k-1 (k >= 1), and the hooks that do it:
// the run stops at the step boundary before step k, k steps taken.
func stopBefore(k int) (context.Context, hooks) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, hooks{afterBatch: func(b planted) {
		if b.step == k-1 {
			cancel()
		}
	}}
}

// fault is a fault planted in a run: at step step, rank rank flips the
// lowest bit of one weight ("flip"), puts a NaN into its rows of the batch
// ("nan") or kills itself with SIGKILL ("kill").
type fault struct {
	kind       string
	rank, step int
}

// faultHooks are the hooks that plant f.
func faultHooks(f fault) hooks {
	return hooks{afterBatch: func(b planted) {
		if f.step != b.step || f.rank != b.rank {
			return
		}
		switch f.kind {
		case "kill":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute) // the signal ends the process
		case "nan": // into the first of this rank's rows
			b.x[0] = float32(math.NaN())
		case "flip": // on the CPU the nodes share the program's memory
			ps, err := b.run.Params()
			if err != nil {
				return
			}
			w := param.Constrained(ps)[0].Node.Value().Data().([]float32)
			w[0] = math.Float32frombits(math.Float32bits(w[0]) ^ 1)
		}
	}}
}
