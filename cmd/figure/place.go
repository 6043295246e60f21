package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// figure writes only new files: where one of the files it would write is
// in -out already (an earlier page's, or the user's), it refuses before
// reading any run, and it writes its files into a temporary folder of its
// own in -out, from which each goes into place by a hard link, which never
// replaces a file.

// checkNew refuses, as a bad setting (exit 2), to write into out where
// any of names is there already.
func checkNew(out string, names []string) error {
	for _, n := range names {
		p := filepath.Join(out, n)
		if _, err := os.Lstat(p); err == nil {
			return &usageError{fmt.Errorf("%s exists: figure replaces no file; give another -name or -out, or move it", p)}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// staging is the temporary folder a run of figure writes its files into.
type staging struct{ out, tmp string }

// newStaging creates the temporary folder out/.NAME.figure-*.
func newStaging(out, name string) (*staging, error) {
	tmp, err := os.MkdirTemp(out, "."+name+".figure-")
	if err != nil {
		return nil, err
	}
	return &staging{out, tmp}, nil
}

// path returns where the file name is written before it goes into place.
func (s *staging) path(name string) string { return filepath.Join(s.tmp, name) }

// place puts each of names into out and returns their paths there. None
// replaces a file: a file that appeared there meanwhile fails it, and the
// files it placed in this call are removed again.
func (s *staging) place(names []string) (placed []string, err error) {
	defer func() {
		if err != nil {
			for _, p := range placed {
				os.Remove(p)
			}
			placed = nil
		}
	}()
	for _, n := range names {
		dst := filepath.Join(s.out, n)
		if err := os.Link(s.path(n), dst); err != nil {
			if _, serr := os.Lstat(dst); serr == nil {
				return placed, fmt.Errorf("%s exists: figure replaces no file", dst)
			}
			// A file system without hard links: a rename, dst being absent.
			if err := os.Rename(s.path(n), dst); err != nil {
				return placed, err
			}
		}
		placed = append(placed, dst)
	}
	return placed, nil
}

// remove removes the temporary folder and what is left in it.
func (s *staging) remove() { os.RemoveAll(s.tmp) }
