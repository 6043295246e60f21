package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/internal/foldertest"
	"github.com/orthonet/orthonet/training"
)

// Tests of issue 30's hostile uses: two processes on one run folder, a
// damaged newest checkpoint, and messages that misled. Each command runs
// as its own process (this test binary as cmd/train), under 120 s, and
// must end with its exit code and one line saying what is wrong, no file
// of an earlier run changed.

// trainExit runs cmd/train with args as a process of its own and returns
// its standard output and error and its exit code; a run past 120 s fails
// the test (a hang).
func trainExit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := trainCmd(ctx, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("train %q did not end in 120 s\n%s%s", args, o.String(), e.String())
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("train %q: %v", args, err)
	}
	if strings.Contains(e.String(), "panic:") || strings.Contains(e.String(), "SIGABRT") {
		t.Errorf("train %q crashed:\n%s", args, e.String())
	}
	return o.String(), e.String(), code
}

// oneLine fails the test unless stderr is one line of train's, holding
// every one of want.
func oneLine(t *testing.T, what, stderr string, want ...string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "train: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("%s: stderr %q, want one line of train's", what, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: stderr %q does not say %q", what, stderr, w)
		}
	}
}

// hostileArgs trains the small FFN on the fixture in dir: 20 steps an
// epoch of 10 images.
func hostileArgs(dir string) []string {
	return []string{"-dataset", "mnist", "-data", dir, "-hidden", "32", "-depth", "2", "-r", "8", "-lr", "0.2", "-batch", "10", "-eval-every", "-1"}
}

func hostileData(t *testing.T) string {
	dir := mnistDir(t, 200, 50)
	return dir
}

// onlyRun returns the one run folder under out.
func onlyRun(t *testing.T, out string) string {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(out, "run-*"))
	if len(runs) != 1 {
		t.Fatalf("run folders under %s: %v, want one", out, runs)
	}
	return runs[0]
}

// TestRunFolderLocked resumes a run whose folder another process holds:
// first this test process (checkpoint.OpenRun), then a training process
// frozen by SIGSTOP. Each resume (-resume latest, -resume RUN, -resume of
// the newest checkpoint) exits 2 at once with one line naming the
// holder's PID, and no file under -out changes. SIGKILL of the training
// process releases the folder.
func TestRunFolderLocked(t *testing.T) {
	data, out := hostileData(t), t.TempDir()
	if _, stderr, code := trainExit(t, append(hostileArgs(data), "-save-every", "5", "-out", out)...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	runDir := onlyRun(t, out)
	newest := filepath.Join(runDir, checkpoint.StepName(20))
	resumes := [][]string{{"-resume", "latest", "-out", out, "-epochs", "3"}, {"-resume", runDir, "-epochs", "3"}, {"-resume", newest, "-epochs", "3"}}

	held, err := checkpoint.OpenRun(runDir)
	if err != nil {
		t.Fatal(err)
	}
	before := foldertest.Snapshot(t, out)
	for _, args := range resumes {
		start := time.Now()
		stdout, stderr, code := trainExit(t, args...)
		if code != 2 {
			t.Errorf("%q with the folder held by this process: exit %d, want 2\n%s", args, code, stderr)
		}
		oneLine(t, fmt.Sprintf("%q", args), stderr, fmt.Sprintf("held by process %d ", os.Getpid()), runDir)
		if strings.Contains(stdout, "resuming from") {
			t.Errorf("%q began the run before it was refused:\n%s", args, stdout)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%q took %v to refuse", args, d)
		}
		foldertest.Same(t, fmt.Sprintf("%q", args), out, before)
	}
	// -resume latest that resolved to step 15 just before the holder saved
	// step 20 is refused too; -resume of step 15 by its path branches off
	// into a new folder, the held one untouched.
	f15, err := checkpoint.Read(filepath.Join(runDir, checkpoint.StepName(15)))
	if err != nil {
		t.Fatal(err)
	}
	_ = f15
	step15 := filepath.Join(runDir, checkpoint.StepName(15))
	c := parsed(t, "-resume", step15, "-epochs", "3", "-out", t.TempDir())
	c.resumeArg = runDir // as if -resume RUN had found step 15
	if err := run(context.Background(), c, io.Discard, hooks{}); !errors.Is(err, checkpoint.ErrLocked) || exitCode(err) != 2 {
		t.Errorf("-resume latest that found step 15 of the held run: %v, want a usage error wrapping checkpoint.ErrLocked", err)
	}
	c.resumeArg = step15
	var branch bytes.Buffer
	ctx, h := stopBefore(16)
	err = run(ctx, c, &branch, h)
	var ie *training.InterruptedError
	if !errors.As(err, &ie) || !strings.Contains(branch.String(), "the newest checkpoint of its run is "+checkpoint.StepName(20)) {
		t.Errorf("-resume PATH of step 15 of the held run: %v\n%s\nwant a new folder, as step 20 is newer", err, branch.String())
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}

	// A training process holds it: frozen while it holds the lock, so that
	// it saves no newer checkpoint meanwhile.
	a := trainCmd(context.Background(), "-resume", "latest", "-out", out, "-epochs", "100000")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Process.Kill(); _ = a.Wait() }()
	pid := strconv.Itoa(a.Process.Pid) + "\n"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(runDir, checkpoint.LockName)); string(b) == pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the training process did not take the run folder's lock in 60 s")
		}
	}
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) { // the signal takes effect later
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.Process.Pid)); regexp.MustCompile(`\) T `).Match(b) {
			break
		}
		if time.Now().After(deadline) {
			t.Skip("cannot tell that the process stopped (no /proc here)")
		}
	}
	before = foldertest.Snapshot(t, out)
	for _, args := range resumes[:2] {
		_, stderr, code := trainExit(t, args...)
		if code != 2 {
			t.Errorf("%q with the folder held by a training process: exit %d, want 2\n%s", args, code, stderr)
		}
		oneLine(t, fmt.Sprintf("%q", args), stderr, fmt.Sprintf("held by process %d ", a.Process.Pid))
		foldertest.Same(t, fmt.Sprintf("%q", args), out, before)
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	r, err := checkpoint.OpenRun(runDir)
	if err != nil {
		t.Fatalf("the folder after its holder was killed: %v", err)
	}
	r.Close()
}

