package checkpoint

import (
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Names of the files a run folder holds besides its step checkpoints.
const (
	ManifestName = "run.json"         // the run's record of what it wrote
	BestName     = "best.safetensors" // the checkpoint MarkBest chose
	LockName     = "run.lock"         // locked by the process that writes the run; holds its PID
)

// Metadata keys that Run.Save sets in every checkpoint it writes: the id of
// the run and the step. A file counts as the run's only if both match.
const (
	KeyRun  = "run.id"
	KeyStep = "run.step"
)

const (
	runFormat  = "orthonet.run"
	runVersion = 1
	maxRunFile = 16 << 20 // bound on a manifest's size
)

// ErrNotRun reports a folder that holds no run manifest.
var ErrNotRun = errors.New("checkpoint: not a run folder")

// ErrLocked reports a run folder that another process holds open for
// writing (CreateRun or OpenRun): one process at a time writes a run.
var ErrLocked = errors.New("checkpoint: run folder in use")

// Origin is the checkpoint a run started from.
type Origin struct {
	Path string `json:"path"`          // absolute path when the run was created
	Step int    `json:"step"`          // the step it was saved at
	Run  string `json:"run,omitempty"` // the id of the run that wrote it, if a Run did
}

// manifest is the content of run.json.
type manifest struct {
	Format      string   `json:"format"`
	Version     int      `json:"format_version"`
	ID          string   `json:"id"`
	Parent      *Origin  `json:"parent,omitempty"`
	Checkpoints []int    `json:"checkpoints"`    // steps, ascending
	Best        *int     `json:"best,omitempty"` // step that best.safetensors holds
	Files       []string `json:"files,omitempty"`
}

// Run is a folder holding one training run: step checkpoints
// (step-NNNNNNNNN.safetensors), best.safetensors, other files written with
// WriteFile, and the manifest run.json that records them. A Run replaces
// or removes only files it recorded and whose content is its own (a
// checkpoint must carry the run's id and step in its metadata); every
// write replaces a file atomically and never follows a symbolic link.
//
// The manifest lists a file before the file is written, so after a crash
// it may name a checkpoint that was never completed; Latest and Prune skip
// such entries.
//
// A Run that CreateRun or OpenRun returns holds the folder's lock (an OS
// lock on run.lock, which holds the holder's PID) until Close or the end of
// its process, however it ends: a second process's OpenRun fails with
// ErrLocked naming the holder. ReadRun reads a run without the lock, for
// looking only; its writing methods fail. A Run is not safe for concurrent
// use by several goroutines.
type Run struct {
	dir  string
	m    manifest
	lock *os.File // the locked run.lock; nil for ReadRun's and after Close
}

// CreateRun creates a new run, started from parent (nil for a run from
// scratch), in a new folder dir. dir must not exist yet, not even empty: a
// run owns its folder, and an existing one is an error wrapping
// fs.ErrExist (OpenRun goes on with a run in its folder). The folders above
// dir are created as needed.
func CreateRun(dir string, parent *Origin) (*Run, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: creating run folder: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("checkpoint: creating run folder %s: it exists already, and a new run needs a new folder (OpenRun goes on with the run of an existing one): %w", dir, err)
	} else if err != nil {
		return nil, fmt.Errorf("checkpoint: creating run folder: %w", err)
	}
	lock, err := lockRun(dir)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = crand.Read(id[:]) // never fails
	r := &Run{dir: dir, lock: lock, m: manifest{Format: runFormat, Version: runVersion, ID: hex.EncodeToString(id[:]), Checkpoints: []int{}}}
	if parent != nil {
		p := *parent
		if abs, err := filepath.Abs(p.Path); err == nil {
			p.Path = abs
		}
		r.m.Parent = &p
	}
	if err := r.writeManifest(); err != nil {
		r.Close()
		return nil, err
	}
	if err := SyncDir(filepath.Dir(dir)); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// lockRun takes the lock of the run folder dir without waiting: it opens
// (creating it if needed) dir/run.lock, locks it and writes this process's
// PID into it. A lock another process holds is an error wrapping ErrLocked
// that names that process's PID, as its lock file records it.
func lockRun(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: locking run folder %s: %w", dir, err)
	}
	ok, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint: locking run folder %s: %w", dir, err)
	}
	if !ok {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		holder := "another process"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil && pid > 0 {
			holder = "process " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("%w: %s is held by %s (%s), which writes the run now; one process at a time trains in a run folder",
			ErrLocked, dir, holder, path)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint: locking run folder %s: %w", dir, err)
	}
	return f, nil
}

