package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
	bestName    = "best.safetensors"
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

// stepFile names the checkpoint after step.
func stepFile(step int) string { return fmt.Sprintf("step-%09d.safetensors", step) }

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

// save writes the run's checkpoint for the current step, links it as
// best.safetensors when best is set, and removes step checkpoints beyond
// the newest -keep and temporary files of killed writes.
func (t *trainer) save(best bool) error {
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
	path := filepath.Join(t.dir, stepFile(t.st.Step))
	if err := checkpoint.Write(path, f); err != nil {
		return err
	}
	t.last = path
	if best {
		if err := linkBest(path, filepath.Join(t.dir, bestName), f); err != nil {
			return err
		}
	}
	return prune(t.dir, t.c.keep)
}

// linkBest makes best a hard link to path, atomically; where links are not
// supported it writes f there.
func linkBest(path, best string, f *checkpoint.File) error {
	tmp := filepath.Join(filepath.Dir(best), "."+bestName+".tmp-link")
	os.Remove(tmp)
	if err := os.Link(path, tmp); err != nil {
		return checkpoint.Write(best, f)
	}
	if err := os.Rename(tmp, best); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving the best checkpoint: %w", err)
	}
	return checkpoint.SyncDir(filepath.Dir(best))
}

// prune removes all but the newest keep step checkpoints in dir, and the
// temporary files that writes killed before their rename leave.
func prune(dir string, keep int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pruning checkpoints: %w", err)
	}
	var steps []int
	for _, e := range ents {
		if checkpoint.IsTemp(e.Name()) {
			os.Remove(filepath.Join(dir, e.Name()))
		} else if s := stepOf(e.Name()); s >= 0 {
			steps = append(steps, s)
		}
	}
	sort.Ints(steps)
	for _, s := range steps[:max(0, len(steps)-keep)] {
		if err := os.Remove(filepath.Join(dir, stepFile(s))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pruning checkpoints: %w", err)
		}
	}
	return checkpoint.SyncDir(dir)
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
	if err := f.LoadNodes(prefixModel, t.net.Nodes()); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := t.eng.load(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := f.LoadSolver(prefixOptim, t.solver); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := t.maskSrc.UnmarshalBinary(st.Dropout); err != nil {
		return fmt.Errorf("%s: dropout random state: %w", where, err)
	}
	if worst := maxFeasibility(t.net.Orthogonal()); !(worst < 1e-3) {
		return fmt.Errorf("%s: an orthogonal weight has ||W^T W - I||_F = %.3g: the checkpoint's weights are off the manifold", where, worst)
	}
	t.st = st
	return nil
}

// resolveResume turns -resume's value into a checkpoint file: a file as it
// is, a run folder's newest step checkpoint, or for "latest" the newest
// step checkpoint of the run folder under out that saved last.
func resolveResume(arg, out string) (string, error) {
	if arg != "latest" {
		fi, err := os.Stat(arg)
		if err != nil {
			return "", fmt.Errorf("-resume: %w", err)
		}
		if !fi.IsDir() {
			return arg, nil
		}
		path, _, err := newestIn(arg)
		if err != nil {
			return "", err
		}
		if path == "" {
			return "", fmt.Errorf("-resume %s: the folder holds no step-*.safetensors checkpoint", arg)
		}
		return path, nil
	}
	runs, err := filepath.Glob(filepath.Join(out, "run-*"))
	if err != nil {
		return "", fmt.Errorf("-resume latest: %w", err)
	}
	var best string
	var bestTime int64
	for _, dir := range runs {
		path, mtime, err := newestIn(dir)
		if err != nil {
			return "", err
		}
		if path != "" && (best == "" || mtime > bestTime) {
			best, bestTime = path, mtime
		}
	}
	if best == "" {
		return "", fmt.Errorf("-resume latest: no checkpoint under %s (looked for %s)", out, filepath.Join(out, "run-*", "step-*.safetensors"))
	}
	return best, nil
}

// newestIn returns the step checkpoint of dir with the highest step and its
// modification time, or "" when there is none.
func newestIn(dir string) (string, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", 0, fmt.Errorf("-resume: %w", err)
	}
	bestStep := -1
	var path string
	for _, e := range ents {
		if s := stepOf(e.Name()); s > bestStep && e.Type().IsRegular() {
			bestStep, path = s, filepath.Join(dir, e.Name())
		}
	}
	if path == "" {
		return "", 0, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0, fmt.Errorf("-resume: %w", err)
	}
	return path, fi.ModTime().UnixNano(), nil
}
