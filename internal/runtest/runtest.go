// Package runtest runs a training command (a test binary acting as the
// command's main: Main, Command, SignalAt) and checks what package training
// promises of it: a run interrupted by SIGINT and resumed with -resume
// latest ends with the checkpoint tensors of an uninterrupted run, bit for
// bit (InterruptThenResume); its checkpoints read back with their progress
// (Final, Read); a constrained weight its optimizer stepped stays on its
// manifold (Stepped).
package runtest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/training"
)

// MainEnv is the variable that makes a test binary run the command's main
// (see Command).
const MainEnv = "ORTHONET_RUNTEST_MAIN"

// Main is the TestMain of a command's tests: where MainEnv is 1 the test
// binary is the command (see Command) and exits with run's code on its
// arguments; otherwise it runs the tests.
func Main(m *testing.M, run func(args []string, stdout, stderr io.Writer) int) {
	if os.Getenv(MainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// Command returns this test binary (os.Args[0]) run as the command's main
// with args, ended when ctx is; the test's TestMain calls the command's
// main where MainEnv is 1.
func Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), MainEnv+"=1")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Final returns the newest checkpoint under out and its progress.
func Final(t testing.TB, out string) (*checkpoint.File, training.Progress) {
	t.Helper()
	path, bad, err := checkpoint.LatestUnder(out)
	if err != nil || bad != nil || path == "" {
		t.Fatalf("newest checkpoint under %s: %q, %v, %v", out, path, bad, err)
	}
	return Read(t, path)
}

// Read returns the checkpoint at path and its progress.
func Read(t testing.TB, path string) (*checkpoint.File, training.Progress) {
	t.Helper()
	f, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var st training.Progress
	if err := f.JSON(training.KeyProgress, &st); err != nil {
		t.Fatal(err)
	}
	return f, st
}

// SameTensors fails t unless a and b hold the same tensors, bit for bit.
func SameTensors(t testing.TB, what string, a, b *checkpoint.File) {
	t.Helper()
	if len(a.Tensors) != len(b.Tensors) || len(a.Tensors) == 0 {
		t.Fatalf("%s: %d tensors against %d", what, len(a.Tensors), len(b.Tensors))
	}
	for name, ta := range a.Tensors {
		tb, ok := b.Tensors[name]
		if !ok || !testval.SameBits(ta.Data, tb.Data) {
			t.Errorf("%s: tensor %s differs", what, name)
		}
	}
}

// SignalAt starts cmd, reads its standard output line by line until a line
// for which at returns true, sends cmd sig then, and waits for it to end.
// It returns what cmd wrote to its standard output and error, and Wait's
// error. Where no line satisfies at, cmd ends without a signal.
func SignalAt(t testing.TB, cmd *exec.Cmd, sig os.Signal, at func(line string) bool) (stdout, stderr string, err error) {
	t.Helper()
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errBuf, seen bytes.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(io.TeeReader(pipe, &seen))
	for sc.Scan() {
		if at(sc.Text()) {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	_, _ = io.Copy(&seen, pipe)
	err = cmd.Wait()
	return seen.String(), errBuf.String(), err
}

// stepLine matches the step count in a run's progress lines.
var stepLine = regexp.MustCompile(`\(step (\d+)/`)

// InterruptThenResume runs the command with args and -out in a folder of
// its own to the end; runs it again in another folder and sends it SIGINT
// once a progress line shows step after or later, expecting exit 130; runs
// it a third time there with -resume latest; and checks that both runs end
// with the same step and the same checkpoint tensors, bit for bit.
func InterruptThenResume(t *testing.T, after int, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	straight, stopped := t.TempDir(), t.TempDir()
	if out, err := Command(ctx, append(args, "-out", straight)...).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	cmd := Command(ctx, append(args, "-out", stopped)...)
	seen, stderr, err := SignalAt(t, cmd, syscall.SIGINT, func(line string) bool {
		m := stepLine.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		k, _ := strconv.Atoi(m[1])
		return k >= after
	})
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("interrupted run: exit %d (%v), want 130\n%s%s", code, err, seen, stderr)
	}
	_, mid := Final(t, stopped)
	if out, err := Command(ctx, append(args, "-out", stopped, "-resume", "latest")...).CombinedOutput(); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	want, wst := Final(t, straight)
	got, gst := Final(t, stopped)
	if gst.Step != wst.Step || mid.Step >= wst.Step {
		t.Fatalf("interrupted at step %d, resumed to step %d; the uninterrupted run ended at %d", mid.Step, gst.Step, wst.Step)
	}
	t.Logf("interrupted at step %d of %d, resumed", mid.Step, wst.Step)
	SameTensors(t, "resumed against uninterrupted", want, got)
}

// Stepped fails t unless the constrained weight w, once prog has stored its
// parameters into the graph, moved from its first value w0 by more than
// 1e-3 somewhere (its optimizer stepped it) and after steps steps still
// lies on its manifold: ||W^T W - I||_F < 1e-5.
func Stepped(t testing.TB, prog interface{ StoreParams() error }, w param.Param, w0 []float32, steps int) {
	t.Helper()
	if err := prog.StoreParams(); err != nil {
		t.Fatal(err)
	}
	if d := testval.MaxAbs(testval.Floats(w0), testval.Floats(w.Node.Value().Data())); !(d > 1e-3) {
		t.Errorf("the Stiefel weight moved by %.3g at most: RSDM did not step it", d)
	}
	f, err := w.Feasibility()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("||W^T W - I||_F = %.3g", f)
	if !(f < 1e-5) {
		t.Errorf("||W^T W - I||_F = %.3g after %d steps, want < 1e-5", f, steps)
	}
}
