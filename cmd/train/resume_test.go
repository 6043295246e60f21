package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/internal/runtest"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/training"
)

// finalState returns the newest checkpoint of the single run folder under
// out, minus its timings.
func finalState(t *testing.T, out string) (*checkpoint.File, training.Progress) {
	t.Helper()
	path, err := training.ResolveResume("latest", out)
	if err != nil {
		t.Fatal(err)
	}
	return runtest.Read(t, path)
}

// sameTraining compares two checkpoints' tensors bit for bit and their
// progress but for wall-clock times.
func sameTraining(t *testing.T, name string, a, b *checkpoint.File, pa, pb training.Progress) {
	t.Helper()
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("%s: %d tensors straight, %d resumed", name, len(a.Tensors), len(b.Tensors))
	}
	var differ []string
	for k, ta := range a.Tensors {
		tb, ok := b.Tensors[k]
		if !ok || !reflect.DeepEqual(ta.Shape, tb.Shape) || !testval.SameBits(ta.Data, tb.Data) {
			differ = append(differ, k)
		}
	}
	if len(differ) > 0 {
		sort.Strings(differ)
		t.Fatalf("%s: tensors %v differ between the straight and the resumed run", name, differ)
	}
	if ca, cb := withoutClocks(pa), withoutClocks(pb); !reflect.DeepEqual(ca, cb) {
		t.Fatalf("%s: progress differs:\nstraight %+v\nresumed  %+v", name, ca, cb)
	}
}

// withoutClocks returns p with its clock readings zeroed, which differ
// between runs of the same steps.
func withoutClocks(p training.Progress) training.Progress {
	p.Seconds, p.TrainSeconds = 0, 0
	p.Metrics = append([]training.Row(nil), p.Metrics...)
	for i := range p.Metrics {
		p.Metrics[i].Seconds, p.Metrics[i].TrainSeconds = 0, 0
	}
	return p
}

// piece is a run made in pieces (stopped or killed, then resumed) into
// the folder out, for straightThenResumed.
type piece struct {
	name string
	run  func(out string)
}

// straightThenResumed checks runs made in pieces against a run never
// stopped: it makes the straight run with straight(out), then each of
// pieces, each in a folder of its own, and checks that each ends with the
// straight run's newest checkpoint, bit for bit but for the clocks
// (sameTraining). It returns the straight run's folder.
func straightThenResumed(t *testing.T, straight func(out string), pieces ...piece) string {
	t.Helper()
	straightOut := t.TempDir()
	straight(straightOut)
	want, wantProgress := finalState(t, straightOut)
	for _, p := range pieces {
		out := t.TempDir()
		p.run(out)
		got, gotProgress := finalState(t, out)
		sameTraining(t, p.name, want, got, wantProgress, gotProgress)
	}
	return straightOut
}

// parsed returns the configuration of args, failing the test on a bad one.
func parsed(t *testing.T, args ...string) config {
	t.Helper()
	c, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return c
}

