//go:build unix

package data

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadImageFolderSpecialFiles checks that named pipes, devices and
// symbolic link loops are refused, or skipped, without blocking, and that
// symbolic links to an image or a class folder are followed.
func TestReadImageFolderSpecialFiles(t *testing.T) {
	good := rampPNG(t, 9)
	for _, tc := range []struct {
		name  string
		bad   func(t *testing.T, class string) string
		fault string
	}{
		{"fifo", func(t *testing.T, c string) string {
			p := filepath.Join(c, "pipe.png")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Skip("no named pipes here:", err)
			}
			return p
		}, "a named pipe, not a regular file"},
		{"link to fifo", func(t *testing.T, c string) string {
			if err := syscall.Mkfifo(filepath.Join(c, ".pipe"), 0o644); err != nil {
				t.Skip("no named pipes here:", err)
			}
			return symlink(t, ".pipe", filepath.Join(c, "pipe.png"))
		}, "a named pipe, not a regular file"},
		{"device", func(t *testing.T, c string) string { return symlink(t, "/dev/zero", filepath.Join(c, "zero.png")) }, "a device"},
		{"link loop", func(t *testing.T, c string) string { return symlink(t, "loop.png", filepath.Join(c, "loop.png")) }, "too many levels of symbolic links"},
		{"dangling link", func(t *testing.T, c string) string { return symlink(t, "gone.png", filepath.Join(c, "dangling.png")) }, "no such file"},
	} {
		for _, skip := range []bool{false, true} {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a"), "0.png", good)
			writeFile(t, filepath.Join(dir, "b"), "0.png", good)
			path := tc.bad(t, filepath.Join(dir, "a"))
			type result struct {
				s   *Set
				err error
			}
			done := make(chan result, 1)
			go func() {
				s, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4, Skip: skip})
				done <- result{s, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: ReadImageFolder blocked", tc.name)
			}
			if !skip {
				if r.err == nil || !strings.Contains(r.err.Error(), path) || !strings.Contains(r.err.Error(), tc.fault) {
					t.Errorf("%s: error %v, want one naming %s and saying %q", tc.name, r.err, path, tc.fault)
				}
				continue
			}
			if r.err != nil || r.s.N != 2 || len(r.s.Skipped) != 1 || !strings.Contains(r.s.Skipped[0], path) {
				t.Errorf("%s, skipping: %v, skipped %v; want 2 images and %s skipped", tc.name, r.err, r.s.Skipped, path)
			}
		}
	}

	// Links to an image and to a class folder are followed; a loop among
	// class folders is an error.
	dir, other := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(other, "imgs"), "x.png", rampPNG(t, 40))
	writeFile(t, filepath.Join(dir, "a"), "0.png", good)
	symlink(t, filepath.Join(other, "imgs", "x.png"), filepath.Join(dir, "a", "1.png"))
	symlink(t, filepath.Join(other, "imgs"), filepath.Join(dir, "b"))
	s, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.X, scaled(slices.Concat(ramp(9), ramp(40), ramp(40))...)) || !slices.Equal(s.Y, []uint8{0, 0, 1}) {
		t.Errorf("through links: labels %v, pixels %v", s.Y, s.X)
	}
	symlink(t, "c", filepath.Join(dir, "c"))
	if _, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4}); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("a class folder that links to itself: error %v", err)
	}
}

// symlink makes a symbolic link at path to target, returning path.
func symlink(t *testing.T, target, path string) string {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	return path
}

// TestReadImageFileSpecial checks that ReadImageFile (train predict's
// reader) refuses a named pipe, a link to one and a link loop at once
// instead of blocking in open.
func TestReadImageFileSpecial(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "pipe.png")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	link := filepath.Join(dir, "link.png")
	loop := filepath.Join(dir, "loop.png")
	if err := errors.Join(os.Symlink(pipe, link), os.Symlink(loop, loop)); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{pipe, link, loop} {
		done := make(chan error, 1)
		go func() { _, err := ReadImageFile(path, 1); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: read, want an error", path)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: ReadImageFile blocked", path)
		}
	}
}
