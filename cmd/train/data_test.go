package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadData checks loadData's errors: missing files get the -data and
// -download hint, a corrupt file and a test set of another image size get
// an error naming the files instead.
func TestLoadData(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare writes the data set into dir.
		prepare func(t *testing.T, dir string)
		want    []string // in the error, each with dir put for DIR; nil: loads
		hint    bool     // the error suggests -data and -download
	}{
		{"missing", func(t *testing.T, dir string) {}, []string{"DIR/train-images-idx3-ubyte"}, true},
		{"missing-test", func(t *testing.T, dir string) { fixture(t, 20, "train", dir, 1) }, []string{"DIR/t10k-images-idx3-ubyte"}, true},
		{"corrupt", func(t *testing.T, dir string) {
			fixture(t, 20, "train", dir, 1)
			fixture(t, 10, "t10k", dir, 2)
			truncate(t, filepath.Join(dir, "train-images-idx3-ubyte"), 100)
		}, []string{"DIR/train-images-idx3-ubyte", "truncated"}, false},
		{"sizes-differ", func(t *testing.T, dir string) {
			fixture(t, 20, "train", dir, 1)
			fixture(t, 10, "t10k", dir, 2)
			// Make the test images 10 of 28 x 14: the same bytes, other dimensions.
			p := filepath.Join(dir, "t10k-images-idx3-ubyte")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b[:12], append([]byte{0, 0, 0, 14}, b[16:16+10*28*14]...)...)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"DIR/train-images-idx3-ubyte,", "1x28x28", "DIR/t10k-images-idx3-ubyte,", "1x28x14"}, false},
		{"good", func(t *testing.T, dir string) {
			fixture(t, 20, "train", dir, 1)
			fixture(t, 10, "t10k", dir, 2)
		}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.prepare(t, dir)
			train, test, err := loadData(context.Background(), smallConfig(t, dir), io.Discard)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if train.N != 20 || test.N != 10 || train.H != 32 || test.W != 32 {
					t.Errorf("loaded %d and %d images of %dx%d and %dx%d, want 20 and 10 of 32x32", train.N, test.N, train.H, train.W, test.H, test.W)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if hint := strings.Contains(err.Error(), "-download"); hint != tc.hint {
				t.Errorf("error %q: hint is %v, want %v", err, hint, tc.hint)
			}
			if errors.Is(err, fs.ErrNotExist) != tc.hint {
				t.Errorf("error %q: fs.ErrNotExist is %v, want %v", err, !tc.hint, tc.hint)
			}
		})
	}
}

// truncate cuts the file at path to its first n bytes.
func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}
