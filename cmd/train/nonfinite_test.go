package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
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
	dir := t.TempDir()
	fixture(t, 300, "train", dir, 1)
	fixture(t, 100, "t10k", dir, 2)
	for _, engine := range []string{"program", "tape"} {
		c := smallConfig(t, dir)
		c.engine = engine
		c.nanSteps = map[int]bool{5: true}
		if err := run(context.Background(), c, io.Discard); err == nil || !strings.Contains(err.Error(), "epoch 1, step 5") || !strings.Contains(err.Error(), "-nonfinite skip") {
			t.Errorf("%s, -nonfinite stop: error %v", engine, err)
		}

		c = smallConfig(t, dir)
		c.engine, c.nonFinite = engine, "skip"
		c.nanSteps = map[int]bool{5: true, 6: true, 40: true}
		out, acc := runForAccuracy(t, c)
		if n := strings.Count(out, "skipping the batch"); n != 3 {
			t.Errorf("%s: %d skip lines, want 3:\n%s", engine, n, out)
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
		rows, _ := os.ReadFile(runs[0])
		skipped := 0
		for _, line := range strings.Split(string(rows), "\n") {
			f := strings.Split(line, ",")
			if len(f) == 10 && f[0] == "train" {
				n, _ := strconv.Atoi(f[8])
				skipped += n
			}
		}
		if skipped != 3 {
			t.Errorf("%s: metrics.csv counts %d skipped batches, want 3", engine, skipped)
		}

		c = smallConfig(t, dir)
		c.engine, c.nonFinite = engine, "skip"
		c.nanSteps = map[int]bool{}
		for s := 3; s < 20; s++ {
			c.nanSteps[s] = true
		}
		if err := run(context.Background(), c, io.Discard); err == nil || !strings.Contains(err.Error(), "10 batches in a row") {
			t.Errorf("%s: ten NaN batches in a row: error %v", engine, err)
		}
	}
}

// TestRefusedBeforeFolder checks that settings that cannot train are
// refused before anything is written: no run folder appears under -out, and
// the error names the weight or the flag.
func TestRefusedBeforeFolder(t *testing.T) {
	dir := t.TempDir()
	fixture(t, 50, "train", dir, 1)
	fixture(t, 20, "t10k", dir, 2)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-hidden", "32", "-depth", "2", "-r", "2000"}, `weight "fc1.W": optim: RSDM submanifold size r = 2000 exceeds the 1024 rows`},
		{[]string{"-hidden", "64"}, `weight "fc2.W": optim: RSDM submanifold size r = 300 exceeds the 64 rows`},
		{[]string{"-model", "vit", "-dim", "32", "-depth", "1", "-mlp", "8", "-heads", "2"}, `weight "block1.attn.Wq.W": optim: RSDM submanifold size r = 300 exceeds the 32 rows`},
		{[]string{"-r", "0"}, "-r 0: RSDM's submanifold size must be at least 2"},
		{[]string{"-r", "1"}, "-r 1: RSDM's submanifold size must be at least 2"},
		{[]string{"-r", "-5"}, "-r -5: RSDM's submanifold size must be at least 2"},
		{[]string{"-momentum", "1"}, "-momentum 1 and -rgd-momentum 0.9"},
		{[]string{"-nonfinite", "ignore"}, `-nonfinite "ignore": want one of stop, skip`},
		{[]string{"-eval-every", "-2"}, "-eval-every -2"},
	} {
		out := t.TempDir()
		args := append([]string{"-dataset", "mnist", "-data", dir, "-out", out}, tc.args...)
		c, err := parseFlags(args, io.Discard)
		if err == nil {
			var buf bytes.Buffer
			err = run(context.Background(), c, &buf)
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
	dir := t.TempDir()
	fixture(t, 100, "train", dir, 1)
	fixture(t, 20, "t10k", dir, 2)
	for _, tc := range []struct {
		extra []string
		code  int
	}{{nil, 0}, {[]string{"-min-accuracy", "101"}, 1}} {
		prof := filepath.Join(t.TempDir(), "cpu.prof")
		args := append([]string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-hidden", "32", "-depth", "2", "-r", "8",
			"-batch", "10", "-cpuprofile", prof}, tc.extra...)
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "ORTHONET_TRAIN_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code {
			t.Errorf("%q: exit code %d, want %d\n%s", tc.extra, code, tc.code, stderr.String())
		}
		b, err := os.ReadFile(prof)
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%q: the profile is missing or not a gzip'd pprof file (%d bytes, %v)", tc.extra, len(b), err)
		}
	}
}
