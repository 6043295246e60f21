//go:build unix

package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orthonet/orthonet/internal/foldertest"
)

// holdEnv names the variable that makes this test binary a process that
// opens the run folder it names, says "held" and waits to be killed
// (TestMain).
const holdEnv = "CHECKPOINT_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		if _, err := OpenRun(dir); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder starts a process that holds the run folder dir, and returns it
// once it holds it.
func holder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("the holding process said %q (%v)", line, err)
	}
	return cmd
}

// TestRunLock holds a run folder in another process: OpenRun fails at once
// with ErrLocked naming that process's PID and changes no file of the
// folder, while ReadRun reads it; once the holder is killed with SIGKILL,
// OpenRun takes the folder. In one process, a closed Run and a ReadRun's
// refuse every write, and a Run opened after Close writes.
func TestRunLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r, err := CreateRun(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Save(3, stepFile(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRun(dir); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Errorf("OpenRun of a folder this process holds: %v, want ErrLocked naming PID %d", err, os.Getpid())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	h := holder(t, dir)
	before := foldertest.Snapshot(t, dir)
	start := time.Now()
	_, err = OpenRun(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("held by process %d ", h.Process.Pid)) {
		t.Errorf("OpenRun of a folder another process holds: %v, want ErrLocked naming PID %d", err, h.Process.Pid)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("OpenRun waited %v for the lock", d)
	}
	foldertest.Same(t, "the refused OpenRun", dir, before)
	ro, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, s, ok := ro.Latest(); !ok || s != 3 {
		t.Errorf("ReadRun of a held folder: latest step %d, %v", s, ok)
	}

	if err := h.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = h.Wait()
	r, err = OpenRun(dir)
	if err != nil {
		t.Fatalf("OpenRun after the holder was killed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, LockName)); string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("%s holds %q, want this process's PID", LockName, b)
	}
	if _, err := r.Save(4, stepFile(4)); err != nil {
		t.Errorf("saving after taking the folder: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]*Run{"closed": r, "ReadRun": ro} {
		for what, err := range map[string]error{
			"Save":      func() error { _, err := run.Save(5, stepFile(5)); return err }(),
			"MarkBest":  run.MarkBest(3),
			"Prune":     run.Prune(1),
			"WriteFile": run.WriteFile("notes.txt", nil),
			"Discard":   run.Discard(),
		} {
			if err == nil || !strings.Contains(err.Error(), "open for reading only") {
				t.Errorf("%s run: %s: %v, want a refusal", name, what, err)
			}
		}
	}
	if got := must(ReadRun(dir)).Checkpoints(); len(got) != 2 {
		t.Errorf("checkpoints %v after the refused writes, want [3 4]", got)
	}
}

// TestRunNewest damages the newest checkpoint of a run three ways: Latest
// skips it, and Newest returns it with an error naming the file and the
// fault; a checkpoint listed but never written is skipped by both.
func TestRunNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r, err := CreateRun(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{1, 2} {
		if _, err := r.Save(s, stepFile(s)); err != nil {
			t.Fatal(err)
		}
	}
	newest := filepath.Join(dir, StepName(2))
	good, _ := os.ReadFile(newest)
	flipped := append([]byte{}, good...)
	flipped[5] ^= 0x10 // the header length's sixth byte: a length far beyond the file
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated header", good[:20], "the file has 20 bytes"},
		{"flipped length", flipped, "header length"},
		{"foreign file", []byte("GIF89a, not a checkpoint at all"), "header length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(newest, tc.b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, s, ok := r.Latest(); !ok || s != 1 {
				t.Errorf("latest step %d, %v, want 1", s, ok)
			}
			p, s, err := r.Newest()
			if p != newest || s != 2 || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), newest) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("newest %s %d, %v; want %s, step 2, ErrCorrupt naming it and %q", p, s, err, newest, tc.want)
			}
		})
	}
	if err := os.WriteFile(newest, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, s, err := r.Newest(); p != newest || s != 2 || err != nil {
		t.Errorf("newest %s %d, %v, want %s, step 2, no error", p, s, err, newest)
	}
	if _, err := r.Save(3, stepFile(3)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, StepName(3))) // listed, never renamed into place
	if p, s, err := r.Newest(); p != newest || s != 2 || err != nil {
		t.Errorf("with step 3 listed but missing: newest %s %d, %v, want step 2", p, s, err)
	}
}
