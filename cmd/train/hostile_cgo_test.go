//go:build cgo

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/foldertest"
)

// TestAutoDeviceTakesCPU trains, on the host model of a GPU, with each
// setting that the device's optimizer refuses: -device auto trains on the
// CPU, saying why, bit for bit as -device cpu does, and the CPU run's
// checkpoint resumes with -device auto; -device cuda exits 2 with one line
// naming the setting and writes nothing.
func TestAutoDeviceTakesCPU(t *testing.T) {
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	data := hostileData(t)
	base := []string{"-dataset", "mnist", "-data", data, "-hidden", "32", "-depth", "2", "-lr", "0.2", "-batch", "10", "-eval-every", "-1"}
	for _, tc := range []struct {
		name string
		args []string
		want string // in the refusal
	}{
		{"orth", []string{"-r", "8", "-sampling", "orth"}, "RSDM with orth sampling does not run on a device"},
		{"clip", []string{"-r", "8", "-clip-norm", "1"}, "gradient clipping (ClipNorm 1) reads every gradient on the host"},
		{"radam", []string{"-optim", "radam", "-lr", "0.01"}, "the radam rule does not run on a device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{}, base...), tc.args...)
			outs := map[string]string{}
			for _, device := range []string{"cpu", "auto"} {
				outs[device] = t.TempDir()
				c, err := parseFlags(append(args, "-device", device, "-out", outs[device]), io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				var log bytes.Buffer
				if err := run(context.Background(), c, &log, hooks{}); err != nil {
					t.Fatalf("-device %s: %v\n%s", device, err, log.String())
				}
				if said := strings.Contains(log.String(), "train: device cpu instead: "+"optim: "); device == "auto" && (!said || !strings.Contains(log.String(), tc.want)) {
					t.Errorf("-device auto does not say that it takes the CPU because %q:\n%s", tc.want, log.String())
				}
			}
			fa, pa := finalState(t, outs["cpu"])
			fb, pb := finalState(t, outs["auto"])
			if !reflect.DeepEqual(fa.Tensors, fb.Tensors) || pa.Step != pb.Step {
				t.Errorf("-device auto's run differs from -device cpu's (steps %d and %d)", pb.Step, pa.Step)
			}

			c, err := parseFlags([]string{"-resume", "latest", "-out", outs["cpu"], "-epochs", "2"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			if err := run(context.Background(), c, &log, hooks{}); err != nil || !strings.Contains(log.String(), "train: device cpu instead: ") {
				t.Errorf("the CPU checkpoint resumed with -device auto: %v\n%s", err, log.String())
			}
			if _, p := finalState(t, outs["cpu"]); p.Epoch != 2 {
				t.Errorf("the resumed run ended at epoch %d, want 2", p.Epoch)
			}

			out := filepath.Join(t.TempDir(), "out")
			_, stderr, code := trainExit(t, append(args, "-device", "cuda", "-out", out)...)
			if code != 2 {
				t.Errorf("-device cuda: exit %d, want 2\n%s", code, stderr)
			}
			oneLine(t, "-device cuda", stderr, "train: -device cuda: ", tc.want)
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("-device cuda wrote -out %s: %v", out, err)
			}
		})
	}
}

// mpirunRanks returns the command that runs one rank of cmd/train for each
// of ranks (its arguments) under mpirun, each writing its exit code into
// rcDir/rc-RANK, or skips the test as mpirunTrain does.
func mpirunRanks(t *testing.T, ctx context.Context, rcDir string, ranks ...[]string) *exec.Cmd {
	t.Helper()
	cmd := mpirunTrain(t, ctx, 1, []string{"ORTHONET_TEST_RC=" + rcDir})
	a := slicesCut(cmd.Args[1:], "-np") // mpirun's own options
	for k, args := range ranks {
		if k > 0 {
			a = append(a, ":")
		}
		a = append(a, "-np", "1", "sh", "-c", `"$0" "$@"; echo $? >"$ORTHONET_TEST_RC/rc-$OMPI_COMM_WORLD_RANK"`, os.Args[0])
		a = append(a, args...)
	}
	cmd.Args = append(cmd.Args[:1], a...)
	return cmd
}

// slicesCut returns s up to the first element equal to at.
func slicesCut(s []string, at string) []string {
	for i, v := range s {
		if v == at {
			return append([]string{}, s[:i]...)
		}
	}
	return append([]string{}, s...)
}

// rankCodes returns the exit codes the ranks wrote into rcDir.
func rankCodes(t *testing.T, rcDir string, n int) []int {
	t.Helper()
	codes := make([]int, n)
	for k := range codes {
		b, _ := os.ReadFile(filepath.Join(rcDir, "rc-"+strconv.Itoa(k))) // none: the rank was killed
		var err error
		if codes[k], err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			codes[k] = -1 // the rank never ended on its own (killed)
		}
	}
	return codes
}

