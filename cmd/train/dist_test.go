//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/foldertest"
	"github.com/orthonet/orthonet/internal/mpitest"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/training"
)

// The tests of -dist mpi run this test binary as cmd/train
// (ORTHONET_TRAIN_MAIN=1) under mpirun, with the settings that work in this
// workplace's container (README "Data-parallel (MPI)").

// mpirunTrain returns the command that runs np ranks of cmd/train with args
// (mpitest.Command), or skips the test where mpirun is missing and
// ORTHONET_REQUIRE_MPI is not 1. env adds variables to every rank's
// environment.
func mpirunTrain(t *testing.T, ctx context.Context, np int, env []string, args ...string) *exec.Cmd {
	t.Helper()
	return mpitest.Command(t, ctx, np, append([]string{"ORTHONET_TRAIN_MAIN=1"}, env...), args...)
}

// runCmd runs cmd and returns its output and exit code.
func runCmd(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s: %v", filepath.Base(cmd.Path), time.Since(start).Round(time.Millisecond))
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%v: %v\n%s", cmd, err, out)
	return "", 0
}

// distSets writes the small FFN's and ViT's generated data sets and returns
// their folders.
func distSets(t *testing.T) (mnist, cifar string) {
	return mnistDir(t, 200, 50), cifarDir(t, 12, 20)
}

func ffnArgs(dir string) []string {
	return []string{"-dataset", "mnist", "-data", dir, "-hidden", "32", "-depth", "2", "-r", "8", "-lr", "0.2", "-batch", "10", "-epochs", "1", "-eval-every", "5"}
}

// vitArgs: no dropout, whose masks are drawn per rank (equal in law, not in
// value, to one process's).
func vitArgs(dir string) []string {
	return []string{"-model", "vit", "-dataset", "cifar10", "-data", dir, "-dim", "32", "-depth", "1", "-heads", "2", "-mlp", "32", "-patch", "8",
		"-r", "8", "-lr", "0.1", "-other", "adam", "-lr-other", "0.002", "-batch", "20", "-epochs", "2", "-dropout", "0"}
}

// Tolerances of 2 ranks against one process on the same global batches:
// the ranks' float32 forward and backward passes sum over 5 or 10 rows
// where one process sums over all, and the Solver averages two means, so
// each step differs by float32 rounding (6e-8 relative) and the
// differences grow over the steps. Measured on the runs below: losses
// within ~1e-6, weights within ~1e-6.
const (
	distLossTol   = 1e-4 // relative, per logged loss
	distWeightTol = 1e-4 // absolute, per weight entry
)

// TestMPITrainMatchesOneProcess trains a small FFN (on both engines), a
// small ViT and a small CNN as 2 ranks under mpirun and as one process with the same global batch and
// seed: every logged loss and the final weights agree to float rounding.
// The run's end line must state the bytes optim's Traffic counts (r x r x 4
// per float32 RSDM weight). And -dist mpi without mpirun (one rank) must
// train bit for bit as -dist single.
func TestMPITrainMatchesOneProcess(t *testing.T) {
	mnist, cifar := distSets(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ffn", ffnArgs(mnist)},
		{"ffn-tape", append(ffnArgs(mnist), "-engine", "tape")},
		{"vit", vitArgs(cifar)},
		{"cnn", []string{"-model", "cnn", "-dataset", "cifar10", "-data", cifar, "-channels", "4", "-depth", "2", "-r", "8", "-lr", "0.2",
			"-other", "adam", "-lr-other", "0.002", "-batch", "20", "-epochs", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			one, two, mpi1 := t.TempDir(), t.TempDir(), t.TempDir()
			out, code := runCmd(t, trainCmd(ctx, append(tc.args, "-dist", "single", "-out", one)...))
			if code != 0 {
				t.Fatalf("-dist single: exit %d\n%s", code, out)
			}
			out, code = runCmd(t, mpirunTrain(t, ctx, 2, nil, append(tc.args, "-dist", "mpi", "-out", two)...))
			if code != 0 {
				t.Fatalf("mpirun -np 2: exit %d\n%s", code, out)
			}
			fa, pa := finalState(t, one)
			fb, pb := finalState(t, two)
			compareRuns(t, fa, fb, pa, pb)
			checkTrafficLine(t, out, fb, 2)

			if tc.name != "ffn" {
				return
			}
			out, code = runCmd(t, trainCmd(ctx, append(tc.args, "-dist", "mpi", "-out", mpi1)...))
			if code != 0 {
				t.Fatalf("-dist mpi alone: exit %d\n%s", code, out)
			}
			fc, pc := finalState(t, mpi1)
			sameTraining(t, "-dist mpi as 1 rank against -dist single", fa, fc, pa, pc)
			checkTrafficLine(t, out, fc, 1)
		})
	}
}

