package foldertest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// recorder is a testing.TB that keeps the failures reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

// TestKeptAndSame changes, removes and adds files and a link's target
// after a snapshot: Kept reports the changed and removed entries, Same
// the added ones too, and an untouched tree passes both.
func TestKeptAndSame(t *testing.T) {
	root := t.TempDir()
	write := func(name, s string) { Write(t, root, map[string]string{name: s}) }
	write("a", "alpha")
	write("sub/b", "beta")
	write("target", "what the link leads to")
	if err := os.Symlink("target", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	before := Snapshot(t, root)
	if len(before) != 4 {
		t.Fatalf("snapshot %v, want the 3 files and the link", before)
	}
	for _, check := range []func(testing.TB, string, string, Tree){Kept, Same} {
		r := &recorder{TB: t}
		check(r, "untouched", root, before)
		if len(r.errs) != 0 {
			t.Errorf("an untouched tree: %v", r.errs)
		}
	}
	write("a", "alpha!")
	write("target", "the link's target changed")
	os.Remove(filepath.Join(root, "sub", "b"))
	write("new", "added")
	want := []string{"x: a changed", "x: link changed", "x: sub/b was removed", "x: target changed"}
	r := &recorder{TB: t}
	Kept(r, "x", root, before)
	if !slices.Equal(r.errs, want) {
		t.Errorf("Kept reported %q, want %q", r.errs, want)
	}
	r = &recorder{TB: t}
	Same(r, "x", root, before)
	if want := append(want, "x: new was written"); !slices.Equal(r.errs, want) {
		t.Errorf("Same reported %q, want %q", r.errs, want)
	}
}
