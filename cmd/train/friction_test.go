package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orthonet/orthonet/internal/datatest"
	"github.com/orthonet/orthonet/internal/runtest"
	"github.com/orthonet/orthonet/training"
)

// TestBadSettingsExit2 runs the command with settings that cannot train:
// an -r above the rows of a weight of the network, models the flags cannot
// build and a batch larger than the data. Like every other bad setting each
// exits 2, before any folder is made, with one line that names it and says
// "optim:" at most once.
func TestBadSettingsExit2(t *testing.T) {
	dir := mnistDir(t, 30, 10)
	badR := []string{"RSDM's submanifold size exceeds the", `weight "fc`}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-hidden", "64"}, badR},
		{[]string{"-hidden", "32", "-depth", "2", "-r", "40"}, badR},
		{[]string{"-model", "cnn", "-depth", "50"}, []string{"CNN of 50 blocks"}},
		{[]string{"-model", "cnn", "-channels", "100000"}, []string{"200000 channels"}},
		{[]string{"-batch", "64"}, []string{"-batch 64: 30 training examples, fewer than one batch"}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		_, stderr, code := trainExit(t, append([]string{"-dataset", "mnist", "-data", dir, "-out", out, "-device", "cpu"}, tc.args...)...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", tc.args, code, stderr)
		}
		oneLine(t, fmt.Sprintf("%q", tc.args), stderr, tc.want...)
		if strings.Count(stderr, "optim:") > 1 {
			t.Errorf("%q: stderr %q says optim: more than once", tc.args, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q: -out %s: %v, want nothing written", tc.args, out, err)
		}
	}
}

// TestSIGTERMExits143 stops a training process with SIGTERM: it stops at a
// step boundary as for Ctrl-C and exits 143 (128 + 15), as a shell reports
// a process SIGTERM ended.
func TestSIGTERMExits143(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := mnistDir(t, 2000, 20)
	cmd := trainCmd(context.Background(), "-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-hidden", "32", "-depth", "2", "-r", "8",
		"-batch", "10", "-epochs", "50", "-device", "cpu", "-eval-every", "-1")
	_, stderr, err := runtest.SignalAt(t, cmd, syscall.SIGTERM, func(line string) bool {
		if !strings.HasPrefix(line, "run folder:") {
			return false
		}
		time.Sleep(300 * time.Millisecond) // into the steps
		return true
	})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("after SIGTERM: %v, want exit status 143\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "train: terminated ") {
		t.Errorf("stderr %q, want it to say the run was terminated", stderr)
	}
}

// TestInterruptedBeforeFirstStep interrupts a run before its first step: it
// leaves no run folder under -out, and says so.
func TestInterruptedBeforeFirstStep(t *testing.T) {
	dir := mnistDir(t, 100, 20)
	c := smallConfig(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ie *training.InterruptedError
	if err := run(ctx, c, io.Discard, hooks{}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "interrupted before the first step") {
		t.Errorf("cancelled run: error %v", err)
	}
	if ents, err := os.ReadDir(c.out); err != nil || len(ents) != 0 {
		t.Errorf("-out after a run interrupted before its first step: %d entries (%v), want none", len(ents), err)
	}
	// One step in, the run keeps its folder and checkpoint.
	ctx, h := stopBefore(1)
	if err := run(ctx, smallConfig(t, dir), io.Discard, h); !errors.As(err, &ie) || ie.Saved == "" {
		t.Errorf("run stopped after a step: %v, want an interruption with a checkpoint", err)
	}
}

// TestDamagedNewestCheckpoint damages a run's newest checkpoint: -resume
// latest fails naming the damage and the run's older checkpoints that
// load, newest first.
func TestDamagedNewestCheckpoint(t *testing.T) {
	dir := mnistDir(t, 100, 20)
	out := t.TempDir()
	c, err := parseFlags([]string{"-dataset", "mnist", "-data", dir, "-out", out, "-hidden", "32", "-depth", "2", "-r", "8",
		"-batch", "10", "-save-every", "3", "-keep", "3", "-eval-every", "-1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), c, io.Discard, hooks{}); err != nil {
		t.Fatal(err)
	}
	newest, err := training.ResolveResume("latest", out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 1
	if err := os.WriteFile(newest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	older, _ := filepath.Glob(filepath.Join(filepath.Dir(newest), "step-*.safetensors"))
	sort.Sort(sort.Reverse(sort.StringSlice(older)))
	older = slices.DeleteFunc(older, func(p string) bool { return p == newest })
	if len(older) != 2 {
		t.Fatalf("the run kept %v besides %s, want two older checkpoints", older, newest)
	}
	_, err = parseFlags([]string{"-resume", "latest", "-out", out}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("-resume latest with the newest damaged: %v", err)
	}
	msg := err.Error()
	i, j := strings.Index(msg, older[0]), strings.Index(msg, older[1])
	if i < 0 || j < 0 || i > j {
		t.Errorf("error %q does not name the older checkpoints %v, newest first", msg, older)
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

// TestResumableFlagsDocumented checks that docs/checkpoints.md's list of the flags
// a resumed run may change is the command's list, flag for flag, and that
// every flag in the list exists.
func TestResumableFlagsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/checkpoints.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	m := regexp.MustCompile(`A resumed run keeps the saved configuration\. It may change only (.*?); any other flag`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("docs/checkpoints.md: no sentence listing the flags a resumed run may change")
	}
	var documented []string
	for _, f := range regexp.MustCompile("`-([a-z-]+)`").FindAllStringSubmatch(m[1], -1) {
		documented = append(documented, f[1])
	}
	var binary []string
	for name := range resumable {
		binary = append(binary, name)
	}
	sort.Strings(documented)
	sort.Strings(binary)
	if !slices.Equal(documented, binary) {
		t.Errorf("docs/checkpoints.md lists %v as changeable on resume, the command %v", documented, binary)
	}
	_, fs, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range binary {
		if fs.Lookup(name) == nil {
			t.Errorf("resumable flag -%s does not exist", name)
		}
	}
	var _ *flag.FlagSet = fs
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

// TestResumeOtherDataRefused resumes a run on the same images with their
// labels shifted (same sizes, other data): refused with exit 2 naming the
// files, and with -resume-other-data allowed, warned of and recorded.
func TestResumeOtherDataRefused(t *testing.T) {
	dir := mnistDir(t, 60, 20)
	out := t.TempDir()
	args := []string{"-dataset", "mnist", "-hidden", "16", "-depth", "2", "-r", "4", "-batch", "10", "-device", "cpu", "-out", out}
	if _, stderr, code := trainExit(t, append(args, "-data", dir)...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	other := t.TempDir()
	for _, name := range []string{"train-images-idx3-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train-labels-idx1-ubyte"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "train-labels-idx1-ubyte" {
			b[8], b[9] = b[9], b[8] // two labels swapped: the same sizes
		}
		if err := os.WriteFile(filepath.Join(other, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	resume := append(args, "-data", other, "-resume", "latest", "-epochs", "2")
	_, stderr, code := trainExit(t, resume...)
	if code != 2 {
		t.Fatalf("resume on other data: exit %d, want 2\n%s", code, stderr)
	}
	oneLine(t, "resume on other data", stderr, "other data of the same sizes", filepath.Join(other, "train-labels-idx1-ubyte"))
	stdout, stderr, code := trainExit(t, append(resume, "-resume-other-data")...)
	if code != 0 || !strings.Contains(stdout, "warning:") {
		t.Fatalf("-resume-other-data: exit %d, want 0 with a warning\n%s%s", code, stdout, stderr)
	}
	_, st := finalState(t, out)
	if len(st.DataChanges) != 1 || !strings.Contains(st.DataChanges[0], "resumed on other data") {
		t.Errorf("the run's progress records %q, want the resume on other data", st.DataChanges)
	}
}
