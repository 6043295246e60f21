package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestGrid checks that -grid picks each label's step size by the highest
// final accuracy (the smaller on a tie), reading it from the runs'
// command.txt, keeps a diverged point in the table without choosing it, and
// fails where every point of a label failed.
func TestGrid(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	point := func(name, lr string, final float64) {
		writeFile(t, dir, name, "command.txt", "train -model ffn -optim x -lr "+lr+" -lr-other 0.1 -batch 16\n")
		if final >= 0 {
			writeRun(t, dir, name, []float64{20.01}, []float64{final})
		}
	}
	point("ffn-rsdm-lr0.1", "0.1", 0.80)
	point("ffn-rsdm-lr0.5", "0.5", 0.85)
	point("ffn-rsdm-lr2.0", "2.0", -1) // diverged before its evaluation
	point("ffn-rgd-lr-a", "0.1", 0.70) // globbed before the tie at 0.05
	point("ffn-rgd-lr-b", "0.05", 0.70)
	point("ffn-rgd-lr0.01", "0.01", 0.60)
	var log bytes.Buffer
	err := run([]string{"-grid", "lr", "-out", out, "-name", "grid", "-title", "step sizes",
		"RSDM-P=" + filepath.Join(dir, "ffn-rsdm-lr*"), "RGD=" + filepath.Join(dir, "ffn-rgd-lr*")}, &log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "best RSDM-P 0.5\nbest RGD 0.05\n"; log.String() != want {
		t.Errorf("output %q, want %q", log.String(), want)
	}
	readPage(t, filepath.Join(out, "grid.md"),
		"| RSDM-P | 0.5 | **85.00** | 10 | 20.0 | 0.500 |",
		"| RSDM-P | 0.1 | 80.00 | 10 |",
		"| RSDM-P | 2 | no metrics.csv (see its log) | | | |",
		"| RGD | 0.05 | **70.00** |",
		"| RGD | 0.1 | 70.00 |")
	err = run([]string{"-grid", "lr", "-out", out, "RSDM-P=" + filepath.Join(dir, "ffn-rsdm-lr2*")}, &log)
	if err == nil || !strings.Contains(err.Error(), "every point of the grid failed") {
		t.Errorf("a grid whose every point failed: %v", err)
	}
}

func TestFlagValue(t *testing.T) {
	for _, c := range []struct {
		command, want string
		ok            bool
	}{
		{"train -lr-other 0.1 -lr 0.5 -batch 16", "0.5", true},
		{"train --lr=2", "2", true},
		{"train -lr-other 0.1", "", false},
		{"train -lr", "", false},
	} {
		if got, ok := flagValue(c.command, "lr"); got != c.want || ok != c.ok {
			t.Errorf("flagValue(%q) = %q, %v; want %q, %v", c.command, got, ok, c.want, c.ok)
		}
	}
}

// TestRate checks that steps per second keep three significant digits (every
// integer digit from 1000 up) without an exponent, rounding across powers of ten.
func TestRate(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{0.13267, "0.133"},
		{0.0712, "0.0712"},
		{2.4319, "2.43"},
		{36.43, "36.4"},
		{10, "10.0"},
		{9.996, "10.0"},
		{100, "100"},
		{364.3, "364"},
		{1234.6, "1235"},
		{0, "0.0"},
	} {
		if got := rate(c.x); got != c.want {
			t.Errorf("rate(%g) = %q, want %q", c.x, got, c.want)
		}
	}
}