// Close releases the run folder's lock. The Run reads on, but its writing
// methods fail. A second Close does nothing.
func (r *Run) Close() error {
	if r.lock == nil {
		return nil
	}
	err := r.lock.Close()
	r.lock = nil
	if err != nil {
		return fmt.Errorf("checkpoint: releasing run folder %s: %w", r.dir, err)
	}
	return nil
}

// writable returns an error unless r holds its folder's lock.
func (r *Run) writable() error {
	if r.lock == nil {
		return fmt.Errorf("checkpoint: run %s is open for reading only (ReadRun, or closed): OpenRun opens it for writing", r.dir)
	}
	return nil
}

// Discard removes a run that has saved nothing, its manifest, its lock file
// and its folder, as if it had never been created (a run stopped before its
// first step), and releases the lock. A run that recorded a checkpoint or a
// file, or whose folder holds anything besides its manifest and lock file,
// is left as it is, with an error.
func (r *Run) Discard() error {
	if err := r.writable(); err != nil {
		return err
	}
	if len(r.m.Checkpoints) > 0 || r.m.Best != nil || len(r.m.Files) > 0 {
		return fmt.Errorf("checkpoint: run %s has saved files; not discarding it", r.dir)
	}
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("checkpoint: discarding run %s: %w", r.dir, err)
	}
	for _, e := range ents {
		if e.Name() != ManifestName && e.Name() != LockName {
			return fmt.Errorf("checkpoint: run folder %s holds %s; not discarding it", r.dir, e.Name())
		}
	}
	if err := os.Remove(filepath.Join(r.dir, ManifestName)); err != nil {
		return fmt.Errorf("checkpoint: discarding run %s: %w", r.dir, err)
	}
	if err := os.Remove(filepath.Join(r.dir, LockName)); err != nil {
		return fmt.Errorf("checkpoint: discarding run %s: %w", r.dir, err)
	}
	if err := r.Close(); err != nil {
		return err
	}
	if err := os.Remove(r.dir); err != nil {
		return fmt.Errorf("checkpoint: discarding run %s: %w", r.dir, err)
	}
	return SyncDir(filepath.Dir(r.dir))
}

// OpenRun opens the run in dir for writing: it takes the folder's lock
// (see Run), which the caller releases with Close. A folder held by
// another process is an error wrapping ErrLocked that names its PID; a
// folder without a manifest, or whose manifest is not a regular file of
// this format, is an error wrapping ErrNotRun.
func OpenRun(dir string) (*Run, error) {
	if _, err := ReadRun(dir); err != nil { // no lock file is made in a folder that is no run
		return nil, err
	}
	lock, err := lockRun(dir)
	if err != nil {
		return nil, err
	}
	r, err := ReadRun(dir) // again, under the lock: the holder before may have written since
	if err != nil {
		lock.Close()
		return nil, err
	}
	r.lock = lock
	return r, nil
}

// ReadRun reads the run in dir without taking its lock, for looking at it
// (Latest, Checkpoints, Best, Parent); its writing methods fail. Errors are
// those of OpenRun but ErrLocked.
func ReadRun(dir string) (*Run, error) {
	path := filepath.Join(dir, ManifestName)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s", ErrNotRun, dir, ManifestName)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: opening run %s: %w", dir, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxRunFile {
		return nil, fmt.Errorf("%w: %s is not a regular file of a run manifest's size", ErrNotRun, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: opening run %s: %w", dir, err)
	}
	var m manifest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil || m.Format != runFormat {
		return nil, fmt.Errorf("%w: %s is not an %s manifest", ErrNotRun, path, runFormat)
	}
	if m.Version != runVersion {
		return nil, fmt.Errorf("checkpoint: %s has format version %d; this build reads version %d", path, m.Version, runVersion)
	}
	if !isHexID(m.ID) || !slices.IsSorted(m.Checkpoints) {
		return nil, fmt.Errorf("%w: %s has a malformed id or checkpoint list", ErrNotRun, path)
	}
	for _, name := range m.Files {
		if reservedName(name) != nil {
			return nil, fmt.Errorf("%w: %s lists the file %q", ErrNotRun, path, name)
		}
	}
	return &Run{dir: dir, m: m}, nil
}

func isHexID(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == 16 && err == nil && strings.ToLower(s) == s
}

// Dir returns the run's folder.
func (r *Run) Dir() string { return r.dir }

// ID returns the run's id, which every checkpoint it saves carries.
func (r *Run) ID() string { return r.m.ID }

// Parent returns the checkpoint the run started from, or nil.
func (r *Run) Parent() *Origin {
	if r.m.Parent == nil {
		return nil
	}
	p := *r.m.Parent
	return &p
}

// StepName returns the name of the checkpoint of step:
// step-NNNNNNNNN.safetensors.
func StepName(step int) string { return fmt.Sprintf("step-%09d.safetensors", step) }

// Save writes f as the checkpoint of step, atomically, and returns its
// path. The file's metadata gets the run's id and the step (f itself is
// not changed). A file already at that name is replaced only if it is this
// run's checkpoint of step.
func (r *Run) Save(step int, f *File) (string, error) {
	if step < 0 {
		return "", fmt.Errorf("checkpoint: saving step %d: negative step", step)
	}
	if err := r.writable(); err != nil {
		return "", err
	}
	path := filepath.Join(r.dir, StepName(step))
	if err := r.replaceable(path, step); err != nil {
		return "", err
	}
	g := &File{Tensors: f.Tensors, Meta: make(map[string]string, len(f.Meta)+2)}
	for k, v := range f.Meta {
		g.Meta[k] = v
	}
	g.Meta[KeyRun], g.Meta[KeyStep] = r.m.ID, strconv.Itoa(step)
	if i, found := slices.BinarySearch(r.m.Checkpoints, step); !found {
		r.m.Checkpoints = slices.Insert(r.m.Checkpoints, i, step)
		if err := r.writeManifest(); err != nil {
			return "", err
		}
	}
	if err := Write(path, g); err != nil {
		return "", err
	}
	return path, nil
}

// replaceable returns nil if nothing is at path or it is this run's
// checkpoint of step (any step if step < 0).
func (r *Run) replaceable(path string, step int) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if !r.owns(path, step) {
		return fmt.Errorf("checkpoint: refusing to replace %s: it is not a checkpoint this run (%s) wrote", path, r.m.ID)
	}
	return nil
}

