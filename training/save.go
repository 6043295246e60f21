package training

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/param"
)

// A run's checkpoints: what a Trainer writes into them, and how it reads
// them back.

// Metadata keys and tensor prefixes of a run's checkpoint.
const (
	KeySettings = "train.flags"    // Config.Settings
	KeyProgress = "train.progress" // Progress
	KeyData     = "train.data"     // DataInfo
	PrefixModel = "model."         // the parameters
	PrefixOptim = "optim."         // the optimizer's state
)

// DataInfo identifies the data a run trains on, so that a resumed run can
// tell when it is given other data: the sizes and a SHA-256 of every
// example and label read (after limits).
type DataInfo struct {
	Train   int    `json:"train"`
	Test    int    `json:"test"`
	Shape   []int  `json:"shape"` // one example's
	Classes int    `json:"classes"`
	Digest  string `json:"sha256,omitempty"` // of the training and test examples and labels
	// ClassNames names the labels where the training set is a *data.Set
	// that does (an image folder's class folders).
	ClassNames []string `json:"class_names,omitempty"`
	// Files are the files the sets were read from, where they are
	// *data.Sets (for messages).
	Files []string `json:"files,omitempty"`
}

// dataInfo returns the DataInfo of train and test, reading every example.
func dataInfo(train, test data.Dataset) (DataInfo, error) {
	d := DataInfo{Train: train.Len(), Shape: slices.Clone(train.Shape()), Classes: train.NumClasses()}
	if s, ok := train.(*data.Set); ok {
		d.ClassNames = s.ClassNames
		d.Files = s.Files
	}
	if s, ok := test.(*data.Set); ok {
		d.Files = append(slices.Clone(d.Files), s.Files...)
	}
	h := sha256.New()
	if err := digest(h, train); err != nil {
		return d, err
	}
	if test != nil {
		d.Test = test.Len()
		if err := digest(h, test); err != nil {
			return d, err
		}
	}
	d.Digest = hex.EncodeToString(h.Sum(nil))
	return d, nil
}

