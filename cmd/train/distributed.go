package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/optim"
)

// Data-parallel training (-dist mpi): every rank builds the same network
// from the same seed, reads the same global batches in the same order and
// trains on its rows [r B/N, (r+1) B/N) of each, its gradients the mean
// over them; optim's Solver (Options.Comm) sums what each step needs
// across the ranks before any weight moves. Everything that decides what
// the run does next (the loss, a signal, the training clock, evaluations)
// is the same on every rank, so the ranks make the same calls in the same
// order; rank 0 alone writes files and prints.

// shareCores gives each of the ranks on this machine its share of the
// cores for OpenBLAS and the CPU backend (measured: 2 ranks of 2 OpenBLAS
// threads on 2 cores took 28 ms a step where 1 thread each took 10.4 ms).
// OPENBLAS_NUM_THREADS, when set, decides OpenBLAS's instead. It returns
// the share.
func shareCores(w io.Writer) int {
	local, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
	share := max(1, runtime.NumCPU()/max(1, local))
	if os.Getenv("OPENBLAS_NUM_THREADS") == "" {
		if prev := linalg.SetBLASThreads(share); prev > 0 && prev != share {
			fmt.Fprintf(w, "train: %d ranks on this machine's %d cores: OpenBLAS takes %d thread(s) per rank (OPENBLAS_NUM_THREADS sets it)\n", max(1, local), runtime.NumCPU(), share)
		}
	}
	return share
}

// sharedError is an error that every rank meets at the same step with the
// same cause (a non-finite loss, a diverged test loss, a missed
// -min-accuracy): the ranks end alike, with no need to abort the others.
type sharedError struct{ err error }

func (e *sharedError) Error() string { return e.err.Error() }
func (e *sharedError) Unwrap() error { return e.err }

// shared returns the error of format and a, made by every rank of a
// data-parallel run at the same step (sameOnEveryRank).
func shared(format string, a ...any) error {
	return &sharedError{fmt.Errorf(format, a...)}
}

// sameOnEveryRank reports whether err is one that every rank returns
// together, so that each can leave the group normally; any other error is
// this rank's alone, and it aborts the group.
func sameOnEveryRank(err error) bool {
	var shared *sharedError
	var usage *usageError
	var interrupted *interruptedError
	return errors.As(err, &shared) || errors.As(err, &usage) || errors.As(err, &interrupted) ||
		errors.Is(err, optim.ErrNotFinite) || errors.Is(err, optim.ErrDiverged)
}

// ranks returns the number of ranks the run trains on.
func (c config) ranks() int {
	if c.comm == nil {
		return 1
	}
	return c.comm.Size()
}

// rank returns this process's rank.
func (c config) rank() int {
	if c.comm == nil {
		return 0
	}
	return c.comm.Rank()
}

// shard returns the rows of each global batch one rank trains on.
func (c config) shard() int { return c.batch / c.ranks() }

// checkShards refuses a global batch that the ranks cannot split evenly
// (each rank's gradient is the mean over its rows, and the Solver averages
// the ranks' means: equal shards make that the batch's mean).
func checkShards(c config) error {
	if n := c.ranks(); c.batch%n != 0 && c.resumed != nil {
		// A resumed run keeps its -batch: another number of ranks, then.
		var fit []string
		for k := 1; k <= c.batch; k++ {
			if c.batch%k == 0 {
				fit = append(fit, strconv.Itoa(k))
			}
		}
		return fmt.Errorf("-batch %d, the checkpoint's, is not divisible by the %d ranks: each rank trains on an equal share of every global batch, and a resumed run keeps its -batch; resume on a number of ranks that divides it (%s)", c.batch, n, strings.Join(fit, ", "))
	} else if c.batch%n != 0 {
		return fmt.Errorf("-batch %d is not divisible by the %d ranks: each rank trains on an equal share of every global batch (try -batch %d)", c.batch, n, max(n, c.batch/n*n))
	}
	if c.ranks() > 1 && c.engine == "tape" && c.model == "vit" && c.dropout > 0 {
		return fmt.Errorf("-engine tape draws the ViT's dropout masks from one stream that a checkpoint saves for rank 0 only: with %d ranks use -engine program (or -dropout 0)", c.ranks())
	}
	return nil
}

// anyRank reports whether stop is set on any rank, so that a signal one
// rank saw stops every rank at the same step.
func (t *trainer) anyRank(stop bool) (bool, error) {
	if t.c.ranks() == 1 {
		return stop, nil
	}
	t.sync[0] = 0
	if stop {
		t.sync[0] = 1
	}
	if err := t.c.comm.AllReduceSum64(t.sync[:1]); err != nil {
		return false, fmt.Errorf("all-reduce of the stop flag: %w", err)
	}
	return t.sync[0] > 0, nil
}

// batchMean returns the global batch's mean loss and accuracy from this
// rank's means over its shard (equal shards: the mean of the means).
func (t *trainer) batchMean(lv, acc float64) (float64, float64, error) {
	n := t.c.ranks()
	if n == 1 {
		return lv, acc, nil
	}
	t.sync[0], t.sync[1] = lv, acc
	if err := t.c.comm.AllReduceSum64(t.sync[:2]); err != nil {
		return 0, 0, fmt.Errorf("all-reduce of the loss: %w", err)
	}
	return t.sync[0] / float64(n), t.sync[1] / float64(n), nil
}

// syncCreated tells every rank whether rank 0 created the run folder in
// this session (an interrupted run that took no step removes it instead of
// saving, on every rank alike).
func (t *trainer) syncCreated() error {
	if t.c.ranks() == 1 {
		return nil
	}
	b := []byte{0}
	if t.created {
		b[0] = 1
	}
	if err := t.c.comm.BroadcastBytes(b, 0); err != nil {
		return fmt.Errorf("broadcast of the run folder: %w", err)
	}
	t.created = b[0] == 1
	return nil
}

// writes reports whether this rank writes the run's files and output.
func (t *trainer) writes() bool { return t.c.rank() == 0 }

// trafficLine is the line a -dist mpi run ends with: what each step
// all-reduced against a full-gradient all-reduce, and this session's
// samples per second of training time.
func (t *trainer) trafficLine(w io.Writer) {
	if t.c.comm == nil {
		return
	}
	tr := t.solver.Traffic()
	sent := tr.Constrained + tr.Plain + tr.Flags
	rate := 0.0
	if s := t.st.TrainSeconds - t.clock0; s > 0 {
		rate = float64(t.taken*t.c.batch) / s
	}
	fmt.Fprintf(w, "data-parallel: %d ranks, each step all-reduced %d bytes (constrained %d, plain %d, flags %d) against %d for a full-gradient all-reduce (%.2fx less); %.1f samples/s\n",
		t.c.ranks(), sent, tr.Constrained, tr.Plain, tr.Flags, tr.FullGradient, float64(tr.FullGradient)/float64(max(sent, 1)), rate)
}