// trainArgs returns a run of args into -out out in this process, which
// must succeed.
func trainArgs(t *testing.T, args ...string) func(out string) {
	return func(out string) {
		t.Helper()
		if err := run(context.Background(), parsed(t, slices.Concat(args, []string{"-out", out})...), io.Discard, hooks{}); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
}

// stopThenResume returns a run of args into -out out in this process,
// stopped before step k as by Ctrl-C (which saves a checkpoint), then
// resumed from its newest checkpoint to its end.
func stopThenResume(t *testing.T, k int, args ...string) func(out string) {
	return func(out string) {
		t.Helper()
		ctx, h := stopBefore(k)
		var ie *training.InterruptedError
		if err := run(ctx, parsed(t, slices.Concat(args, []string{"-out", out})...), io.Discard, h); !errors.As(err, &ie) || ie.Saved == "" {
			t.Fatalf("%q stopped before step %d: want an interruption with a checkpoint, got %v", args, k, err)
		}
		trainArgs(t, slices.Concat(args, []string{"-resume", "latest"})...)(out)
	}
}

// TestResumeBitExact trains straight, and again stopped after k steps (as by
// Ctrl-C, which saves) and resumed from the checkpoint: the final weights,
// optimizer states, random states and metrics agree bit for bit, for
// RSDM-P, RSDM-O, RGD with momentum and Riemannian Adam, SGD with momentum,
// Adam and AdamW on the unconstrained part, the cosine and warmup-cosine
// schedules, clipping, the ViT with dropout, and the CNN on CIFAR-10.
func TestResumeBitExact(t *testing.T) {
	mnist := mnistDir(t, 200, 50)
	cifar := cifarDir(t, 12, 20)
	ffn := []string{"-dataset", "mnist", "-data", mnist, "-hidden", "32", "-depth", "2", "-lr", "0.2", "-batch", "10", "-epochs", "3", "-eval-every", "7"}
	vit := []string{"-model", "vit", "-dataset", "cifar10", "-data", cifar, "-dim", "32", "-depth", "1", "-heads", "2", "-mlp", "16", "-patch", "8",
		"-r", "8", "-lr", "0.1", "-other", "adam", "-lr-other", "0.002", "-batch", "10", "-epochs", "2", "-dropout", "0.2"}
	for _, tc := range []struct {
		name string
		args []string
		k    []int
	}{
		{"rsdm-p+sgd-momentum", append(ffn, "-r", "8", "-lr-other", "0.05"), []int{1, 20, 27, 33}},
		{"rsdm-o+adam+cosine", append(ffn, "-r", "8", "-sampling", "orth", "-other", "adam", "-lr-other", "0.002", "-schedule", "cosine"), []int{25}},
		{"rgd-momentum+sgd-momentum", append(ffn, "-optim", "rgd", "-lr", "0.05", "-lr-other", "0.05"), []int{13}},
		{"radam+adamw+warmup-cosine+clip", append(ffn, "-optim", "radam", "-lr", "0.01", "-other", "adamw", "-lr-other", "0.002",
			"-schedule", "warmup-cosine", "-warmup", "10", "-clip-norm", "1"), []int{5, 22}},
		{"vit-dropout+adam", vit, []int{1, 7}},
		{"cnn-cifar+adam", []string{"-model", "cnn", "-dataset", "cifar10", "-data", cifar, "-channels", "4", "-depth", "2", "-r", "8", "-lr", "0.2",
			"-other", "adam", "-lr-other", "0.002", "-batch", "10", "-epochs", "2"}, []int{1, 8}},
	} {
		var pieces []piece
		for _, k := range tc.k {
			pieces = append(pieces, piece{fmt.Sprintf("%s k=%d", tc.name, k), stopThenResume(t, k, tc.args...)})
		}
		straightThenResumed(t, trainArgs(t, tc.args...), pieces...)
	}
}

// TestCheckpointFiles checks what a run leaves: the newest -keep step
// checkpoints, best.safetensors holding the best test accuracy, and no
// temporary files.
func TestCheckpointFiles(t *testing.T) {
	dir := mnistDir(t, 200, 50)
	out := t.TempDir()
	c, err := parseFlags([]string{"-dataset", "mnist", "-data", dir, "-out", out, "-hidden", "32", "-depth", "2", "-r", "8",
		"-batch", "10", "-epochs", "3", "-save-every", "3", "-keep", "2", "-eval-every", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), c, io.Discard, hooks{}); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(out, "run-*"))
	if len(runs) != 1 {
		t.Fatalf("run folders %v", runs)
	}
	ents, _ := os.ReadDir(runs[0])
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{checkpoint.BestName, "metrics.csv", "metrics.png", checkpoint.ManifestName, checkpoint.LockName, checkpoint.StepName(57), checkpoint.StepName(60)}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("run folder holds %v, want %v", names, want)
	}
	f, err := checkpoint.Read(filepath.Join(runs[0], checkpoint.BestName))
	if err != nil {
		t.Fatal(err)
	}
	var best training.Progress
	_ = f.JSON(training.KeyProgress, &best)
	_, final := finalState(t, out)
	top := 0.0
	for _, m := range final.Metrics {
		if m.Kind == "test" {
			top = max(top, m.Accuracy)
		}
	}
	if best.Best != top || best.Step != best.BestStep {
		t.Errorf("best.safetensors is step %d with best %v (at %d); the run's best test accuracy was %v", best.Step, best.Best, best.BestStep, top)
	}
}

