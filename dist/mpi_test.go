//go:build cgo

package dist_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/internal/mpitest"
)

// childEnv names the variable that makes the test binary run one rank of
// an MPI job (child) instead of the tests.
const childEnv = "ORTHONET_DIST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// mpirun returns the command that runs this test binary as np ranks of an
// MPI job in child mode (mpitest.Command), or skips the test where mpirun
// is missing and ORTHONET_REQUIRE_MPI is not 1.
func mpirun(t testing.TB, ctx context.Context, np int, mode string, args ...string) *exec.Cmd {
	t.Helper()
	return mpitest.Command(t, ctx, np, []string{childEnv + "=" + mode}, args...)
}

// run runs cmd and returns its output, its exit code and how long it took.
func run(t *testing.T, cmd *exec.Cmd) (string, int, time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0, took
	case errors.As(err, &exit):
		return string(out), exit.ExitCode(), took
	}
	t.Fatalf("%v: %v\n%s", cmd, err, out)
	return "", 0, 0
}

// TestMPICollectives runs 2 ranks under mpirun, each checking sums,
// broadcasts, a barrier, a buffer past the shared-memory single-copy size,
// that a sum allocates nothing, bad roots, a mismatch caught by
// MPIOptions.Check and calls after Close.
func TestMPICollectives(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, code, took := run(t, mpirun(t, ctx, 2, "collectives"))
	t.Logf("mpirun -np 2: exit %d in %v", code, took.Round(time.Millisecond))
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for r := range 2 {
		if want := fmt.Sprintf("rank %d of 2: ok", r); !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
}

// TestMPISingleton starts MPI in a process that no mpirun started: it is
// the one rank of a group of 1, as `train -dist mpi` run alone would be.
func TestMPISingleton(t *testing.T) {
	mpirun(t, context.Background(), 1, "") // skips without Open MPI
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=singleton")
	out, code, _ := run(t, cmd)
	if code != 0 || !strings.Contains(out, "rank 0 of 1: ok") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestMPIRankDies ends one rank of 2 while the other waits in an
// all-reduce: killed by SIGKILL, exiting without Close, or calling Abort.
// mpirun must end the job with a non-zero exit within the bound, with the
// waiting rank gone too.
func TestMPIRankDies(t *testing.T) {
	const bound = 20 * time.Second
	for _, tc := range []struct {
		mode string
		want string // in the output
	}{
		{"kill", ""},
		{"exit", ""},
		{"abort", "dist: rank 1 of 2 aborts the MPI job: bad batch"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*bound)
			defer cancel()
			out, code, took := run(t, mpirun(t, ctx, 2, tc.mode))
			t.Logf("exit %d after %v", code, took.Round(time.Millisecond))
			if code == 0 {
				t.Errorf("mpirun exited 0:\n%s", out)
			}
			if took > bound {
				t.Errorf("the job took %v to end, more than %v:\n%s", took, bound, out)
			}
			if strings.Contains(out, "came back") {
				t.Errorf("rank 0's all-reduce returned though rank 1 was gone:\n%s", out)
			}
			if tc.want != "" && !strings.Contains(out, tc.want) {
				t.Errorf("no %q in the output:\n%s", tc.want, out)
			}
			m := regexp.MustCompile(`rank 0 pid (\d+) waits`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("rank 0 never reached the all-reduce:\n%s", out)
			}
			pid, _ := strconv.Atoi(m[1])
			if !gone(pid, 5*time.Second) {
				t.Errorf("rank 0 (pid %d) still runs after mpirun ended", pid)
			}
		})
	}
}

