// Package foldertest writes and records folder trees for tests: Write lays
// out the files a test reads, and for tests that show a command or a call
// left alone the files it should not touch, a Snapshot before, and Kept or
// Same after.
package foldertest

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Write writes files, each text by its slash-separated path relative to
// root, under root, making their folders; it fails t where one cannot be
// written.
func Write(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("foldertest: %v", err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatalf("foldertest: %v", err)
		}
	}
}

// Tree is every regular file and symbolic link under a root, by its path
// relative to the root: a file's SHA-256, a link's target and the SHA-256
// of what it leads to (of nothing where it leads nowhere). Folders are
// not recorded.
type Tree map[string]string

// Snapshot records the tree under root; it fails t where root cannot be
// walked.
func Snapshot(t testing.TB, root string) Tree {
	t.Helper()
	out := Tree{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			b, _ := os.ReadFile(path) // a dangling link leads to nothing
			out[rel] = "link to " + target + ": " + sum(b)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] = sum(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("foldertest: %v", err)
	}
	return out
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Kept fails t unless every entry of before is under root still, the same;
// entries added since are allowed. what names the step checked in the
// messages.
func Kept(t testing.TB, what, root string, before Tree) {
	t.Helper()
	compare(t, what, before, Snapshot(t, root), false)
}

// Same fails t unless the tree under root is before: no entry removed,
// changed or added.
func Same(t testing.TB, what, root string, before Tree) {
	t.Helper()
	compare(t, what, before, Snapshot(t, root), true)
}

// compare reports each entry of before that after lacks or holds changed
// and, if exact, each entry of after that before lacks.
func compare(t testing.TB, what string, before, after Tree, exact bool) {
	t.Helper()
	for _, name := range sorted(before) {
		if a, ok := after[name]; !ok {
			t.Errorf("%s: %s was removed", what, name)
		} else if a != before[name] {
			t.Errorf("%s: %s changed", what, name)
		}
	}
	for _, name := range sorted(after) {
		if _, ok := before[name]; exact && !ok {
			t.Errorf("%s: %s was written", what, name)
		}
	}
}

func sorted(tr Tree) []string {
	names := make([]string, 0, len(tr))
	for name := range tr {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