// TestResumeErrors checks that a resume that cannot go on exactly says why.
func TestResumeErrors(t *testing.T) {
	dir := mnistDir(t, 100, 20)
	other := mnistDir(t, 110, 20)
	out := t.TempDir()
	base := []string{"-dataset", "mnist", "-data", dir, "-out", out, "-hidden", "32", "-depth", "2", "-r", "8", "-batch", "10"}
	c, _ := parseFlags(base, io.Discard)
	if err := run(context.Background(), c, io.Discard, hooks{}); err != nil {
		t.Fatal(err)
	}
	path, _ := training.ResolveResume("latest", out)
	good, _ := os.ReadFile(path)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-100] ^= 4
	flippedPath := filepath.Join(t.TempDir(), "flipped.safetensors")
	_ = os.WriteFile(flippedPath, flipped, 0o644)
	truncPath := filepath.Join(t.TempDir(), "trunc.safetensors")
	_ = os.WriteFile(truncPath, good[:len(good)/2], 0o644)
	foreign := checkpoint.New()
	foreign.Tensors["w"] = checkpoint.Tensor{Shape: []int{1}, Data: []float32{1}}
	foreignPath := filepath.Join(t.TempDir(), "foreign.safetensors")
	_ = checkpoint.Write(foreignPath, foreign)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-resume", path, "-lr", "0.5"}, `-lr 0.5 differs from the checkpoint's "0.1"`},
		{[]string{"-resume", path, "-hidden", "64"}, `-hidden 64 differs from the checkpoint's "32"`},
		{[]string{"-resume", flippedPath}, "checksum mismatch"},
		{[]string{"-resume", truncPath}, "(truncated?)"},
		{[]string{"-resume", foreignPath}, "not a checkpoint of cmd/train"},
		{[]string{"-resume", filepath.Join(out, "nope.safetensors")}, "nope.safetensors: no such file"},
		{[]string{"-resume", "latest", "-out", t.TempDir()}, "-resume latest: no checkpoint under"},
		{[]string{"-resume", t.TempDir()}, "holds no step-*.safetensors checkpoint"},
	} {
		if _, err := parseFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	// Another data set of the same format: refused before training.
	c, err := parseFlags([]string{"-resume", path, "-data", other}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), c, io.Discard, hooks{}); err == nil || !strings.Contains(err.Error(), "was trained on 100/20 examples") {
		t.Errorf("other data: error %v", err)
	}
	// Allowed changes: more epochs goes on from where the run stopped.
	c, err = parseFlags([]string{"-resume", "latest", "-out", out, "-epochs", "2"}, io.Discard)
	if err != nil || c.epochs != 2 || c.hidden != 32 {
		t.Fatalf("resume with -epochs 2: %v (epochs %d, hidden %d)", err, c.epochs, c.hidden)
	}
	var buf bytes.Buffer
	if err := run(context.Background(), c, &buf, hooks{}); err != nil || !strings.Contains(buf.String(), "at epoch 2, step 10") {
		t.Errorf("resume with more epochs: %v\n%s", err, buf.String())
	}
}

// TestKillResume kills a training process with SIGKILL at random moments,
// 50 times; after each kill the newest checkpoint must load, and the next
// process resumes from it. The run then finishes and must end with the same
// weights, bit for bit, as a run never killed.
func TestKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 50 processes")
	}
	killResume(t, 50, 30*time.Millisecond, 280*time.Millisecond, 100)
}

// killResume is TestKillResume with kills processes, each killed between
// lo and hi after its start; the last must have resumed from step minStep
// or later.
func killResume(t *testing.T, kills int, lo, hi time.Duration, minStep int) {
	dir := mnistDir(t, 200, 50)
	args := []string{"-dataset", "mnist", "-data", dir, "-hidden", "32", "-depth", "2", "-r", "8",
		"-lr-other", "0.05", "-batch", "10", "-epochs", "150", "-save-every", "1", "-keep", "2", "-eval-every", "-1"}
	finish := []string{"-save-every", "0"}
	straightThenResumed(t, trainArgs(t, slices.Concat(args, finish)...), piece{fmt.Sprintf("killed %d times", kills), func(out string) {
		killRepeatedly(t, slices.Concat(args, []string{"-out", out}), kills, lo, hi, minStep)
		trainArgs(t, slices.Concat(args, []string{"-resume", "latest"}, finish)...)(out)
	}})
}

// killRepeatedly runs cmd/train with args (which name its -out) kills
// times, as processes of their own killed between lo and hi after their
// start, each resuming from the newest checkpoint; after each kill the
// newest checkpoint must load, and be no older than the one before. The
// last must have resumed from step minStep or later.
func killRepeatedly(t *testing.T, args []string, kills int, lo, hi time.Duration, minStep int) {
	out := parsed(t, args...).out
	rng := rand.New(rand.NewPCG(5, 5))
	killed, lastStep := 0, -1
	for i := 0; i < kills; i++ {
		a := args
		if _, err := training.ResolveResume("latest", out); err == nil {
			a = slices.Concat(args, []string{"-resume", "latest"})
		}
		if killAfter(t, a, lo+time.Duration(rng.Int64N(int64(hi-lo)))) {
			killed++
		}
		path, err := training.ResolveResume("latest", out)
		if err != nil {
			continue // killed before its first checkpoint
		}
		tr, err := newTrainer(context.Background(), parsed(t, slices.Concat(args, []string{"-resume", path})...), io.Discard, hooks{})
		if err != nil {
			t.Fatalf("after kill %d: the newest checkpoint does not load: %v", i, err)
		}
		tr.Close()
		if tr.Progress().Step < lastStep {
			t.Fatalf("after kill %d: the newest checkpoint is step %d, an earlier one was %d", i, tr.Progress().Step, lastStep)
		}
		lastStep = tr.Progress().Step
	}
	t.Logf("%d kills; the last resumed from step %d", killed, lastStep)
	if lastStep < minStep {
		t.Errorf("%d processes reached only step %d", kills, lastStep)
	}
}

