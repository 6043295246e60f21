// Package mpitest starts the running test binary as the ranks of an MPI
// job, for the data-parallel tests of dist and cmd/train.
package mpitest

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Command returns the command that runs this test binary (os.Args[0])
// with args as np ranks under mpirun, with the settings that make mpirun
// work in a container as root (docs/data-parallel.md), or skips t where
// mpirun is missing and ORTHONET_REQUIRE_MPI is not 1. Every rank gets
// the caller's environment and the NAME=VALUE variables of env. The
// command runs in a process group of its own, killed whole when ctx ends.
func Command(t testing.TB, ctx context.Context, np int, env []string, args ...string) *exec.Cmd {
	t.Helper()
	path, err := exec.LookPath("mpirun")
	if err != nil {
		if os.Getenv("ORTHONET_REQUIRE_MPI") == "1" {
			t.Fatalf("mpirun not found and ORTHONET_REQUIRE_MPI=1: %v (make deps installs openmpi-bin)", err)
		}
		t.Skipf("mpirun not found (apt-get install openmpi-bin libopenmpi-dev, or make deps): %v", err)
	}
	a := []string{"--oversubscribe", "--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"}
	if os.Geteuid() == 0 {
		a = append(a, "--allow-run-as-root")
	}
	for _, e := range env {
		a = append(a, "-x", strings.SplitN(e, "=", 2)[0])
	}
	a = append(a, "-np", strconv.Itoa(np), os.Args[0])
	cmd := exec.CommandContext(ctx, path, append(a, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
