package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNonFiniteBatches feeds batches with a NaN between good ones, on both
// engines: by default the run stops naming the step and the way out; with
// -nonfinite skip the batch is dropped, counted in metrics.csv and the
// summary, the run learns and its weights stay on the manifold; ten in a
// row stop it.
func TestNonFiniteBatches(t *testing.T) {
	dir := mnistDir(t, 300, 100)
	for _, engine := range []string{"program", "tape"} {
		c := smallConfig(t, dir)
		c.engine = engine
		// The batch of the sixth step: metrics.csv counts it as step 6.
		if err := run(context.Background(), c, io.Discard, nanAt(5)); err == nil || !strings.Contains(err.Error(), "epoch 1, step 6:") || !strings.Contains(err.Error(), "-nonfinite skip") {
			t.Errorf("%s, -nonfinite stop: error %v", engine, err)
		}

		c = smallConfig(t, dir)
		c.engine, c.nonFinite = engine, "skip"
		out, acc := runForAccuracy(t, c, nanAt(5, 6, 40))
		if n := strings.Count(out, "skipping the batch"); n != 3 {
			t.Errorf("%s: %d skip lines, want 3:\n%s", engine, n, out)
		}
		for _, step := range []string{"6", "7", "41"} {
			if !strings.Contains(out, ", step "+step+": ") {
				t.Errorf("%s: no skip line names step %s, as metrics.csv counts it:\n%s", engine, step, out)
			}
		}
		if !strings.Contains(out, "skipped 3 batches") {
			t.Errorf("%s: the summary does not count the skipped batches:\n%s", engine, out)
		}
		if acc < 80 {
			t.Errorf("%s: test accuracy %.2f%% after skipping 3 batches, want >= 80%%", engine, acc)
		}
		for _, line := range strings.Split(out, "\n") {
			if f, ok := strings.CutPrefix(line, "||W^T W - I||_F of "); ok {
				v, _ := strconv.ParseFloat(f[strings.LastIndex(f, " ")+1:], 64)
				if !(v < 1e-4) {
					t.Errorf("%s: %s", engine, line)
				}
			}
		}
		runs, _ := filepath.Glob(filepath.Join(c.out, "run-*", "metrics.csv"))
		if len(runs) != 1 {
			t.Fatalf("%s: metrics files %v", engine, runs)
		}
		// Every training row is written here (100 steps an epoch or fewer):
		// each skip is in the row of its step, which has no loss.
		if skips := skippedRows(t, runs[0]); !maps.Equal(skips, map[string]int{"6": 1, "7": 1, "41": 1}) {
			t.Errorf("%s: metrics.csv records skips at steps %v, want one at each of steps 6, 7 and 41", engine, skips)
		}

		c = smallConfig(t, dir)
		c.engine, c.nonFinite = engine, "skip"
		var nans []int
		for s := 3; s < 20; s++ {
			nans = append(nans, s)
		}
		if err := run(context.Background(), c, io.Discard, nanAt(nans...)); err == nil || !strings.Contains(err.Error(), "10 batches in a row") || !strings.Contains(err.Error(), "step 13:") {
			t.Errorf("%s: ten NaN batches in a row: error %v", engine, err)
		}
		runs, _ = filepath.Glob(filepath.Join(c.out, "run-*", "metrics.csv"))
		if len(runs) != 1 {
			t.Fatalf("%s: metrics files %v", engine, runs)
		}
		total := 0
		for _, n := range skippedRows(t, runs[0]) {
			total += n
		}
		if total != 10 {
			t.Errorf("%s: the run stopped after 10 skipped batches in a row; metrics.csv records %d", engine, total)
		}
	}
}

// skippedRows returns, per step, the batches metrics.csv records as
// skipped, checking that a row of skipped batches only has no loss.
func skippedRows(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 10 || f[0] != "train" {
			continue
		}
		if n, _ := strconv.Atoi(f[8]); n > 0 {
			out[f[2]] += n
			if f[4] != "" && n > 0 && f[5] == "" {
				t.Errorf("%s: row %q has a loss but no accuracy", path, line)
			}
		}
	}
	return out
}

