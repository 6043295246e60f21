package main

import (
	"fmt"

	"github.com/orthonet/orthonet/checkpoint"
)

// A run's checkpoints: what cmd/train writes into them, and how it reads
// them back.

// Metadata keys and tensor prefixes of a cmd/train checkpoint.
const (
	keyFlags    = "train.flags"    // every flag but -resume
	keyProgress = "train.progress" // progress
	keyData     = "train.data"     // dataInfo
	prefixModel = "model."
	prefixOptim = "optim."
)

// dataInfo identifies the data a run trains on, so that a resumed run can
// tell when it is given other data.
type dataInfo struct {
	Train   int    `json:"train"`
	Test    int    `json:"test"`
	Shape   [3]int `json:"shape"` // channels, height, width
	Classes int    `json:"classes"`
}

func (t *trainer) dataInfo() dataInfo {
	return dataInfo{Train: t.train.N, Test: t.test.N, Shape: [3]int{t.train.C, t.train.H, t.train.W}, Classes: t.train.Classes}
}

// save writes the run's checkpoint for the current step, marks it best
// when best is set, and removes the run's step checkpoints beyond the
// newest -keep and its own leftover temporary files (checkpoint.Run.Prune:
// nothing the run did not write).
//
// In data-parallel training every rank calls it at the same step: the ranks
// first compare their weights (optim.ErrDiverged names a rank that
// drifted), then rank 0 alone writes.
func (t *trainer) save(best bool) error {
	if err := t.solver.CheckWeights(); err != nil {
		return fmt.Errorf("before the checkpoint of step %d: %w", t.st.Step, err)
	}
	if !t.writes() {
		return nil
	}
	st := t.st
	st.Seconds = t.seconds()
	b, err := t.maskSrc.MarshalBinary()
	if err != nil {
		return err
	}
	st.Dropout = b
	if err := t.eng.store(); err != nil {
		return err
	}
	f := checkpoint.New()
	if err := f.PutNodes(prefixModel, t.net.Nodes()); err != nil {
		return err
	}
	if err := f.PutSolver(prefixOptim, t.solver); err != nil {
		return err
	}
	for k, v := range map[string]any{keyFlags: t.c.flags, keyProgress: st, keyData: t.dataInfo()} {
		if err := f.SetJSON(k, v); err != nil {
			return err
		}
	}
	path, err := t.dir.Save(t.st.Step, f)
	if err != nil {
		return err
	}
	t.last = path
	if best {
		if err := t.dir.MarkBest(t.st.Step); err != nil {
			return err
		}
	}
	return t.dir.Prune(t.c.keep)
}

// compiledEngine is an engine whose parameters live in a compiled
// program, apart from their nodes: checkpoints load into it with
// checkpoint.File.LoadProgram.
type compiledEngine interface {
	compiled() checkpoint.Program
}

func (e *programEngine) compiled() checkpoint.Program { return e.prog }

// restore loads the weights, the optimizer state and the progress of f.
// Everything is checked before the run starts: a checkpoint of another
// model, data set or optimizer is an error naming the difference.
func (t *trainer) restore(f *checkpoint.File) error {
	where := t.c.resume
	var d dataInfo
	if err := f.JSON(keyData, &d); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if now := t.dataInfo(); d != now {
		return fmt.Errorf("%s was trained on %d/%d examples of %v with %d classes; the data now has %d/%d of %v with %d (another -data, or the files changed)",
			where, d.Train, d.Test, d.Shape, d.Classes, now.Train, now.Test, now.Shape, now.Classes)
	}
	var st progress
	if err := f.JSON(keyProgress, &st); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	steps := t.train.N / t.c.batch
	if st.Epoch < 0 || st.Batch < 0 || st.Batch > steps || st.Step < 0 || st.Window.Count < 0 {
		return fmt.Errorf("%s: progress epoch %d, batch %d of %d, step %d is impossible", where, st.Epoch, st.Batch, steps, st.Step)
	}
	if p, ok := t.eng.(compiledEngine); ok {
		// One call: the nodes, the program's buffers and the solver.
		if err := f.LoadProgram(prefixModel, prefixOptim, p.compiled(), t.solver); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	} else {
		if err := f.LoadNodes(prefixModel, t.net.Nodes()); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := f.LoadSolver(prefixOptim, t.solver); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	if _, ok, _ := f.SolverSteps(prefixOptim); !ok {
		// Saved before the solver counted its steps: its schedule stands at
		// the run's step.
		if err := t.solver.SetSteps(st.Step - st.Skipped); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	if err := t.maskSrc.UnmarshalBinary(st.Dropout); err != nil {
		return fmt.Errorf("%s: dropout random state: %w", where, err)
	}
	if worst := maxFeasibility(t.net.Params()); !(worst < 1e-3) {
		return fmt.Errorf("%s: an orthogonal weight has ||W^T W - I||_F = %.3g: the checkpoint's weights are off the manifold", where, worst)
	}
	t.st = st
	return nil
}