// TestResumeDamagedNewestRefused damages the newest checkpoint of a run
// three ways (a truncated header, a flipped bit in the header length, a
// foreign file copied over it): -resume latest and -resume RUN exit 2 with
// one line naming the damaged file and the checkpoints that load, and
// change no file; -resume of an older one goes on in a new run folder,
// saying why, and saves there.
func TestResumeDamagedNewestRefused(t *testing.T) {
	data, pristine := hostileData(t), t.TempDir()
	if _, stderr, code := trainExit(t, append(hostileArgs(data), "-save-every", "5", "-keep", "3", "-out", pristine)...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	src := onlyRun(t, pristine)
	for _, tc := range []struct {
		name   string
		damage func(b, png []byte) []byte
	}{
		{"truncated header", func(b, _ []byte) []byte { return b[:20] }},
		{"flipped header length", func(b, _ []byte) []byte { b[5] ^= 0x01; return b }},
		{"foreign file", func(_, png []byte) []byte { return png }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			runDir := filepath.Join(out, filepath.Base(src))
			if err := os.CopyFS(runDir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			newest := filepath.Join(runDir, checkpoint.StepName(20))
			b, _ := os.ReadFile(newest)
			png, _ := os.ReadFile(filepath.Join(runDir, "metrics.png"))
			if err := os.WriteFile(newest, tc.damage(b, png), 0o644); err != nil {
				t.Fatal(err)
			}
			older := []string{filepath.Join(runDir, checkpoint.StepName(15)) + " (step 15)", filepath.Join(runDir, checkpoint.StepName(10)) + " (step 10)"}
			before := foldertest.Snapshot(t, out)
			for _, args := range [][]string{{"-resume", "latest", "-out", out, "-epochs", "2"}, {"-resume", runDir, "-epochs", "2"}} {
				_, stderr, code := trainExit(t, args...)
				if code != 2 {
					t.Errorf("%q: exit %d, want 2\n%s", args, code, stderr)
				}
				oneLine(t, fmt.Sprintf("%q", args), stderr, newest+": checkpoint: damaged file", older[0]+", "+older[1])
				foldertest.Same(t, fmt.Sprintf("%q", args), out, before)
			}

			older15 := filepath.Join(runDir, checkpoint.StepName(15))
			stdout, stderr, code := trainExit(t, "-resume", older15, "-out", out, "-epochs", "2")
			if code != 0 {
				t.Fatalf("-resume %s: exit %d\n%s%s", older15, code, stdout, stderr)
			}
			if want := older15 + " is not the newest checkpoint of its run (the newest checkpoint of its run, " + checkpoint.StepName(20) + ", does not load"; !strings.Contains(stdout, want) {
				t.Errorf("the resume from step 15 does not say %q:\n%s", want, stdout)
			}
			foldertest.Kept(t, "the resume from step 15", out, before)
			runs, _ := filepath.Glob(filepath.Join(out, "run-*"))
			var child string
			for _, r := range runs {
				if r != runDir {
					child = r
				}
			}
			if len(runs) != 2 {
				t.Fatalf("run folders %v, want the damaged one and a new one", runs)
			}
			if _, err := checkpoint.Read(filepath.Join(child, checkpoint.StepName(40))); err != nil {
				t.Errorf("the new run's last checkpoint: %v", err)
			}
		})
	}
}

// TestFlagNamesPlain checks the placeholder that train -h prints after
// each flag (flag.UnquoteUsage reads a backquoted word of the help text as
// the value's name): one word, a type, for every flag.
func TestFlagNamesPlain(t *testing.T) {
	_, fs, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if name, _ := flag.UnquoteUsage(f); strings.ContainsAny(name, " .") {
			t.Errorf("-%s: train -h names its value %q", f.Name, name)
		}
	})
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "  -dist string\n") {
		t.Errorf("train -h: %v, and no line \"  -dist string\" in:\n%s", err, help.String())
	}
}