// TestRefusedBeforeFolder checks that settings that cannot train are
// refused before anything is written: no run folder appears under -out, and
// the error names the weight or the flag.
func TestRefusedBeforeFolder(t *testing.T) {
	dir := mnistDir(t, 50, 20)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-hidden", "32", "-depth", "2", "-r", "2000"}, `-r 2000: RSDM's submanifold size exceeds the 1024 rows of weight "fc1.W" (this network takes 2 <= r <= 32, the rows of "fc2.W")`},
		{[]string{"-hidden", "64"}, `-r 300: RSDM's submanifold size exceeds the 64 rows of weight "fc2.W"`},
		{[]string{"-model", "vit", "-dim", "32", "-depth", "1", "-mlp", "8", "-heads", "2"}, `-r 300: RSDM's submanifold size exceeds the 32 rows of weight "block1.attn.Wq.W"`},
		{[]string{"-model", "cnn", "-channels", "32", "-r", "40"}, `-r 40: RSDM's submanifold size exceeds the 32 rows of weight "conv1.W" (this network takes 2 <= r <= 32, the rows of "conv1.W")`},
		{[]string{"-model", "cnn", "-r", "65"}, `-r 65: RSDM's submanifold size exceeds the 64 rows of weight "conv1.W" (this network takes 2 <= r <= 64, the rows of "conv1.W")`},
		{[]string{"-model", "cnn", "-channels", "8", "-r", "12"}, `-r 12: RSDM's submanifold size exceeds the 9 rows of weight "conv1.W"`},
		{[]string{"-model", "cnn", "-hidden", "8"}, "-hidden does not apply: -model cnn has no hidden width"},
		{[]string{"-channels", "8"}, "-channels does not apply: -model ffn has no channels"},
		{[]string{"-r", "0"}, "-r 0: RSDM's submanifold size must be at least 2"},
		{[]string{"-r", "1"}, "-r 1: RSDM's submanifold size must be at least 2"},
		{[]string{"-r", "-5"}, "-r -5: RSDM's submanifold size must be at least 2"},
		{[]string{"-momentum", "1"}, "-momentum 1: momentum 1, want 0 <= momentum < 1"},
		{[]string{"-nonfinite", "ignore"}, `-nonfinite "ignore": want one of stop, skip`},
		{[]string{"-eval-every", "-2"}, "-eval-every -2"},
	} {
		out := t.TempDir()
		args := append([]string{"-dataset", "mnist", "-data", dir, "-out", out}, tc.args...)
		c, err := parseFlags(args, io.Discard)
		if err == nil {
			var buf bytes.Buffer
			err = run(context.Background(), c, &buf, hooks{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("%q: the refused run left %d entries under -out", tc.args, len(ents))
		}
	}
}

// TestCPUProfileFlushed checks that -cpuprofile is written out when the run
// fails, as well as when it succeeds: a failing run exits through the same
// deferred flush.
func TestCPUProfileFlushed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := mnistDir(t, 100, 20)
	for _, tc := range []struct {
		extra []string
		code  int
	}{{nil, 0}, {[]string{"-min-accuracy", "101"}, 1}} {
		prof := filepath.Join(t.TempDir(), "cpu.prof")
		args := append([]string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-hidden", "32", "-depth", "2", "-r", "8",
			"-batch", "10", "-cpuprofile", prof}, tc.extra...)
		if _, stderr, code := trainExit(t, args...); code != tc.code {
			t.Errorf("%q: exit code %d, want %d\n%s", tc.extra, code, tc.code, stderr)
		}
		b, err := os.ReadFile(prof)
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%q: the profile is missing or not a gzip'd pprof file (%d bytes, %v)", tc.extra, len(b), err)
		}
	}
}

// TestCPUProfileKeepsFile runs train with a -cpuprofile that names a file
// there already: a bad setting (exit 2, one line naming it), before any
// work, so the file stays as it was and -out gets no run folder.
func TestCPUProfileKeepsFile(t *testing.T) {
	out := t.TempDir()
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	if err := os.WriteFile(prof, []byte("the user's profile"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := trainExit(t, "-dataset", "mnist", "-data", t.TempDir(), "-out", out, "-cpuprofile", prof)
	if code != 2 {
		t.Errorf("exit %d, want 2\n%s", code, stderr)
	}
	oneLine(t, "-cpuprofile over a file", stderr, prof+" exists: train replaces no file")
	if b, err := os.ReadFile(prof); err != nil || string(b) != "the user's profile" {
		t.Errorf("the file: %q, %v; want it as it was", b, err)
	}
	if ents, err := os.ReadDir(out); err != nil || len(ents) != 0 {
		t.Errorf("-out holds %v (%v), want nothing", ents, err)
	}
}

// TestSkipAtEpochEnd skips the batch of an epoch's last step where the
// metrics write a training row every second step only: the skip is still
// recorded, in a row of its own step.
func TestSkipAtEpochEnd(t *testing.T) {
	dir := mnistDir(t, 2010, 20)
	c := smallConfig(t, dir)
	c.epochs, c.nonFinite = 1, "skip"
	runForAccuracy(t, c, nanAt(3, 200)) // steps 4 and 201 of 201
	runs, _ := filepath.Glob(filepath.Join(c.out, "run-*", "metrics.csv"))
	if len(runs) != 1 {
		t.Fatalf("metrics files %v", runs)
	}
	if skips := skippedRows(t, runs[0]); len(skips) != 2 || skips["4"] != 1 || skips["201"] != 1 {
		t.Errorf("metrics.csv records skips at steps %v, want one at each of steps 4 and 201", skips)
	}
}