// killAfter runs cmd/train with args as a process of its own and kills it
// with SIGKILL after d; it reports whether the signal ended it. A process
// that fails on its own or finishes the run fails the test.
func killAfter(t *testing.T, args []string, d time.Duration) bool {
	t.Helper()
	cmd := trainCmd(context.Background(), args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return true
	} else if err != nil {
		t.Fatalf("a process failed on its own: %v\n%s", err, stderr.String())
	}
	t.Fatal("a process finished the run before it was killed; make the run longer")
	return false
}

// TestReleaseRunResumes resumes testdata/release-run/run, a run folder of
// the release before cmd/train used package training (its epoch 1 of 2),
// to epoch 2: every tensor must be bit for bit that of the release's run
// never stopped (want.json, see testdata/release-run/README), and its
// progress the same but for the clocks. It runs where OpenBLAS is the BLAS,
// as it was for the release's run.
func TestReleaseRunResumes(t *testing.T) {
	if !strings.HasPrefix(linalg.Backend(), "OpenBLAS") {
		// The release's run took its steps on OpenBLAS: another BLAS rounds
		// its products otherwise.
		t.Skipf("the reference was made with OpenBLAS; this build's BLAS is %s", linalg.Backend())
	}
	src := filepath.Join("testdata", "release-run")
	dir := filepath.Join(t.TempDir(), "run-release")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(src, "run"))); err != nil {
		t.Fatal(err)
	}
	var want struct {
		Tensors map[string]struct {
			Shape  []int  `json:"shape"`
			SHA256 string `json:"sha256"`
		} `json:"tensors"`
		Progress training.Progress `json:"progress"`
	}
	b, err := os.ReadFile(filepath.Join(src, "want.json"))
	if err == nil {
		err = json.Unmarshal(b, &want)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := parsed(t, "-resume", dir, "-epochs", "2", "-data", filepath.Join(src, "data"), "-device", "cpu")
	if err := run(t.Context(), c, io.Discard, hooks{}); err != nil {
		t.Fatal(err)
	}
	got, gotProgress := finalState(t, filepath.Dir(dir))
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for name, w := range want.Tensors {
		g, ok := got.Tensors[name]
		h := sha256.New()
		if ok {
			_ = binary.Write(h, binary.LittleEndian, g.Data)
		}
		if !ok || !reflect.DeepEqual(g.Shape, w.Shape) || hex.EncodeToString(h.Sum(nil)) != w.SHA256 {
			t.Errorf("tensor %s differs from the release's run never stopped", name)
		}
	}
	if g, w := withoutClocks(gotProgress), withoutClocks(want.Progress); !reflect.DeepEqual(g, w) {
		t.Errorf("progress differs:\nresumed  %+v\nstraight %+v", g, w)
	}
}

// TestRNNResumeBitExact trains an RNN on CIFAR-format images (32 steps of
// 96 values) straight, and again stopped before step k and resumed: the
// final weights, optimizer states and metrics agree bit for bit, for
// RSDM-P, RGD with momentum and Riemannian Adam.
func TestRNNResumeBitExact(t *testing.T) {
	cifar := cifarDir(t, 12, 20)
	base := []string{"-model", "rnn", "-dataset", "cifar10", "-data", cifar, "-hidden", "12", "-other", "adam", "-lr-other", "0.002",
		"-batch", "10", "-epochs", "2", "-eval-every", "5"}
	for _, tc := range []struct {
		name string
		args []string
		k    []int
	}{
		{"rsdm-p", append(base, "-r", "6", "-lr", "0.2"), []int{1, 8}},
		{"rgd-momentum", append(base, "-optim", "rgd", "-lr", "0.05"), []int{7}},
		{"radam", append(base, "-optim", "radam", "-lr", "0.01"), []int{9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pieces []piece
			for _, k := range tc.k {
				pieces = append(pieces, piece{fmt.Sprintf("%s k=%d", tc.name, k), stopThenResume(t, k, tc.args...)})
			}
			straightThenResumed(t, trainArgs(t, tc.args...), pieces...)
		})
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