// compareRuns checks two runs' metrics rows (every training row's loss,
// every test row) and final weights against the tolerances.
func compareRuns(t *testing.T, a, b *checkpoint.File, pa, pb training.Progress) {
	t.Helper()
	if len(pa.Metrics) != len(pb.Metrics) || pa.Step != pb.Step {
		t.Fatalf("one process: %d metrics rows, step %d; 2 ranks: %d rows, step %d", len(pa.Metrics), pa.Step, len(pb.Metrics), pb.Step)
	}
	worstLoss, train := 0.0, 0
	for i, ma := range pa.Metrics {
		mb := pb.Metrics[i]
		if ma.Kind != mb.Kind || ma.Step != mb.Step {
			t.Fatalf("row %d: %s at step %d against %s at step %d", i, ma.Kind, ma.Step, mb.Kind, mb.Step)
		}
		rel := math.Abs(ma.Loss-mb.Loss) / max(math.Abs(ma.Loss), 1e-12)
		worstLoss = max(worstLoss, rel)
		if !(rel <= distLossTol) {
			t.Errorf("%s row at step %d: loss %.9g with one process, %.9g with 2 ranks", ma.Kind, ma.Step, ma.Loss, mb.Loss)
		}
		if ma.Kind == "train" {
			train++
		}
	}
	if train != pa.Step {
		t.Errorf("%d training rows over %d steps: want a loss logged at every step", train, pa.Step)
	}
	worstW := 0.0
	for name, ta := range a.Tensors {
		if !strings.HasPrefix(name, training.PrefixModel) {
			continue
		}
		wa, _ := ta.Data.([]float32)
		wb, _ := b.Tensors[name].Data.([]float32)
		if len(wa) == 0 || len(wa) != len(wb) {
			t.Fatalf("%s: %d values with one process, %d with 2 ranks", name, len(wa), len(wb))
		}
		for i := range wa {
			worstW = max(worstW, math.Abs(float64(wa[i]-wb[i])))
		}
	}
	t.Logf("%d steps: losses within %.2g (relative), weights within %.2g", pa.Step, worstLoss, worstW)
	if !(worstW <= distWeightTol) {
		t.Errorf("final weights differ by %.3g between one process and 2 ranks, want <= %g", worstW, distWeightTol)
	}
}

