package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Finding runs and their checkpoints: where a new run's folder goes, which
// checkpoint of a run is its newest, which run under a folder saved last,
// which other checkpoints of a run load, and whether a run resumed from a
// checkpoint may go on in that checkpoint's folder.

// RunPrefix begins the name of every run folder that CreateRunIn makes, and
// of the folders LatestUnder searches.
const RunPrefix = "run-"

// CreateRunIn creates a run (CreateRun) started from parent (nil for a run
// from scratch) in a new folder under out named by the time:
// run-YYYYMMDD-HHMMSS, or run-YYYYMMDD-HHMMSS-2, -3 and so on where that
// name is taken. It never reuses an existing folder.
func CreateRunIn(out string, parent *Origin) (*Run, error) {
	return createRunNamed(out, RunPrefix+time.Now().Format("20060102-150405"), parent)
}

// createRunNamed creates a run in the folder out/stem, or out/stem-2,
// out/stem-3 and so on, the first that does not exist.
func createRunNamed(out, stem string, parent *Origin) (*Run, error) {
	base := filepath.Join(out, stem)
	dir := base
	for k := 2; ; k++ {
		r, err := CreateRun(dir, parent)
		if !errors.Is(err, fs.ErrExist) {
			return r, err
		}
		dir = fmt.Sprintf("%s-%d", base, k)
	}
}

// ParseStepName returns the step of a file named as StepName names a
// checkpoint (with any number of digits: step-12.safetensors is step 12);
// ok is false for any other name.
func ParseStepName(name string) (step int, ok bool) {
	s, ok := strings.CutPrefix(name, "step-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".safetensors")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// NewestIn returns the newest checkpoint of the run in dir, or "" where
// there is none: the newest its manifest records that is on disk
// (Run.Newest), or in a folder of an earlier version without a manifest
// the step-*.safetensors regular file of the highest step. bad is nil
// where that file is the run's checkpoint and otherwise says why it is not
// (damaged, or another file put in its place); a folder without a manifest
// has no run to check it against. It only reads. Errors of the file system
// are returned as they are: they name the path.
func NewestIn(dir string) (path string, bad, err error) {
	r, err := ReadRun(dir)
	switch {
	case err == nil:
		path, _, bad = r.Newest()
		return path, bad, nil
	case !errors.Is(err, ErrNotRun):
		return "", nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	top := -1
	for _, e := range ents {
		if s, ok := ParseStepName(e.Name()); ok && s > top && e.Type().IsRegular() {
			top, path = s, filepath.Join(dir, e.Name())
		}
	}
	return path, nil, nil
}

// LatestUnder returns the newest checkpoint (NewestIn) of the run folder
// under out (RunPrefix*) that saved last, by the modification time of
// that checkpoint, or "" where no such folder holds one; bad is NewestIn's
// for it. A malformed out is an error wrapping filepath.ErrBadPattern;
// errors of the file system are returned as they are.
func LatestUnder(out string) (path string, bad, err error) {
	runs, err := filepath.Glob(filepath.Join(out, RunPrefix+"*"))
	if err != nil {
		return "", nil, err
	}
	var last int64
	for _, dir := range runs {
		p, b, err := NewestIn(dir)
		if err != nil {
			return "", nil, err
		}
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return "", nil, err
		}
		if mtime := fi.ModTime().UnixNano(); path == "" || mtime > last {
			path, last, bad = p, mtime, b
		}
	}
	return path, bad, nil
}

// Saved is a checkpoint file of a run and the step it holds.
type Saved struct {
	Path string
	Step int
}

// OthersThatLoad returns the checkpoints of the run in the folder of path,
// other than the file at path, that Read loads, newest first: the run's
// step checkpoints, then best.safetensors where it holds a step none of
// them does. It returns nil where the folder holds no run. It reads each
// candidate whole (Read checks every checksum): it serves the message for
// a checkpoint that did not load, which names those to go on from.
func OthersThatLoad(path string) []Saved {
	r, err := ReadRun(filepath.Dir(path))
	if err != nil {
		return nil
	}
	var out []Saved
	steps := r.Checkpoints()
	for i := len(steps) - 1; i >= 0; i-- {
		p := filepath.Join(r.Dir(), StepName(steps[i]))
		if sameFile(p, path) {
			continue
		}
		if _, err := Read(p); err == nil {
			out = append(out, Saved{p, steps[i]})
		}
	}
	if p, step, ok := r.Best(); ok && !sameFile(p, path) && !slices.Contains(steps, step) {
		if _, err := Read(p); err == nil {
			out = append(out, Saved{p, step})
		}
	}
	return out
}

// OpenRunOf opens for writing the run that saved the checkpoint at path,
// which holds step, so that a run resumed from it goes on in its folder.
// That is right only for the run's newest checkpoint: for any other file
// (an older checkpoint, one behind a newest that does not load, a copy, a
// file in a folder without a run manifest, or in a folder that cannot be
// written) it returns a nil Run and in why the reason, and the caller goes
// on in a new run folder (CreateRunIn), leaving path's folder as it is.
//
// asNewest says that path was found as its run's newest (NewestIn,
// LatestUnder) rather than named: a newer checkpoint that the process
// holding the folder has saved since then does not send it to a new
// folder, and the held folder is an error instead. A folder that another
// process holds is an error wrapping ErrLocked; the newest checkpoint is
// compared again under the lock, since the holder before may have saved.
func OpenRunOf(path string, step int, asNewest bool) (r *Run, why string, err error) {
	dir := filepath.Dir(path)
	ro, err := ReadRun(dir)
	if err != nil {
		return nil, fmt.Sprintf("%s holds no run manifest %s", dir, ManifestName), nil
	}
	newest, s, bad := ro.Newest()
	same := sameFile(newest, path)
	switch {
	case newest == "":
		return nil, fmt.Sprintf("the run in %s wrote no such checkpoint", dir), nil
	case asNewest: // the run's newest, even if its holder has saved since
	case !same && bad != nil:
		return nil, fmt.Sprintf("the newest checkpoint of its run, %s, does not load: %v", filepath.Base(newest), bad), nil
	case !same && s == step:
		return nil, fmt.Sprintf("it is not the run's own %s", filepath.Base(newest)), nil
	case !same:
		return nil, fmt.Sprintf("the newest checkpoint of its run is %s", filepath.Base(newest)), nil
	case bad != nil: // it loads, but the run did not save it there
		return nil, fmt.Sprintf("it is not the checkpoint its run saved there: %v", bad), nil
	}
	if r, err = OpenRun(dir); errors.Is(err, ErrLocked) {
		return nil, "", err
	} else if err != nil {
		return nil, fmt.Sprintf("its folder cannot be written: %v", err), nil
	}
	if newest, _, _ := r.Newest(); !sameFile(newest, path) {
		r.Close()
		return nil, fmt.Sprintf("the newest checkpoint of its run is now %s", filepath.Base(newest)), nil
	}
	return r, "", nil
}

// sameFile reports whether a and b name one file that exists.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
