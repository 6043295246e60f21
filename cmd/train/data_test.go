package main

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/internal/datatest"
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

// writeFolder writes the MNIST-format sets of dir as an image folder:
// root/{train,test}/CLASS/NNNNN.png, grayscale, the original bytes.
func writeFolder(t *testing.T, dir string) string {
	t.Helper()
	root := t.TempDir()
	for split, train := range map[string]bool{"train": true, "test": false} {
		s, err := data.Load("mnist", dir, train)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.N {
			img := image.NewGray(image.Rect(0, 0, s.W, s.H))
			for p, v := range s.Image(i) {
				img.Pix[p] = uint8((v + 1) * 127.5)
			}
			datatest.WritePNG(t, filepath.Join(root, split, strconv.Itoa(int(s.Y[i])), fmt.Sprintf("%05d.png", i)), img)
		}
	}
	return root
}

// TestFolderDataset trains the FFN on the fixture written as an image
// folder: it learns as it does from the IDX files, and what -dataset
// folder cannot take is refused with exit 2.
func TestFolderDataset(t *testing.T) {
	root := writeFolder(t, mnistDir(t, 200, 50))
	args := []string{"-dataset", "folder", "-data", root, "-hidden", "32", "-depth", "2", "-r", "8", "-lr", "0.2", "-batch", "10", "-epochs", "2", "-device", "cpu"}
	stdout, stderr, code := trainExit(t, append(args, "-out", t.TempDir())...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	m := regexp.MustCompile(`test accuracy: ([0-9.]+)%`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no test accuracy in\n%s", stdout)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 80 {
		t.Errorf("test accuracy %.2f%% on the banded fixture as a folder, want >= 80%%", acc)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no -data", []string{"-dataset", "folder"}, "-dataset folder needs -data DIR"},
		{"-limit-train", []string{"-dataset", "folder", "-data", root, "-limit-train", "10"}, "-limit-train and -limit-test do not apply"},
		{"not a folder of classes", []string{"-dataset", "folder", "-data", t.TempDir()}, "train"},
	} {
		_, stderr, code := trainExit(t, append(tc.args, "-out", t.TempDir())...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", tc.name, code, stderr)
		}
		oneLine(t, tc.name, stderr, tc.want)
	}
}

// TestLimitTrainBoundsRead trains on the first 30 examples of crafted
// gzip'd files that announce 60,000 (47 MB of pixels, 188 MB as float32)
// in under 200 KB: loading allocates what 30 examples need, not what the
// headers claim.
func TestLimitTrainBoundsRead(t *testing.T) {
	dir := t.TempDir()
	datatest.WriteHugeMNIST(t, dir, "train", 60000)
	datatest.WriteHugeMNIST(t, dir, "t10k", 60000)
	c, err := parseFlags([]string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-limit-train", "30", "-limit-test", "10"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	train, test, err := loadData(context.Background(), c, io.Discard)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if train.N != 30 || test.N != 10 {
		t.Errorf("loaded %d and %d examples, want 30 and 10", train.N, test.N)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("loading 30 + 10 examples allocated %d MB", got>>20)
	}
}
