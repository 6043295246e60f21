package training

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"os"

	"github.com/orthonet/orthonet/checkpoint"
)

// Resuming: Config.Resume names a checkpoint; the newest checkpoint of a
// run goes on in that run's folder, any other in a new run folder.

// ResolveResume turns a resume argument into a checkpoint file: a file as
// it is, a run folder's newest checkpoint, or for "latest" the newest
// checkpoint of the run folder under out that saved last. A newest
// checkpoint that is damaged is an error naming it and the run's
// checkpoints that load: going on from an older one silently would drop
// the steps after it.
func ResolveResume(arg, out string) (string, error) {
	if arg == "latest" {
		path, bad, err := checkpoint.LatestUnder(out)
		switch {
		case errors.Is(err, filepath.ErrBadPattern):
			return "", fmt.Errorf("-resume latest: %w", err)
		case err != nil:
			return "", fmt.Errorf("-resume: %w", err)
		case path == "":
			return "", fmt.Errorf("-resume latest: no checkpoint under %s (looked for %s)", out, filepath.Join(out, checkpoint.RunPrefix+"*", "step-*.safetensors"))
		case bad != nil:
			return "", damagedNewest("latest", path, bad)
		}
		return path, nil
	}
	fi, err := os.Stat(arg)
	if err != nil {
		return "", fmt.Errorf("-resume: %w", err)
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("-resume %s: not a regular file", arg)
		}
		return arg, nil
	}
	path, bad, err := checkpoint.NewestIn(arg)
	switch {
	case err != nil:
		return "", fmt.Errorf("-resume: %w", err)
	case path == "":
		return "", fmt.Errorf("-resume %s: the folder holds no step-*.safetensors checkpoint", arg)
	case bad != nil:
		return "", damagedNewest(arg, path, bad)
	}
	return path, nil
}

// ReadResume reads the checkpoint at path, which the resume argument arg
// named; one that does not load is an error naming the checkpoints of its
// run that do.
func ReadResume(path, arg string) (*checkpoint.File, error) {
	f, err := checkpoint.Read(path)
	if err == nil {
		return f, nil
	}
	err = fmt.Errorf("-resume: %w", err)
	if others := checkpoint.OthersThatLoad(path); len(others) > 0 {
		return nil, fmt.Errorf("%w; these checkpoints of its run load, newest first (go on from one with -resume PATH): %s", err, savedList(others))
	} else if path != arg {
		return nil, fmt.Errorf("%w; no other checkpoint of its run loads", err)
	}
	return nil, err
}

// SavedSettings returns the settings (Config.Settings) a checkpoint saved.
func SavedSettings(f *checkpoint.File) (map[string]string, error) {
	var saved map[string]string
	if err := f.JSON(KeySettings, &saved); err != nil {
		return nil, fmt.Errorf("not a checkpoint of a training run: %w", err)
	}
	return saved, nil
}

// damagedNewest is ResolveResume's error for a run whose newest checkpoint
// path does not load (bad says why), with the run's checkpoints that do.
func damagedNewest(arg, path string, bad error) error {
	err := fmt.Errorf("-resume %s: the newest checkpoint of run %s does not load: %w", arg, filepath.Dir(path), bad)
	if others := checkpoint.OthersThatLoad(path); len(others) > 0 {
		return fmt.Errorf("%w; these checkpoints of its run load, newest first (go on from one with -resume PATH, in a new run folder): %s", err, savedList(others))
	}
	return fmt.Errorf("%w; no other checkpoint of its run loads", err)
}

// savedList lists checkpoints as "PATH (step N)", comma-separated.
func savedList(saved []checkpoint.Saved) string {
	var s []string
	for _, c := range saved {
		s = append(s, fmt.Sprintf("%s (step %d)", c.Path, c.Step))
	}
	return strings.Join(s, ", ")
}

// readResume resolves and reads Config.Resume (unless ResumeFile holds it)
// and checks its settings against the run's.
func (t *Trainer) readResume() error {
	c := &t.c
	if c.Resume == "" {
		return nil
	}
	path, f := c.Resume, c.ResumeFile
	if f == nil {
		var err error
		if path, err = ResolveResume(c.Resume, c.Out); err != nil {
			return err
		}
		if f, err = ReadResume(path, c.Resume); err != nil {
			return err
		}
	}
	saved, err := SavedSettings(f)
	if err != nil {
		return fmt.Errorf("-resume %s: %w", path, err)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Settings)) {
		if v, ok := saved[k]; ok && v != c.Settings[k] && !c.MayChange[k] {
			return &SettingError{fmt.Errorf("-resume %s: setting %s is %q, the checkpoint's %q: a resumed run keeps its configuration", path, k, c.Settings[k], v)}
		}
	}
	t.resumed, t.resumePath = f, path
	return nil
}