// ranksOf is a group of n ranks for checkShards, which asks only its
// size and this rank.
type ranksOf struct {
	dist.Communicator
	n int
}

func (r ranksOf) Size() int { return r.n }
func (r ranksOf) Rank() int { return 0 }

// TestShardsAdvice refuses a -batch of 16 on 3 ranks: a new run is told a
// -batch that 3 ranks take, a resumed run (whose -batch is the
// checkpoint's) numbers of ranks that take 16, each of which checkShards
// then accepts.
func TestShardsAdvice(t *testing.T) {
	c := config{batch: 16, comm: ranksOf{n: 3}}
	err := checkShards(c)
	m := regexp.MustCompile(`try -batch (\d+)\)$`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("a new run: %v, want a -batch to try", err)
	}
	c.batch, _ = strconv.Atoi(m[1])
	if err := checkShards(c); err != nil {
		t.Errorf("the advised -batch %d: %v", c.batch, err)
	}

	c = config{batch: 16, comm: ranksOf{n: 3}, resumed: checkpoint.New()}
	err = checkShards(c)
	m = regexp.MustCompile(`resume on a number of ranks that divides it \(([0-9, ]+)\)$`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil || strings.Contains(err.Error(), "try -batch") {
		t.Fatalf("a resumed run: %v, want numbers of ranks and no -batch (a resumed run keeps its -batch)", err)
	}
	for _, s := range strings.Split(m[1], ", ") {
		n, _ := strconv.Atoi(s)
		c.comm = ranksOf{n: n}
		if err := checkShards(c); err != nil || n < 1 {
			t.Errorf("the advised %q ranks: %v", s, err)
		}
	}
}

// TestProgressLineCountsRunSteps trains 2 epochs of 20 steps without a
// terminal: the progress lines count the run's steps, as metrics.csv and
// the test lines do, out of 40, rising across the epochs.
func TestProgressLineCountsRunSteps(t *testing.T) {
	data := hostileData(t)
	c, err := parseFlags(append(hostileArgs(data), "-epochs", "2", "-out", t.TempDir()), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), c, &out, hooks{}); err != nil {
		t.Fatal(err)
	}
	last := 0
	lines := regexp.MustCompile(`epoch (\d)/2 .* \(step (\d+)/(\d+)\)\n`).FindAllStringSubmatch(out.String(), -1)
	for _, l := range lines {
		epoch, _ := strconv.Atoi(l[1])
		step, _ := strconv.Atoi(l[2])
		if l[3] != "40" || step <= last || step > 20*epoch || step <= 20*(epoch-1) {
			t.Errorf("%q: want the run's step, rising, within epoch %d's steps %d to %d, of 40", strings.TrimSpace(l[0]), epoch, 20*(epoch-1)+1, 20*epoch)
		}
		last = step
	}
	if len(lines) < 4 || last != 40 {
		t.Errorf("%d progress lines, the last at step %d; want lines in both epochs up to step 40:\n%s", len(lines), last, out.String())
	}
}

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