// checkTrafficLine checks the run's end line against the bytes that the
// checkpoint's weights imply: r x r float32 numbers per Stiefel weight
// (those ||W^T W - I||_F is printed for), the whole gradient of the others,
// one flag a rank.
func checkTrafficLine(t *testing.T, out string, f *checkpoint.File, ranks int) {
	t.Helper()
	m := regexp.MustCompile(`data-parallel: (\d+) ranks, each step all-reduced (\d+) bytes \(constrained (\d+), plain (\d+), flags (\d+)\) against (\d+) for a full-gradient all-reduce \(([0-9.]+)x less\); ([0-9.]+) samples/s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no data-parallel line in:\n%s", out)
	}
	var flags map[string]string
	if err := f.JSON(training.KeySettings, &flags); err != nil {
		t.Fatal(err)
	}
	r, _ := strconv.Atoi(flags["r"])
	constrained := map[string]bool{}
	for _, c := range regexp.MustCompile(`\|\|W\^T W - I\|\|_F of (\S+):`).FindAllStringSubmatch(out, -1) {
		constrained[training.PrefixModel+c[1]] = true
	}
	var wantC, wantP, full int64
	for name, ten := range f.Tensors {
		if !strings.HasPrefix(name, training.PrefixModel) {
			continue
		}
		n := int64(len(testval.Floats(ten.Data))) * 4
		full += n
		if constrained[name] {
			wantC += int64(r * r * 4)
		} else {
			wantP += n
		}
	}
	want := []int64{int64(ranks), wantC + wantP + 4*int64(ranks), wantC, wantP, 4 * int64(ranks), full}
	for i, w := range want {
		if got, _ := strconv.ParseInt(m[i+1], 10, 64); got != w {
			t.Errorf("%q: field %d is %d, want %d (%d constrained weights, r = %d)", m[0], i+1, got, w, len(constrained), r)
		}
	}
	if len(constrained) == 0 || wantC >= full {
		t.Errorf("%d constrained weights, %d bytes of %d: the line's figures test nothing", len(constrained), wantC, full)
	}
	if rate, _ := strconv.ParseFloat(m[8], 64); !(rate > 0) {
		t.Errorf("%q: samples/s %v", m[0], rate)
	}
}

// TestMPIFlippedWeightCaught flips the lowest bit of one weight on rank 1
// after 3 steps: the checksum before the checkpoint of step 5 must stop
// the run, naming rank 1, with no checkpoint written after the flip.
func TestMPIFlippedWeightCaught(t *testing.T) {
	mnist, _ := distSets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := t.TempDir()
	text, code := runCmd(t, mpirunTrain(t, ctx, 2, []string{faultEnv + "=flip:1:3"}, append(ffnArgs(mnist), "-dist", "mpi", "-eval-every", "-1", "-save-every", "5", "-out", out)...))
	if code == 0 {
		t.Fatalf("mpirun exited 0 though rank 1's weights were flipped:\n%s", text)
	}
	if want := "before the checkpoint of step 5: optim: after 5 steps the weights of rank 1 differ from rank 0's"; !strings.Contains(text, want) {
		t.Errorf("no %q in the output:\n%s", want, text)
	}
	if ckpts, _ := filepath.Glob(filepath.Join(out, "run-*", "step-*.safetensors")); len(ckpts) != 0 {
		t.Errorf("checkpoints written after the flip: %v", ckpts)
	}
}

// TestMPINonFiniteSkipped puts a NaN into rank 1's rows of the batch of
// step 4: with -nonfinite skip both ranks must skip that batch together
// and train on to the end, the skip recorded once.
func TestMPINonFiniteSkipped(t *testing.T) {
	mnist, _ := distSets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := t.TempDir()
	text, code := runCmd(t, mpirunTrain(t, ctx, 2, []string{faultEnv + "=nan:1:3"}, append(ffnArgs(mnist), "-dist", "mpi", "-nonfinite", "skip", "-out", out)...))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, text)
	}
	if want := "epoch 1, step 4: the training loss is NaN; skipping the batch"; !strings.Contains(text, want) {
		t.Errorf("no %q in the output:\n%s", want, text)
	}
	_, st := finalState(t, out)
	if st.Step != 20 || st.Skipped != 1 {
		t.Errorf("the run ended at step %d with %d batches skipped, want 20 and 1", st.Step, st.Skipped)
	}
}

// TestMPIRankKilled kills rank 1 in step 11 of a 2-rank run that saves
// every 4 steps: mpirun must end non-zero, naming the killed rank, and the
// newest checkpoint (step 8) must load. Resumed from it on 2 ranks, the run
// ends bit for bit as a 2-rank run never killed; resumed with one process
// (-dist single), it goes on to the end and agrees with it to rounding.
func TestMPIRankKilled(t *testing.T) {
	mnist, _ := distSets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(ffnArgs(mnist), "-dist", "mpi", "-eval-every", "-1", "-save-every", "4")
	var kept string // the checkpoint of step 8, copied
	straight := straightThenResumed(t, func(out string) {
		if text, code := runCmd(t, mpirunTrain(t, ctx, 2, nil, append(args, "-out", out)...)); code != 0 {
			t.Fatalf("straight run: exit %d\n%s", code, text)
		}
	}, piece{"2 ranks killed and resumed on 2 ranks against 2 ranks straight", func(out string) {
		kept = killRank1(t, ctx, args, out)
	}})

	single := t.TempDir()
	if text, code := runCmd(t, trainCmd(ctx, "-dist", "single", "-resume", kept, "-out", single)); code != 0 {
		t.Fatalf("resuming with one process: exit %d\n%s", code, text)
	}
	fa, pa := finalState(t, straight)
	fc, pc := finalState(t, single)
	if pc.Step != 20 || pc.Epoch != 1 {
		t.Errorf("resumed run ended at epoch %d, step %d, want 1, 20", pc.Epoch, pc.Step)
	}
	compareRuns(t, fa, fc, pa, pc)
}

// killRank1 runs args on 2 ranks into out, killing rank 1 in step 11: the
// run must end non-zero, naming the killed rank, and its newest checkpoint
// (step 8) must load; it resumes the run from there on 2 ranks, and
// returns a copy of that checkpoint (the resumed run prunes it).
func killRank1(t *testing.T, ctx context.Context, args []string, out string) string {
	t.Helper()
	text, code := runCmd(t, mpirunTrain(t, ctx, 2, []string{faultEnv + "=kill:1:10"}, append(args, "-out", out)...))
	if code == 0 {
		t.Fatalf("mpirun exited 0 though rank 1 was killed:\n%s", text)
	}
	if !regexp.MustCompile(`(?s)rank 1 .*(signal 9|Killed)`).MatchString(text) {
		t.Errorf("the output does not name rank 1 and its signal:\n%s", text)
	}
	path, err := training.ResolveResume("latest", out)
	if err != nil {
		t.Fatal(err)
	}
	if step, _ := checkpoint.ParseStepName(filepath.Base(path)); step != 8 {
		t.Errorf("newest checkpoint %s, want step 8", path)
	}
	if _, err := checkpoint.Read(path); err != nil {
		t.Fatalf("the last checkpoint does not load: %v", err)
	}
	kept := filepath.Join(t.TempDir(), "step-8.safetensors")
	if b, err := os.ReadFile(path); err != nil || os.WriteFile(kept, b, 0o644) != nil {
		t.Fatalf("copying %s: %v", path, err)
	}
	if text, code = runCmd(t, mpirunTrain(t, ctx, 2, nil, "-resume", path)); code != 0 {
		t.Fatalf("resuming on 2 ranks: exit %d\n%s", code, text)
	}
	return kept
}

// TestDistRefusals runs settings that data-parallel training cannot take:
// each must exit 2 with its reason before it writes anything.
func TestDistRefusals(t *testing.T) {
	mnist, cifar := distSets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		ranks int // 0: one process without mpirun
		args  []string
		want  string
	}{
		{"tape-dropout", 2, append(vitArgs(cifar), "-dist", "mpi", "-engine", "tape", "-dropout", "0.1"), "-engine tape draws the ViT's dropout masks from one stream"},
		{"batch", 2, []string{"-dist", "mpi", "-batch", "9"}, "-batch 9 is not divisible by the 2 ranks"},
		{"single-under-mpirun", 2, []string{"-dist", "single"}, "use -dist mpi"},
		{"clip", 0, []string{"-dist", "mpi", "-clip-norm", "1"}, "gradient clipping by the global norm: optim: not supported in data-parallel training yet"},
		{"orth", 0, []string{"-dist", "mpi", "-sampling", "orth"}, "not supported in data-parallel training yet"},
		{"cuda", 0, []string{"-dist", "mpi", "-device", "cuda"}, "-dist mpi trains on the CPU only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"-out", out}, tc.args...)
			if !slices.Contains(tc.args, "-model") {
				args = append(ffnArgs(mnist), args...)
			}
			var cmd *exec.Cmd
			if tc.ranks > 0 {
				cmd = mpirunTrain(t, ctx, tc.ranks, nil, args...)
			} else {
				cmd = trainCmd(ctx, args...)
			}
			text, code := runCmd(t, cmd)
			if code != 2 {
				t.Errorf("exit %d, want 2:\n%s", code, text)
			}
			if !strings.Contains(text, tc.want) {
				t.Errorf("no %q in the output:\n%s", tc.want, text)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("-out %s: %v, want nothing written", out, err)
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
