package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// runPrefix begins the name of each run's folder under -out.
const runPrefix = "run-"

// runDir is the folder one run writes into: a new temporary folder under
// -out (.run-YYYYMMDD-HHMMSS.tmp-*), renamed by finish to a new folder
// out/run-YYYYMMDD-HHMMSS (-2, -3 and so on where that name is taken) once
// every file is written. bench never writes into, replaces or removes
// anything else under -out: earlier runs' folders and the user's files stay
// as they are.
type runDir struct {
	out, stem, tmp string
	stop           func() // ends the removal of tmp on a signal
}

// newRunDir creates out (where missing) and the run's temporary folder in
// it, named after start. Until finish or discard, an interrupt or SIGTERM
// removes the temporary folder and ends the process (exit 130).
func newRunDir(out string, start time.Time) (*runDir, error) {
	if out == "" {
		return nil, &usageError{errors.New("-out: want a folder")}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, &usageError{fmt.Errorf("-out %s: %w", out, err)}
	}
	stem := runPrefix + start.Format("20060102-150405")
	tmp, err := os.MkdirTemp(out, "."+stem+".tmp-")
	if err != nil {
		return nil, &usageError{fmt.Errorf("-out %s is not a folder bench can write in: %w", out, err)}
	}
	d := &runDir{out: out, stem: stem, tmp: tmp}
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			os.RemoveAll(tmp)
			fmt.Fprintf(os.Stderr, "bench: %v: the run's partial results in %s removed\n", s, tmp)
			os.Exit(130)
		case <-done:
		}
	}()
	var once sync.Once
	d.stop = func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
		})
	}
	return d, nil
}

// finish renames the temporary folder to the run's own new folder and
// returns its path: the first of out/run-STAMP, out/run-STAMP-2, ... that
// does not exist. os.Rename never replaces a folder (nor does the kernel a
// folder that holds anything, or a file by a folder).
func (d *runDir) finish() (string, error) {
	d.stop()
	if err := os.Chmod(d.tmp, 0o755); err != nil {
		return "", fmt.Errorf("%w; the results are left in %s", err, d.tmp)
	}
	base := filepath.Join(d.out, d.stem)
	dir := base
	for k := 2; ; k++ {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			err := os.Rename(d.tmp, dir)
			if err == nil {
				return dir, nil
			}
			if _, serr := os.Lstat(dir); serr != nil {
				return "", fmt.Errorf("%w; the results are left in %s", err, d.tmp)
			}
			// dir appeared meanwhile: the next name.
		}
		dir = fmt.Sprintf("%s-%d", base, k)
	}
}

// discard removes the temporary folder and what the run wrote into it.
func (d *runDir) discard() {
	d.stop()
	os.RemoveAll(d.tmp)
}

// usageError is a bad setting: bench exits 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// checksError is a run whose results were all written but whose checks
// failed (make test's): its folder is kept.
type checksError struct{ msg string }

func (e *checksError) Error() string { return e.msg }
