package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/orthonet/orthonet/checkpoint"
)

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

// stepOf returns the step of a checkpoint file name, or -1.
func stepOf(name string) int {
	s, ok := strings.CutPrefix(name, "step-")
	if !ok {
		return -1
	}
	s, ok = strings.CutSuffix(s, ".safetensors")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
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

// resumeFolder settles, before a resumed run loads anything, where it
// writes. The newest checkpoint of a run goes on in that run's folder,
// whose lock it returns in held: a folder that another process holds is a
// usage error naming that process (also for -resume latest or RUN when
// that process has saved a newer checkpoint meanwhile). Any other
// checkpoint (an older one, one behind a damaged newest one, one copied
// elsewhere, one of a folder without a run manifest) goes on in a new run
// folder, for the reason why; its own folder is neither locked nor
// touched. A finished run (nothing to train) writes nothing and holds
// nothing.
func resumeFolder(c config) (held *checkpoint.Run, why string, err error) {
	var st progress
	if err := c.resumed.JSON(keyProgress, &st); err != nil || st.Epoch >= c.epochs {
		return nil, "", nil // restore says what is wrong; a finished run writes nothing
	}
	dir := filepath.Dir(c.resume)
	ro, err := checkpoint.ReadRun(dir)
	if err != nil {
		return nil, fmt.Sprintf("%s holds no run manifest %s", dir, checkpoint.ManifestName), nil
	}
	newest, s, bad := ro.Newest()
	switch {
	case newest == "":
		return nil, fmt.Sprintf("the run in %s wrote no such checkpoint", dir), nil
	case c.resumeNewest: // the run's newest, even if its holder has saved since
	case !sameFile(newest, c.resume) && bad != nil:
		return nil, fmt.Sprintf("the newest checkpoint of its run, %s, does not load: %v", filepath.Base(newest), bad), nil
	case !sameFile(newest, c.resume) && s == st.Step:
		return nil, fmt.Sprintf("it is not the run's own %s", filepath.Base(newest)), nil
	case !sameFile(newest, c.resume):
		return nil, fmt.Sprintf("the newest checkpoint of its run is %s", filepath.Base(newest)), nil
	case bad != nil: // it loads, but the run did not save it there
		return nil, fmt.Sprintf("it is not the checkpoint its run saved there: %v", bad), nil
	}
	held, err = checkpoint.OpenRun(dir)
	if errors.Is(err, checkpoint.ErrLocked) {
		return nil, "", &usageError{fmt.Errorf("-resume %s: %w", c.resume, err)}
	}
	if err != nil {
		return nil, fmt.Sprintf("its folder cannot be written: %v", err), nil
	}
	// Under the lock: the process that held the folder before may have
	// saved since.
	if newest, _, _ := held.Newest(); !sameFile(newest, c.resume) {
		held.Close()
		return nil, fmt.Sprintf("the newest checkpoint of its run is now %s", filepath.Base(newest)), nil
	}
	return held, "", nil
}

// resumeRun returns the run folder a resumed run writes to: held, the
// folder of the run whose newest checkpoint it goes on from, or else a new
// run folder under -out that records the checkpoint as its parent and
// carries its metrics (why: resumeFolder's reason). created reports
// whether the folder is new.
func resumeRun(c config, held *checkpoint.Run, why string, step int, w io.Writer) (r *checkpoint.Run, created bool, err error) {
	if held != nil {
		return held, false, nil
	}
	r, err = newRunDir(c.out, &checkpoint.Origin{Path: c.resume, Step: step, Run: c.resumed.Meta[checkpoint.KeyRun]})
	if err != nil {
		return nil, false, err
	}
	fmt.Fprintf(w, "%s is not the newest checkpoint of its run (%s): going on in a new run folder %s, leaving %s as it is\n", c.resume, why, r.Dir(), filepath.Dir(c.resume))
	return r, true, nil
}

// usableOthers returns, for a checkpoint that failed to load, the other
// checkpoints of its run that load, newest first (its step checkpoints,
// then best.safetensors when it holds another step), as "PATH (step N)".
func usableOthers(path string) []string {
	r, err := checkpoint.ReadRun(filepath.Dir(path))
	if err != nil {
		return nil
	}
	var out []string
	steps := r.Checkpoints()
	for i := len(steps) - 1; i >= 0; i-- {
		p := filepath.Join(r.Dir(), checkpoint.StepName(steps[i]))
		if sameFile(p, path) {
			continue
		}
		if _, err := checkpoint.Read(p); err == nil {
			out = append(out, fmt.Sprintf("%s (step %d)", p, steps[i]))
		}
	}
	if p, step, ok := r.Best(); ok && !sameFile(p, path) && !slices.Contains(steps, step) {
		if _, err := checkpoint.Read(p); err == nil {
			out = append(out, fmt.Sprintf("%s (step %d)", p, step))
		}
	}
	return out
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// finished reports a resumed run that has trained all its epochs.
func (t *trainer) finished() {
	acc := ""
	for i := len(t.st.Metrics) - 1; i >= 0; i-- {
		if m := t.st.Metrics[i]; m.Kind == "test" {
			acc = fmt.Sprintf(", test accuracy %.2f%% (best %.2f%% at step %d)", 100*m.Accuracy, 100*t.st.Best, t.st.BestStep)
			break
		}
	}
	fmt.Fprintf(t.w, "%s: the run is finished: %d epochs done, step %d%s; nothing to do.\nTo train it further, resume with -epochs N, N larger than %d: train -resume %s -epochs %d\n",
		t.c.resume, t.st.Epoch, t.st.Step, acc, t.st.Epoch, t.c.resume, t.st.Epoch+1)
}

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

// resolveResume turns -resume's value into a checkpoint file: a file as it
// is, a run folder's newest checkpoint, or for "latest" the newest
// checkpoint of the run folder under out that saved last. A newest
// checkpoint that is damaged (or another file put in its place) is an
// error naming it and the run's checkpoints that load: going on from an
// older one silently would drop the steps after it.
func resolveResume(arg, out string) (string, error) {
	if arg != "latest" {
		fi, err := os.Stat(arg)
		if err != nil {
			return "", fmt.Errorf("-resume: %w", err)
		}
		if !fi.IsDir() {
			return arg, nil
		}
		path, _, bad, err := newestIn(arg)
		if err != nil {
			return "", err
		}
		if path == "" {
			return "", fmt.Errorf("-resume %s: the folder holds no step-*.safetensors checkpoint", arg)
		}
		if bad != nil {
			return "", damagedNewest(arg, path, bad)
		}
		return path, nil
	}
	runs, err := filepath.Glob(filepath.Join(out, "run-*"))
	if err != nil {
		return "", fmt.Errorf("-resume latest: %w", err)
	}
	var best string
	var bestTime int64
	var bestBad error
	for _, dir := range runs {
		path, mtime, bad, err := newestIn(dir)
		if err != nil {
			return "", err
		}
		if path != "" && (best == "" || mtime > bestTime) {
			best, bestTime, bestBad = path, mtime, bad
		}
	}
	if best == "" {
		return "", fmt.Errorf("-resume latest: no checkpoint under %s (looked for %s)", out, filepath.Join(out, "run-*", "step-*.safetensors"))
	}
	if bestBad != nil {
		return "", damagedNewest("latest", best, bestBad)
	}
	return best, nil
}

// damagedNewest is resolveResume's error for a run whose newest checkpoint
// path is not the run's (bad says why), with the run's checkpoints that
// load.
func damagedNewest(arg, path string, bad error) error {
	err := fmt.Errorf("-resume %s: the newest checkpoint of run %s does not load: %w", arg, filepath.Dir(path), bad)
	if others := usableOthers(path); len(others) > 0 {
		return fmt.Errorf("%w; these checkpoints of its run load, newest first (go on from one with -resume PATH, in a new run folder): %s", err, strings.Join(others, ", "))
	}
	return fmt.Errorf("%w; no other checkpoint of its run loads", err)
}

// newestIn returns the newest checkpoint of the run in dir and its
// modification time, or "" when there is none: the newest its manifest
// lists that is on disk, or in a folder of an earlier version without one
// the step-*.safetensors file of the highest step. bad says why the file
// is not the run's checkpoint (checkpoint.Run.Newest). It only reads.
func newestIn(dir string) (path string, mtime int64, bad, err error) {
	r, err := checkpoint.ReadRun(dir)
	switch {
	case err == nil:
		path, _, bad = r.Newest()
	case errors.Is(err, checkpoint.ErrNotRun):
		ents, err := os.ReadDir(dir)
		if err != nil {
			return "", 0, nil, fmt.Errorf("-resume: %w", err)
		}
		bestStep := -1
		for _, e := range ents {
			if s := stepOf(e.Name()); s > bestStep && e.Type().IsRegular() {
				bestStep, path = s, filepath.Join(dir, e.Name())
			}
		}
	default:
		return "", 0, nil, fmt.Errorf("-resume: %w", err)
	}
	if path == "" {
		return "", 0, nil, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0, nil, fmt.Errorf("-resume: %w", err)
	}
	return path, fi.ModTime().UnixNano(), bad, nil
}
