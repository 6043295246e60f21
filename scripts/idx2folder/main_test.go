package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/internal/datatest"
)

// writeIDX writes raw Fashion-MNIST files prefix-{images-idx3,labels-idx1}-ubyte
// into dir: n images of 28 x 28 whose pixel j of image i is (7i + 13j) % 256
// (every byte value), and labels (3i + 1) % 10 (every class when n >= 10).
func writeIDX(t *testing.T, dir, prefix string, n int) {
	t.Helper()
	images := datatest.IDXHeader(n, 28, 28)
	labels := datatest.IDXHeader(n)
	for i := range n {
		for j := range 28 * 28 {
			images = append(images, byte(7*i+13*j))
		}
		labels = append(labels, byte((3*i+1)%10))
	}
	for name, b := range map[string][]byte{prefix + "-images-idx3-ubyte": images, prefix + "-labels-idx1-ubyte": labels} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRoundTrip checks that image folders written from IDX files read back,
// at 28 x 28, as exactly the IDX files' pixels and labels.
func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	writeIDX(t, src, "train", 23)
	writeIDX(t, src, "t10k", 12)
	out := filepath.Join(t.TempDir(), "folders")
	if err := run("fashion-mnist", src, out, 0, 0); err != nil {
		t.Fatal(err)
	}
	train, test, err := data.ReadImageFolderSplit(out, data.FolderOptions{C: 1, H: 28, W: 28})
	if err != nil {
		t.Fatal(err)
	}
	if want := folderNames(data.ClassNames("fashion-mnist")); !slices.Equal(train.ClassNames, want) {
		t.Errorf("classes %q, want %q", train.ClassNames, want)
	}
	for _, tc := range []struct {
		got  *data.Set
		raw  bool
		want int
	}{{train, true, 23}, {test, false, 12}} {
		idx, err := data.Load("fashion-mnist", src, tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		if tc.got.N != tc.want || idx.N != tc.want {
			t.Fatalf("%d examples read back, %d in the IDX files; want %d", tc.got.N, idx.N, tc.want)
		}
		seen := map[int]bool{}
		for k, f := range tc.got.Files {
			i, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".png"))
			if err != nil || i < 1 || i > idx.N || seen[i] {
				t.Fatalf("file %s: not the number of an example", f)
			}
			seen[i] = true
			if !slices.Equal(tc.got.Image(k), idx.Image(i-1)) {
				t.Errorf("%s: pixels differ from example %d of the IDX file", f, i-1)
			}
			if tc.got.Y[k] != idx.Y[i-1] {
				t.Errorf("%s: label %d, the IDX file's %d", f, tc.got.Y[k], idx.Y[i-1])
			}
		}
	}
	// The first example has pixels 0, 13, 26, ... as bytes; pixel 59 is 255.
	first := filepath.Join(out, "train", "1_Trouser", "00001.png")
	s, err := data.ReadImageFile(first, 1)
	if err != nil || s.X[1] != float32(13)/127.5-1 || s.X[59] != 1 {
		t.Errorf("%s: %v", first, err)
	} else if s.X[0] != -1 {
		t.Errorf("%s: pixel 0 is %v, want -1", first, s.X[0])
	}
}

// TestOutRefused checks that a user's files are never written over, and
// that a failed run leaves nothing behind.
func TestOutRefused(t *testing.T) {
	src := t.TempDir()
	writeIDX(t, src, "train", 10)
	writeIDX(t, src, "t10k", 10)
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, out string)
		limit int
		fault string // "" if the run must succeed
	}{
		{"absent", func(*testing.T, string) {}, 0, ""},
		{"empty folder", func(t *testing.T, out string) { mkdir(t, out) }, 0, ""},
		{"non-empty folder", func(t *testing.T, out string) {
			mkdir(t, out)
			writeFile(t, filepath.Join(out, "mine.txt"))
		}, 0, "is not empty"},
		{"file", func(t *testing.T, out string) { writeFile(t, out) }, 0, "not a folder"},
		{"class left empty", func(*testing.T, string) {}, 9, `the 9 train examples written would leave class "8_Bag" without images`},
	} {
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		tc.make(t, out)
		before := listing(t, parent)
		err := run("fashion-mnist", src, out, tc.limit, 0)
		if tc.fault == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if got, _ := os.ReadDir(parent); len(got) != 1 || got[0].Name() != "out" {
				t.Errorf("%s: %v left beside the output", tc.name, got)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.fault) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.fault)
		}
		if after := listing(t, parent); !slices.Equal(after, before) {
			t.Errorf("%s: the parent folder went from %q to %q", tc.name, before, after)
		}
	}
	if err := run("imagenet", src, filepath.Join(t.TempDir(), "x"), 0, 0); err == nil || !strings.Contains(err.Error(), "unknown data set") {
		t.Errorf("an unknown data set: error %v", err)
	}
}

func TestFolderNames(t *testing.T) {
	for _, tc := range []struct {
		names, want []string
	}{
		{data.ClassNames("mnist"), data.ClassNames("mnist")},
		{data.ClassNames("cifar10"), data.ClassNames("cifar10")},
		{data.ClassNames("fashion-mnist"), []string{"0_T-shirt_top", "1_Trouser", "2_Pullover", "3_Dress", "4_Coat", "5_Sandal", "6_Shirt", "7_Sneaker", "8_Bag", "9_Ankle boot"}},
		{[]string{"a/b", "a:b"}, []string{"0_a_b", "1_a_b"}}, // made alike: labels keep them apart
		{[]string{".git", "x"}, []string{"_.git", "x"}},
		{[]string{"", "y"}, []string{"_", "y"}},
		{[]string{"b", "a", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, []string{"00_b", "01_a", "02_c", "03_d", "04_e", "05_f", "06_g", "07_h", "08_i", "09_j", "10_k"}},
	} {
		if got := folderNames(tc.names); !slices.Equal(got, tc.want) {
			t.Errorf("folderNames(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("a user's file"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listing returns the paths under dir, relative to it.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, path)
		names = append(names, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