// resumeFolder settles, before a resumed run loads anything, where it
// writes: the newest checkpoint of a run goes on in that run's folder,
// whose lock it returns in held, and a folder that another process holds
// is an error naming that process; any other checkpoint goes on in a new
// run folder, for the reason why, its own folder neither locked nor
// touched. A finished run writes nothing and holds nothing. Rank 0 alone
// decides; the others learn its verdict.
func (t *Trainer) resumeFolder() (held *checkpoint.Run, why string, err error) {
	c := &t.c
	if t.resumed != nil && c.rank() == 0 {
		var st Progress
		if jerr := t.resumed.JSON(KeyProgress, &st); jerr == nil && st.Epoch < c.Epochs {
			asNewest := t.resumePath != c.Resume
			if held, why, err = checkpoint.OpenRunOf(t.resumePath, st.Step, asNewest); err != nil {
				err = &SettingError{fmt.Errorf("-resume %s: %w", t.resumePath, err)}
			}
		}
	}
	if err = t.fromRank0(err); err != nil {
		if held != nil {
			held.Close()
		}
		return nil, "", err
	}
	return held, why, nil
}

// openRun restores a resumed run and settles the folder it writes to (the
// run's own, held, or a new one for the reason why; none for a finished
// run), or creates a new run's folder. The ranks of a data-parallel run
// then check that they hold the same weights and learn whether rank 0
// created the folder.
func (t *Trainer) openRun(held *checkpoint.Run, why string) (err error) {
	c := &t.c
	if t.resumed != nil {
		t.last = t.resumePath
		if err = t.restore(t.resumed); err == nil && t.st.Epoch < c.Epochs && t.writes() {
			t.dir, t.created, err = t.resumeRun(held, why)
		}
		t.done = t.st.Epoch >= c.Epochs
	} else if t.writes() {
		t.dir, err = checkpoint.CreateRunIn(c.Out, nil)
		t.created = true
	}
	if err == nil && c.Comm != nil {
		// The same seeds (or checkpoint) must have given every rank the
		// same weights; the run folder's fate is rank 0's.
		if err = t.solver.CheckWeights(); err == nil {
			err = t.syncCreated()
		}
	}
	return err
}

// resumeRun returns the run folder a resumed run writes to: held, the
// folder of the run whose newest checkpoint it goes on from, or else a new
// run folder under Out that records the checkpoint as its parent.
func (t *Trainer) resumeRun(held *checkpoint.Run, why string) (r *checkpoint.Run, created bool, err error) {
	if held != nil {
		return held, false, nil
	}
	c := &t.c
	r, err = checkpoint.CreateRunIn(c.Out, &checkpoint.Origin{Path: t.resumePath, Step: t.st.Step, Run: t.resumed.Meta[checkpoint.KeyRun]})
	if err != nil {
		return nil, false, err
	}
	fmt.Fprintf(c.Log, "%s is not the newest checkpoint of its run (%s): going on in a new run folder %s, leaving %s as it is\n", t.resumePath, why, r.Dir(), filepath.Dir(t.resumePath))
	return r, true, nil
}

// finished reports a resumed run that has trained all its epochs.
func (t *Trainer) finished() {
	acc := ""
	for i := len(t.st.Metrics) - 1; i >= 0; i-- {
		if m := t.st.Metrics[i]; m.Kind == "test" {
			acc = fmt.Sprintf(", test accuracy %.2f%% (best %.2f%% at step %d)", 100*m.Accuracy, 100*t.st.Best, t.st.BestStep)
			break
		}
	}
	fmt.Fprintf(t.c.Log, "%s: the run is finished: %d epochs done, step %d%s; nothing to do.\nTo train it further, resume with -epochs N, N larger than %d: train -resume %s -epochs %d\n",
		t.resumePath, t.st.Epoch, t.st.Step, acc, t.st.Epoch, t.resumePath, t.st.Epoch+1)
}
