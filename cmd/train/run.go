package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/training"
)

// A run is package training's: run maps the configuration to a
// training.Config and the network to a training.Model, then trains.

// hooks are what a test plants in a run (hooks_test.go): the command's
// runs have none, and the configuration knows nothing of them.
type hooks struct {
	// afterBatch, where not nil, is called with each step's batch before
	// the step puts it into the model (training.Callbacks.BeforeStep).
	afterBatch func(b planted)
	// onStep, where not nil, is called after each step
	// (training.Callbacks.OnStep).
	onStep func(s training.StepInfo, run *training.Trainer)
}

// planted is a step's batch as a hook sees it: the steps done before it,
// this rank, this rank's rows of the batch (writable: the step trains on
// them) and the run.
type planted struct {
	step, rank int
	x          []float32
	run        *training.Trainer
}

// run trains as c says, printing on w, with the hooks h (none but in
// tests).
func run(ctx context.Context, c config, w io.Writer, h hooks) error {
	tr, err := newTrainer(ctx, c, w, h)
	if err != nil {
		return err
	}
	defer tr.Close()
	_, err = tr.Fit(ctx)
	return err
}

// newTrainer loads the data, builds the model and returns the run of
// package training, restored where c resumes.
func newTrainer(ctx context.Context, c config, w io.Writer, h hooks) (*training.Trainer, error) {
	if err := checkShards(c); err != nil {
		return nil, &usageError{err}
	}
	// The model's memory is checked before the data are read where their
	// shape is known, and with them once they are (memory.go).
	budget, hasBudget := c.budget()
	if shape, err := knownShape(c); err == nil {
		if err := checkTrainMemory(c, shape, nil, budget, hasBudget); err != nil {
			return nil, err
		}
	}
	train, test, err := loadData(ctx, c, w)
	if err != nil {
		return nil, err
	}
	if train.N < c.batch {
		return nil, &usageError{fmt.Errorf("-batch %d: %d training examples, fewer than one batch", c.batch, train.N)}
	}
	if err := checkTrainMemory(c, train, test, budget, hasBudget); err != nil {
		return nil, err
	}
	m, err := buildModel(c, train, test)
	if err != nil {
		return nil, err
	}
	tc := trainingConfig(c, train, test, w)
	var tr *training.Trainer
	if h.afterBatch != nil {
		tc.Callbacks.BeforeStep = func(s training.StepInfo, b training.Batch) error {
			h.afterBatch(planted{step: s.Step, rank: c.rank(), x: b.X, run: tr})
			return nil
		}
	}
	if h.onStep != nil {
		tc.Callbacks.OnStep = func(s training.StepInfo) error { h.onStep(s, tr); return nil }
	}
	tr, err = training.New(m, tc)
	return tr, err
}

// trainingConfig returns the training.Config of c, for the sets train and
// test, printing on w.
func trainingConfig(c config, train, test *data.Set, w io.Writer) training.Config {
	groups, opts := solverGroups(c, c.epochs*(train.N/c.batch))
	nonFinite := training.Stop
	if c.nonFinite == "skip" {
		nonFinite = training.Skip
	}
	tc := training.Config{Train: train, Test: test, Batch: c.batch, Epochs: c.epochs, Seed: c.seed, MaxBytes: c.maxMemory,
		Groups: groups, Options: opts, Device: c.device, Engine: c.engine, Threads: c.blasShare, KernelProfile: c.kernelProfile,
		EvalEvery: c.evalEvery, EvalSubset: c.evalSubset, EvalInterval: c.evalInterval, TimeLimit: c.timeLimit,
		NonFinite: nonFinite, MinAccuracy: c.minAccuracy, Out: c.out, SaveEvery: c.saveEvery, Keep: c.keep,
		Resume: c.resume, ResumeFile: c.resumed, Settings: c.flags, MayChange: resumable, PerRank: perRank,
		Log: w, Bar: true,
		Describe: fmt.Sprintf("%s on %s (%d train, %d test images of %dx%dx%d), %s/%s r=%d lr=%g, %s lr=%g, batch %d, %d epochs",
			c.model, c.dataset, train.N, test.N, train.C, train.H, train.W, c.optim, c.sampling, c.r, c.lr, c.other, c.lrOther, c.batch, c.epochs)}
	tc.Comm = c.comm
	tc.AllowOtherData = c.otherData
	if c.resumeArg != "" && c.resumeArg != c.resume {
		// latest or a run folder: training finds its newest checkpoint
		// again, which goes on in its folder even if the folder's holder
		// has saved since (checkpoint.OpenRunOf).
		tc.Resume, tc.ResumeFile = c.resumeArg, nil
	}
	return tc
}

// checkShards refuses a -batch that the ranks cannot split, telling a new
// run a -batch to try and a resumed run (which keeps its -batch) numbers
// of ranks that split it, and the ViT's dropout of -engine tape on
// several ranks.
func checkShards(c config) error {
	if n := c.ranks(); c.batch%n != 0 && c.resumed != nil {
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

// ranks returns the number of ranks (1 without -dist mpi).
func (c config) ranks() int {
	if c.comm == nil {
		return 1
	}
	return c.comm.Size()
}

// rank returns this process's rank (0 without -dist mpi).
func (c config) rank() int {
	if c.comm == nil {
		return 0
	}
	return c.comm.Rank()
}

// shard returns the rows of each global batch one rank trains on.
func (c config) shard() int {
	return c.batch / c.ranks()
}

// shareCores divides this machine's cores among the ranks of -dist mpi
// that run on it (OMPI_COMM_WORLD_LOCAL_SIZE): it sets OpenBLAS's threads
// unless OPENBLAS_NUM_THREADS does, and returns the CPU backend's.
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