// gone reports whether process pid has ended (or is a zombie that nobody
// reaps: a container's first process may not) within wait.
func gone(pid int, wait time.Duration) bool {
	for end := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// child runs one rank of the job that mode names and returns its exit code.
func child(mode string) int {
	fail := func(format string, a ...any) int {
		fmt.Printf("FAIL: "+format+"\n", a...)
		return 1
	}
	c, err := dist.OpenMPI(dist.MPIOptions{Check: mode == "collectives"})
	if err != nil {
		return fail("%v", err)
	}
	r, n := c.Rank(), c.Size()
	switch mode {
	case "collectives":
		if err := recovers(); err != nil {
			c.Abort(err)
			return fail("rank %d: %v", r, err)
		}
		if err := collectives(c); err != nil {
			c.Abort(err)
			return fail("rank %d: %v", r, err)
		}
	case "singleton":
		if n != 1 || r != 0 {
			return fail("singleton is rank %d of %d", r, n)
		}
		b := []float64{1.5, -2}
		if err := c.AllReduceSum64(b); err != nil || b[0] != 1.5 || b[1] != -2 {
			return fail("singleton sum %v: %v", b, err)
		}
	case "kill", "exit", "abort":
		if err := c.Barrier(); err != nil {
			return fail("barrier: %v", err)
		}
		if r == 1 {
			time.Sleep(200 * time.Millisecond) // rank 0 is in its all-reduce
			switch mode {
			case "kill":
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			case "exit":
				os.Exit(3)
			case "abort":
				c.Abort(errors.New("bad batch"))
			}
			time.Sleep(time.Minute)
			return 0
		}
		fmt.Printf("rank 0 pid %d waits\n", os.Getpid())
		err := c.AllReduceSum32(make([]float32, 10))
		fmt.Printf("rank 0: all-reduce came back: %v\n", err)
		return 0
	case "bench":
		return benchChild(c)
	case "solver":
		return solverChild(c)
	default:
		return fail("unknown mode %q", mode)
	}
	if err := c.Close(); err != nil {
		return fail("rank %d: close: %v", r, err)
	}
	fmt.Printf("rank %d of %d: ok\n", r, n)
	return 0
}

// recovers checks that Go still turns a nil dereference into a panic that
// recover stops, after MPI started: Open MPI's own handlers of SIGSEGV (its
// parameter opal_signal) must not have taken the signal from Go.
func recovers() (err error) {
	var p *[4]float32
	defer func() {
		if recover() == nil {
			err = fmt.Errorf("a nil dereference did not panic")
		}
	}()
	p[1] = 1
	return nil
}

// collectives checks every call of c against the sums and copies it must
// give, each rank filling its buffers from its rank; integer values keep
// the sums exact.
func collectives(c dist.Communicator) error {
	r, n := c.Rank(), c.Size()
	for _, size := range []int{0, 1, 7, 1 << 20} { // 4 MiB: past vader's single-copy threshold
		a := make([]float32, size)
		b := make([]float64, size)
		for i := range a {
			a[i] = float32((r + 1) * (i%1000 + 1))
			b[i] = float64((r+1)*(i%1000+1)) - 0.5
		}
		if err := c.AllReduceSum32(a); err != nil {
			return err
		}
		if err := c.AllReduceSum64(b); err != nil {
			return err
		}
		for i := range a {
			if want := float32(n * (n + 1) / 2 * (i%1000 + 1)); a[i] != want {
				return fmt.Errorf("float32 sum of %d: [%d] = %v, want %v", size, i, a[i], want)
			}
			if want := float64(n*(n+1)/2*(i%1000+1)) - 0.5*float64(n); b[i] != want {
				return fmt.Errorf("float64 sum of %d: [%d] = %v, want %v", size, i, b[i], want)
			}
		}
	}
	for root := range n {
		a, b, s := make([]float32, 5), make([]float64, 5), make([]byte, 3)
		for i := range a {
			a[i], b[i] = float32(10*r+i), float64(100*r+i)
		}
		copy(s, fmt.Sprintf("r%d", r))
		if err := c.Broadcast32(a, root); err != nil {
			return err
		}
		if err := c.Broadcast64(b, root); err != nil {
			return err
		}
		if err := c.BroadcastBytes(s, root); err != nil {
			return err
		}
		for i := range a {
			if a[i] != float32(10*root+i) || b[i] != float64(100*root+i) {
				return fmt.Errorf("broadcast from %d: %v %v", root, a, b)
			}
		}
		if string(s[:2]) != fmt.Sprintf("r%d", root) {
			return fmt.Errorf("broadcast from %d: bytes %q", root, s)
		}
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	// AllocsPerRun counts the whole process's allocations, and the Go
	// runtime may allocate a thread's structures while a cgo call blocks:
	// 100 runs keep a few of those from showing.
	var sumErr error
	buf := make([]float32, 1000)
	allocs := testing.AllocsPerRun(100, func() { // the same number of calls on every rank
		if err := c.AllReduceSum32(buf); err != nil {
			sumErr = err
		}
	})
	if sumErr != nil {
		return sumErr
	}
	if allocs != 0 {
		return fmt.Errorf("%v allocations per all-reduce", allocs)
	}
	for _, root := range []int{n, -1} {
		if err := c.Broadcast32(make([]float32, 2), root); err == nil {
			return fmt.Errorf("broadcast from root %d of %d ranks: no error", root, n)
		}
	}
	// Rank 1 sums one more element than the others: Check must catch it
	// on every rank, and the group goes on.
	err := c.AllReduceSum64(make([]float64, 3+r%2))
	if !errors.Is(err, dist.ErrMismatch) {
		return fmt.Errorf("sums of different lengths: %v, want ErrMismatch", err)
	}
	x := []float64{1}
	if err := c.AllReduceSum64(x); err != nil || x[0] != float64(n) {
		return fmt.Errorf("sum after a mismatch: %v, %v", x, err)
	}
	if err := c.Close(); err != nil {
		return err
	}
	if err := c.Barrier(); !errors.Is(err, dist.ErrClosed) {
		return fmt.Errorf("barrier after close: %v, want ErrClosed", err)
	}
	return nil
}
