package main

import (
	"fmt"
	"image"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/orthonet/orthonet/internal/datatest"
	"github.com/orthonet/orthonet/internal/runtest"
)

func TestMain(m *testing.M) { runtest.Main(m, run) }

// writeFolder writes root/{train,test}/CLASS/*.png: per class a bright
// band at its own rows over noise, 12x12 grayscale.
func writeFolder(t *testing.T, root string, perClass map[string]int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	classes := []string{"ant", "bee", "cat", "dog"}
	for split, n := range perClass {
		for k, name := range classes {
			for i := range n {
				img := image.NewGray(image.Rect(0, 0, 12, 12))
				for p := range img.Pix {
					img.Pix[p] = uint8(rng.IntN(90))
					if row := p / 12; row >= 3*k && row < 3*k+3 {
						img.Pix[p] += 150
					}
				}
				datatest.WritePNG(t, filepath.Join(root, split, name, fmt.Sprintf("%03d.png", i)), img)
			}
		}
	}
}

func TestInterruptThenResume(t *testing.T) {
	root := t.TempDir()
	writeFolder(t, root, map[string]int{"train": 40, "test": 10})
	runtest.InterruptThenResume(t, 6, "-data", root, "-size", "12", "-batch", "8", "-epochs", "3", "-r", "16", "-device", "cpu")
	// The run learned: its final test accuracy is far above chance.
	out := t.TempDir()
	if code := run([]string{"-data", root, "-size", "12", "-batch", "8", "-epochs", "3", "-r", "16", "-device", "cpu", "-out", out}, io.Discard, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, st := runtest.Final(t, out)
	last := st.Metrics[len(st.Metrics)-1]
	if last.Kind != "test" || last.Accuracy < 0.9 || last.Feasibility == nil || !(*last.Feasibility < 1e-5) {
		t.Errorf("final row %+v: want a test row of accuracy >= 0.9 and ||W^T W - I||_F < 1e-5", last)
	}
}

func TestRefusesBadFolder(t *testing.T) {
	root := t.TempDir()
	writeFolder(t, root, map[string]int{"train": 2, "test": 1})
	if err := os.WriteFile(filepath.Join(root, "train", "cat", "empty.png"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"-data", root, "-size", "12", "-device", "cpu", "-out", t.TempDir()}, io.Discard, io.Discard); code != 2 {
		t.Errorf("a folder with an empty file: exit %d, want 2", code)
	}
	if code := run([]string{"-device", "cpu"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("no -data: exit %d, want 2", code)
	}
}