// owns reports whether path is a regular file holding a checkpoint this run
// saved at step (at any step if step < 0). It reads the header only.
func (r *Run) owns(path string, step int) bool { return r.check(path, step) == nil }

// check returns nil if path is a regular file holding a checkpoint this run
// saved at step (at any step if step < 0), else an error naming the file
// and why it is not. It reads the header only.
func (r *Run) check(path string, step int) error {
	meta, err := readMeta(path)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case meta[KeyRun] != r.m.ID:
		return fmt.Errorf("checkpoint: %s is not a checkpoint of run %s (it carries run id %q)", path, r.m.ID, meta[KeyRun])
	case step >= 0 && meta[KeyStep] != strconv.Itoa(step):
		return fmt.Errorf("checkpoint: %s holds step %q of run %s, not step %d", path, meta[KeyStep], r.m.ID, step)
	}
	return nil
}

// readMeta returns the metadata of the checkpoint at path, a regular file,
// reading only its header.
func readMeta(path string) (map[string]string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("checkpoint: %s is not a regular file", path)
	}
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	_, hb, _, err := readHeader(fd, fi.Size())
	if err != nil {
		return nil, err
	}
	var h struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if h.Meta[keyFormat] != Format {
		return nil, fmt.Errorf("checkpoint: %s is not an orthonet checkpoint", path)
	}
	return h.Meta, nil
}

// Checkpoints returns the steps of the run's checkpoints that are on disk,
// ascending.
func (r *Run) Checkpoints() []int {
	var steps []int
	for _, s := range r.m.Checkpoints {
		if r.owns(filepath.Join(r.dir, StepName(s)), s) {
			steps = append(steps, s)
		}
	}
	return steps
}

// Latest returns the path and step of the run's newest checkpoint on disk;
// ok is false when there is none.
func (r *Run) Latest() (path string, step int, ok bool) {
	for i := len(r.m.Checkpoints) - 1; i >= 0; i-- {
		s := r.m.Checkpoints[i]
		if p := filepath.Join(r.dir, StepName(s)); r.owns(p, s) {
			return p, s, true
		}
	}
	return "", 0, false
}

// Newest returns the path and step of the newest checkpoint the run
// recorded whose file is on disk, whether it is the run's or not, or ""
// where there is none. err is nil where that file is the run's checkpoint
// of that step (as Latest returns it) and otherwise says why it is not
// (damaged, or another file put in its place); Latest skips such a file.
func (r *Run) Newest() (path string, step int, err error) {
	for i := len(r.m.Checkpoints) - 1; i >= 0; i-- {
		s := r.m.Checkpoints[i]
		p := filepath.Join(r.dir, StepName(s))
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue // listed, never written: a crash before the rename
		} else if err != nil {
			return p, s, fmt.Errorf("checkpoint: %w", err)
		}
		return p, s, r.check(p, s)
	}
	return "", 0, nil
}

