package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRun writes a run folder under dir/name/run-1 whose metrics.csv has a
// training row, a subset evaluation (ignored) and whole-test-set
// evaluations at the given training seconds and accuracies.
func writeRun(t *testing.T, dir, name string, times, accs []float64) {
	t.Helper()
	d := filepath.Join(dir, name, "run-1")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("kind,epoch,step,seconds,loss,accuracy,max_feasibility,test_examples,skipped,train_seconds\n")
	b.WriteString("train,1,5,0.5,2.0,0.3,,,0,0.4\n")
	b.WriteString("test,1,5,0.6,2.0,0.99,1e-6,100,,0.45\n")
	for i, tm := range times {
		fmt.Fprintf(&b, "test,1,%d,%g,1.0,%g,2e-6,1000,,%g\n", 10*(i+1), tm+1, accs[i], tm)
	}
	if err := os.WriteFile(filepath.Join(d, "metrics.csv"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFigure checks the table's means and spreads at each grid time (a
// run's accuracy at t being its last evaluation before t plus half a step,
// subset evaluations ignored), the grid's end at the shortest run, the
// runs' rows, and that a PNG is written.
func TestFigure(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	writeRun(t, dir, "a-1", []float64{1.001, 2.002, 3.001}, []float64{0.5, 0.6, 0.7})
	writeRun(t, dir, "a-2", []float64{1.002, 2.001, 3.002}, []float64{0.7, 0.8, 0.9})
	writeRun(t, dir, "b-1", []float64{1.001, 2.9, 3.5}, []float64{0.2, 0.4, 0.45})
	var log bytes.Buffer
	if err := run([]string{"-out", out, "-name", "fig", "-every", "1s", "A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}, &log); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "fig.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := string(md)
	for _, want := range []string{
		"| 1 | 60.00 (50.00 to 70.00) | 20.00 (20.00 to 20.00) |",
		"| 2 | 70.00 (60.00 to 80.00) | 20.00 (20.00 to 20.00) |", // B's second evaluation is at 2.9 s
		"| 3 | 80.00 (70.00 to 90.00) | 40.00 (40.00 to 40.00) |",
		"| A: a-1/run-1 | 30 | 3.0 | 10.0 | 70.00 | 2e-6 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "| 4 |") {
		t.Errorf("the grid goes past the shortest run's end (3.002 s):\n%s", table)
	}
	png, err := os.ReadFile(filepath.Join(out, "fig.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("fig.png: %v, %d bytes", err, len(png))
	}
	if err := run([]string{"-out", out, "A=" + filepath.Join(dir, "none-*")}, &log); err == nil || !strings.Contains(err.Error(), "no metrics.csv") {
		t.Errorf("a pattern matching nothing: %v", err)
	}
}
