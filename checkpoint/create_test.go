package checkpoint

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateNew writes a new file, and refuses a path that holds a file or
// a link, or comes to hold one while the file is written, leaving it (and
// a link's target) as it was, and a write that fails: no temporary file is
// left behind in any case.
func TestCreateNew(t *testing.T) {
	report := func(_ string, w io.Writer) error { _, err := io.WriteString(w, "report"); return err }
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, path string) // what stands at path before
		write   func(path string, w io.Writer) error
		wantErr string // "" for success
		want    string // path's content afterwards ("" for no file)
	}{
		{"new", nil, report, "", "report"},
		{"file there", func(t *testing.T, path string) { mustWrite(t, path, "the user's") }, report, "exists: not replaced", "the user's"},
		{"link there", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(path), "target"), path); err != nil {
				t.Skip("no symbolic links here:", err)
			}
		}, report, "exists: not replaced", ""},
		{"file appears meanwhile", nil, func(path string, w io.Writer) error {
			mustWrite(t, path, "the user's")
			return report(path, w)
		}, "exists: not replaced", "the user's"},
		{"write fails", nil, func(_ string, w io.Writer) error {
			_, _ = io.WriteString(w, "half")
			return errors.New("disk on fire")
		}, "disk on fire", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "report.csv")
			if c.setup != nil {
				c.setup(t, path)
			}
			err := CreateNew(path, 0o644, func(w io.Writer) error { return c.write(path, w) })
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one with %q", err, c.wantErr)
			}
			got, rerr := os.ReadFile(path)
			if c.want == "" && rerr == nil || c.want != "" && string(got) != c.want {
				t.Errorf("path holds %q (%v), want %q", got, rerr, c.want)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.Contains(e.Name(), tempSuffix) {
					t.Errorf("temporary file %s left behind", e.Name())
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, "target")); err == nil {
				t.Error("a link's target was written")
			}
		})
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