// MarkBest makes best.safetensors the run's checkpoint of step: a hard
// link to it, or where links are not supported a copy, put in place
// atomically. A best.safetensors that the run did not write is an error.
func (r *Run) MarkBest(step int) error {
	if err := r.writable(); err != nil {
		return err
	}
	src := filepath.Join(r.dir, StepName(step))
	if !r.owns(src, step) {
		return fmt.Errorf("checkpoint: marking step %d best: %s is not a checkpoint of run %s", step, src, r.m.ID)
	}
	dst := filepath.Join(r.dir, BestName)
	if err := r.replaceable(dst, -1); err != nil {
		return err
	}
	r.m.Best = &step
	if err := r.writeManifest(); err != nil {
		return err
	}
	for {
		tmp := filepath.Join(r.dir, tempName(BestName))
		err := os.Link(src, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil { // no hard links here: copy
			return writeAtomic(r.dir, BestName, 0o600, func(w io.Writer) error {
				in, err := os.Open(src)
				if err != nil {
					return err
				}
				defer in.Close()
				_, err = io.Copy(w, in)
				return err
			})
		}
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("checkpoint: marking step %d best: %w", step, err)
		}
		return SyncDir(r.dir)
	}
}

// Best returns the path and step of best.safetensors; ok is false when the
// run has not marked one or it is gone.
func (r *Run) Best() (path string, step int, ok bool) {
	path = filepath.Join(r.dir, BestName)
	if r.m.Best == nil || !r.owns(path, *r.m.Best) {
		return "", 0, false
	}
	return path, *r.m.Best, true
}

// Prune removes all but the newest keep of the run's step checkpoints
// (best.safetensors is apart and stays), and the temporary files that
// writes of this run killed before their rename left: exactly
// "." + a name the run records + ".tmp-" + 16 hex digits. It touches
// nothing else; a listed checkpoint whose file is gone or no longer the
// run's is dropped from the manifest and its file, if any, left alone.
func (r *Run) Prune(keep int) error {
	if keep < 0 {
		return fmt.Errorf("checkpoint: pruning to %d checkpoints", keep)
	}
	if err := r.writable(); err != nil {
		return err
	}
	names := map[string]bool{ManifestName: true, BestName: true}
	for _, s := range r.m.Checkpoints {
		names[StepName(s)] = true
	}
	for _, n := range r.m.Files {
		names[n] = true
	}
	steps := r.Checkpoints()
	for _, s := range steps[:max(0, len(steps)-keep)] {
		if err := os.Remove(filepath.Join(r.dir, StepName(s))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint: pruning: %w", err)
		}
	}
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("checkpoint: pruning: %w", err)
	}
	for _, e := range ents {
		if base, ok := tempBase(e.Name()); ok && names[base] && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(r.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("checkpoint: pruning: %w", err)
			}
		}
	}
	kept := append([]int{}, steps[max(0, len(steps)-keep):]...)
	if !slices.Equal(kept, r.m.Checkpoints) {
		r.m.Checkpoints = kept
		if err := r.writeManifest(); err != nil {
			return err
		}
	}
	return SyncDir(r.dir)
}

// WriteFile replaces the file name in the run's folder, atomically, with
// what write writes; it records name in the manifest first. A file of that
// name that the run did not write is an error and stays as it is. Names of
// checkpoints, best.safetensors, run.json, temporary files and names with
// a path separator or a leading dot are refused.
func (r *Run) WriteFile(name string, write func(io.Writer) error) error {
	if err := reservedName(name); err != nil {
		return err
	}
	if err := r.writable(); err != nil {
		return err
	}
	path := filepath.Join(r.dir, name)
	if !slices.Contains(r.m.Files, name) {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("checkpoint: refusing to replace %s: run %s did not write it", path, r.m.ID)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint: %w", err)
		}
		r.m.Files = append(r.m.Files, name)
		if err := r.writeManifest(); err != nil {
			return err
		}
	}
	return writeAtomic(r.dir, name, 0o644, write)
}

// Files returns the names written with WriteFile, in the order first
// written.
func (r *Run) Files() []string { return slices.Clone(r.m.Files) }

// reservedName returns an error if a file of WriteFile may not be called
// name.
func reservedName(name string) error {
	switch {
	case name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, "."):
		return fmt.Errorf("checkpoint: file name %q: want a plain name without a leading dot", name)
	case name == ManifestName || name == BestName || name == LockName ||
		strings.HasPrefix(name, "step-") && strings.HasSuffix(name, ".safetensors"):
		return fmt.Errorf("checkpoint: file name %q is reserved for the run's checkpoints", name)
	}
	return nil
}

func (r *Run) writeManifest() error {
	b, err := json.MarshalIndent(r.m, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: encoding the run manifest: %w", err)
	}
	b = append(b, '\n')
	return writeAtomic(r.dir, ManifestName, 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
