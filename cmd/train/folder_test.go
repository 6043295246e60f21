package main

import (
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/orthonet/orthonet/data"
)

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
			d := filepath.Join(root, split, strconv.Itoa(int(s.Y[i])))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.Create(filepath.Join(d, fmt.Sprintf("%05d.png", i)))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, img); err != nil {
				t.Fatal(err)
			}
			f.Close()
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