// digest writes every example and label of s into h.
func digest(h interface{ Write([]byte) (int, error) }, s data.Dataset) error {
	if set, ok := s.(*data.Set); ok { // the pixels as they are, at once
		buf := make([]byte, 0, 1<<16)
		for i, x := range set.X {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
			if len(buf) == cap(buf) || i == len(set.X)-1 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
		h.Write(set.Y)
		return nil
	}
	x := make([]float32, shapeLen(s.Shape()))
	buf := make([]byte, 0, 4*len(x)+8)
	for i := range s.Len() {
		y, err := s.Example(i, x)
		if err != nil {
			return fmt.Errorf("training: reading example %d of the data: %w", i, err)
		}
		buf = buf[:0]
		for _, v := range x {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(y))
		h.Write(buf)
	}
	return nil
}

// sameData returns an error naming how saved differs from now; a
// checkpoint without a digest (an older one) is compared by sizes only.
func sameData(where string, saved, now DataInfo) error {
	shape := func(s []int) []int { // old checkpoints: channels, height, width
		return slices.DeleteFunc(slices.Clone(s), func(v int) bool { return v == 1 })
	}
	if saved.Train != now.Train || saved.Test != now.Test || saved.Classes != now.Classes || !slices.Equal(shape(saved.Shape), shape(now.Shape)) {
		return fmt.Errorf("%s was trained on %d/%d examples of %v with %d classes; the data now has %d/%d of %v with %d (other data, or the files changed)",
			where, saved.Train, saved.Test, saved.Shape, saved.Classes, now.Train, now.Test, now.Shape, now.Classes)
	}
	if saved.Digest != "" && saved.Digest != now.Digest {
		return fmt.Errorf("%s was trained on other data of the same sizes (SHA-256 of the examples and labels %.16s..., now %.16s...%s): the files changed, or other files of the same shape were given (Config.AllowOtherData, train's -resume-other-data, goes on anyway)",
			where, saved.Digest, now.Digest, filesNote(saved.Files, now.Files))
	}
	return nil
}

// filesNote names the data's files then and now, for sameData's message.
func filesNote(then, now []string) string {
	if len(then) == 0 && len(now) == 0 {
		return ""
	}
	if slices.Equal(then, now) {
		return "; files " + strings.Join(now, ", ")
	}
	return fmt.Sprintf("; files then %s, now %s", strings.Join(then, ", "), strings.Join(now, ", "))
}

// save writes the run's checkpoint for the current step, marks it best
// when best is set, and removes the run's step checkpoints beyond the
// newest Keep. In data-parallel training every rank calls it at the same
// step: the ranks first compare their weights, then rank 0 alone writes.
func (t *Trainer) save(best bool) error {
	if err := t.solver.CheckWeights(); err != nil {
		return fmt.Errorf("before the checkpoint of step %d: %w", t.st.Step, err)
	}
	if !t.writes() {
		return nil
	}
	f, err := t.checkpointFile()
	if err != nil {
		return err
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
	if err := t.dir.Prune(t.c.Keep); err != nil {
		return err
	}
	if cb := t.c.Callbacks.OnSave; cb != nil {
		return call("OnSave", func() error { return cb(path, t.st.Step) })
	}
	return nil
}

// checkpointFile returns the run's state as a checkpoint: the parameters,
// the optimizer, the progress, the settings and the data's identity.
func (t *Trainer) checkpointFile() (*checkpoint.File, error) {
	st := t.st
	st.Seconds = t.seconds()
	b, err := t.rngSrc.MarshalBinary()
	if err != nil {
		return nil, err
	}
	st.RNG = b
	if err := t.eng.store(); err != nil {
		return nil, err
	}
	f := checkpoint.New()
	if p := t.eng.compiled(); p != nil { // the program's state too (batch norms' running statistics)
		if err := f.PutProgram(PrefixModel, PrefixOptim, p, t.solver); err != nil {
			return nil, err
		}
	} else {
		if err := f.PutNodes(PrefixModel, param.Nodes(t.m.Params)); err != nil {
			return nil, err
		}
		if err := f.PutSolver(PrefixOptim, t.solver); err != nil {
			return nil, err
		}
	}
	settings := t.c.Settings
	if settings == nil {
		settings = map[string]string{}
	}
	for k, v := range map[string]any{KeySettings: settings, KeyProgress: st, KeyData: t.dataID} {
		if err := f.SetJSON(k, v); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// restore loads the weights, the optimizer state and the progress of f.
// Everything is checked before the run starts: a checkpoint of another
// model, data set or optimizer is an error naming the difference.
func (t *Trainer) restore(f *checkpoint.File) error {
	where := t.resumePath
	var d DataInfo
	if err := f.JSON(KeyData, &d); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	otherData := false
	if err := sameData(where, d, t.dataID); err != nil {
		if !t.c.AllowOtherData || d.Train != t.dataID.Train || d.Test != t.dataID.Test {
			return &SettingError{err}
		}
		otherData = true // allowed: said, and recorded in the run's progress
	}
	var st Progress
	if err := f.JSON(KeyProgress, &st); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	steps := t.c.Train.Len() / t.c.Batch
	if st.Epoch < 0 || st.Batch < 0 || st.Batch > steps || st.Step < 0 || st.Window.Count < 0 {
		return fmt.Errorf("%s: progress epoch %d, batch %d of %d, step %d is impossible", where, st.Epoch, st.Batch, steps, st.Step)
	}
	if err := t.load(f); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if _, ok, _ := f.SolverSteps(PrefixOptim); !ok {
		// Saved before the solver counted its steps: its schedule stands at
		// the run's step.
		if err := t.solver.SetSteps(st.Step - st.Skipped); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	if err := t.rngSrc.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("%s: random state: %w", where, err)
	}
	if err := CheckFinite(t.m.Params); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if worst := MaxFeasibility(t.m.Params); !(worst < 1e-3) {
		return fmt.Errorf("%s: an orthogonal weight has ||W^T W - I||_F = %.3g: the checkpoint's weights are off the manifold", where, worst)
	}
	if otherData {
		note := fmt.Sprintf("step %d: resumed on other data of the same sizes (SHA-256 %.16s... then, %.16s... now)", st.Step, d.Digest, t.dataID.Digest)
		st.DataChanges = append(st.DataChanges, note)
		fmt.Fprintf(t.c.Log, "warning: %s: %s\n", where, note)
	}
	t.st = st
	return nil
}

// load loads f's parameters and optimizer state into the model, the
// program and the solver.
func (t *Trainer) load(f *checkpoint.File) error {
	if p := t.eng.compiled(); p != nil {
		// One call: the nodes, the program's buffers and the solver.
		return f.LoadProgram(PrefixModel, PrefixOptim, p, t.solver)
	}
	if err := f.LoadNodes(PrefixModel, param.Nodes(t.m.Params)); err != nil {
		return err
	}
	return f.LoadSolver(PrefixOptim, t.solver)
}