// TestMPIRanksDisagree starts two ranks that differ in one setting each
// (sizes that once corrupted the heap, -epochs that once hung, the
// optimizer's step size, the seed, the data's size and the data itself,
// the resume point): every rank exits 2 before anything is written, and
// the run's one message names the setting and each rank's value; no file
// of the runs resumed from changes.
func TestMPIRanksDisagree(t *testing.T) {
	mnist, _ := distSets(t)
	other := t.TempDir() // the same sizes, other images
	fixture(t, 200, "train", other, 7)
	fixture(t, 50, "t10k", other, 2)
	base := append(ffnArgs(mnist), "-dist", "mpi", "-schedule", "const")
	prior := t.TempDir()
	if _, stderr, code := trainExit(t, append(ffnArgs(mnist), "-save-every", "5", "-out", prior)...); code != 0 {
		t.Fatalf("run to resume from: exit %d\n%s", code, stderr)
	}
	priorRun := onlyRun(t, prior)
	for _, tc := range []struct {
		name       string
		rank0, rk1 []string // each rank's arguments after base
		want       string
	}{
		{"r", nil, []string{"-r", "4"}, `-r is "8" on rank 0, "4" on rank 1`},
		{"hidden", nil, []string{"-hidden", "16"}, `-hidden is "32" on rank 0, "16" on rank 1`},
		{"epochs", nil, []string{"-epochs", "2"}, `-epochs is "1" on rank 0, "2" on rank 1`},
		{"lr", nil, []string{"-lr", "0.3"}, `-lr is "0.2" on rank 0, "0.3" on rank 1`},
		{"seed", nil, []string{"-seed", "2"}, `-seed is "1" on rank 0, "2" on rank 1`},
		{"limit-train", nil, []string{"-limit-train", "100"}, `-limit-train is "0" on rank 0, "100" on rank 1`},
		{"data", nil, []string{"-data", other}, `the ranks' data differ`},
		// A resumed run takes its flags from the checkpoint: only -dist mpi.
		{"resume point", []string{"-resume", filepath.Join(priorRun, checkpoint.StepName(10))}, []string{"-resume", filepath.Join(priorRun, checkpoint.StepName(15))},
			`resume point is "step 10 of run`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			out, rc := filepath.Join(t.TempDir(), "out"), t.TempDir()
			before := foldertest.Snapshot(t, prior)
			args := func(extra []string) []string {
				if tc.name == "resume point" {
					return append([]string{"-dist", "mpi", "-out", out}, extra...)
				}
				return append(append(append([]string{}, base...), "-out", out), extra...)
			}
			text, _ := runCmd(t, mpirunRanks(t, ctx, rc, args(tc.rank0), args(tc.rk1)))
			if ctx.Err() != nil {
				t.Fatalf("the ranks did not end in 120 s:\n%s", text)
			}
			if codes := rankCodes(t, rc, 2); !reflect.DeepEqual(codes, []int{2, 2}) {
				t.Errorf("the ranks exited %v, want 2 on each:\n%s", codes, text)
			}
			if n := strings.Count(text, "train: -dist mpi: the ranks'"); n != 1 || !strings.Contains(text, tc.want) {
				t.Errorf("want one message naming %q, got %d in:\n%s", tc.want, n, text)
			}
			for _, bad := range []string{"panic:", "SIGABRT", "free()", "double free"} {
				if strings.Contains(text, bad) {
					t.Errorf("a rank crashed (%q):\n%s", bad, text)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("-out %s: %v, want nothing written", out, err)
			}
			foldertest.Same(t, "the run resumed from", prior, before)
		})
	}
}

// TestMPIHeldFolder resumes on 2 ranks a run whose folder this test
// process holds: both ranks exit 2, the message names this process's PID,
// and no file of the run changes.
func TestMPIHeldFolder(t *testing.T) {
	mnist, _ := distSets(t)
	prior := t.TempDir()
	if _, stderr, code := trainExit(t, append(ffnArgs(mnist), "-out", prior)...); code != 0 {
		t.Fatalf("run to resume: exit %d\n%s", code, stderr)
	}
	runDir := onlyRun(t, prior)
	held, err := checkpoint.OpenRun(runDir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	before := foldertest.Snapshot(t, prior)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rc := t.TempDir()
	args := []string{"-dist", "mpi", "-resume", runDir, "-epochs", "2"}
	text, _ := runCmd(t, mpirunRanks(t, ctx, rc, args, args))
	if codes := rankCodes(t, rc, 2); !reflect.DeepEqual(codes, []int{2, 2}) {
		t.Errorf("the ranks exited %v, want 2 on each:\n%s", codes, text)
	}
	if want := fmt.Sprintf("held by process %d ", os.Getpid()); !strings.Contains(text, want) {
		t.Errorf("no %q in:\n%s", want, text)
	}
	foldertest.Same(t, "the held run", prior, before)
}
