//go:build cgo

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/optim"
)

// TestSelectDevice checks what each -device setting picks, and the line
// that says so: on this machine's own libraries (no NVIDIA driver here; a
// machine with a GPU skips those cases) and on the host model of the device.
func TestSelectDevice(t *testing.T) {
	_, probeErr := cudabackend.Probe()
	cases := []struct {
		name, device, engine string
		standIn, needNoGPU   bool
		want, log, err       string
	}{
		{"cpu", "cpu", "program", false, false, "cpu", "", ""},
		{"auto without a driver", "auto", "program", false, true, "cpu", "train: device cpu (no usable GPU: the NVIDIA driver (libcuda.so.1) is not installed", ""},
		{"cuda without a driver", "cuda", "program", false, true, "", "", "-device cuda: the NVIDIA driver (libcuda.so.1) is not installed"},
		{"auto on the host model", "auto", "program", true, false, "cuda", "train: device cuda on the host model of the device (ORTHONET_CUDA_STANDIN=1), not a GPU", ""},
		{"cuda on the host model", "cuda", "program", true, false, "cuda", "train: device cuda on the host model", ""},
		{"auto with the tape engine", "auto", "tape", true, false, "cpu", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needNoGPU && probeErr == nil {
				t.Skip("this machine has a GPU")
			}
			if tc.standIn {
				t.Setenv(cudabackend.StandInEnv, "1")
			}
			c := config{device: tc.device, engine: tc.engine}
			var log bytes.Buffer
			err := selectDevice(&c, &log)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line starting %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.device != tc.want {
				t.Errorf("device %q, want %q", c.device, tc.want)
			}
			if !strings.HasPrefix(log.String(), tc.log) || strings.Count(log.String(), "\n") > 1 || (tc.log == "") != (log.Len() == 0) {
				t.Errorf("said %q, want one line starting %q", log.String(), tc.log)
			}
		})
	}
}

// TestHostModelTrains trains the FFN (-hidden 64 -r 16 -limit-train 640) on
// the CUDA backend over the host model of the device and on the CPU: the
// test accuracies agree within a point, the weights stay on the manifold,
// and the device run's checkpoint goes on for an epoch on the CPU. On
// Fashion-MNIST where it is installed, else on a generated set.
func TestHostModelTrains(t *testing.T) {
	dir := data.FashionMNISTDir
	if _, err := os.Stat(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz")); err != nil {
		dir = mnistDir(t, 640, 500)
	}
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	accuracy := map[string]float64{}
	outs := map[string]string{}
	for _, device := range []string{"cuda", "cpu"} {
		c, err := parseFlags([]string{"-data", dir, "-out", t.TempDir(), "-hidden", "64", "-r", "16", "-limit-train", "640", "-device", device}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := selectDevice(&c, io.Discard); err != nil || c.device != device {
			t.Fatalf("device %s: %v (got %s)", device, err, c.device)
		}
		out, acc := runForAccuracy(t, c, hooks{})
		accuracy[device], outs[device] = acc, c.out
		for _, f := range regexp.MustCompile(`\|\|W\^T W - I\|\|_F of fc\d.W: ([0-9.e+-]+)`).FindAllStringSubmatch(out, -1) {
			if v, _ := strconv.ParseFloat(f[1], 64); !(v < 1e-4) {
				t.Errorf("device %s: feasibility %s", device, f[0])
			}
		}
	}
	t.Logf("test accuracy: host model %.2f%%, CPU %.2f%%", accuracy["cuda"], accuracy["cpu"])
	if d := accuracy["cuda"] - accuracy["cpu"]; d > 1 || d < -1 {
		t.Errorf("test accuracy on the host model %.2f%%, on the CPU %.2f%%: more than a point apart", accuracy["cuda"], accuracy["cpu"])
	}
	c, err := parseFlags([]string{"-resume", "latest", "-out", outs["cuda"], "-device", "cpu", "-epochs", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := selectDevice(&c, io.Discard); err != nil || c.device != "cpu" {
		t.Fatalf("resume on the CPU: %v (device %s)", err, c.device)
	}
	out, acc := runForAccuracy(t, c, hooks{})
	if !strings.Contains(out, "resuming from") || !(acc > 10) {
		t.Errorf("the device run's checkpoint resumed on the CPU to %.2f%%:\n%s", acc, out)
	}
}

// TestCNNOnHostModel trains the orthogonal CNN on a generated CIFAR-10 set
// on the CUDA backend over the host model of the device and on the CPU: the
// kernels and every other parameter agree to 1e-4 relative after the run
// (float32, the products summed in other orders), and so do the test
// accuracies.
func TestCNNOnHostModel(t *testing.T) {
	dir := cifarDir(t, 8, 20)
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	final := map[string]*checkpoint.File{}
	accuracy := map[string]float64{}
	for _, device := range []string{"cuda", "cpu"} {
		c, err := parseFlags([]string{"-model", "cnn", "-dataset", "cifar10", "-data", dir, "-out", t.TempDir(), "-channels", "4", "-depth", "2",
			"-r", "8", "-lr", "0.2", "-lr-other", "0.02", "-batch", "10", "-epochs", "1", "-device", device}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := selectDevice(&c, io.Discard); err != nil || c.device != device {
			t.Fatalf("device %s: %v (got %s)", device, err, c.device)
		}
		_, accuracy[device] = runForAccuracy(t, c, hooks{})
		final[device], _ = finalState(t, c.out)
	}
	worst, worstName := 0.0, ""
	for name, want := range final["cpu"].Tensors {
		if !strings.HasPrefix(name, "model.") {
			continue
		}
		got, ok := final["cuda"].Tensors[name]
		if !ok {
			t.Fatalf("the device run has no tensor %s", name)
		}
		a, b := got.Data.([]float32), want.Data.([]float32)
		var d, s float64
		for i := range b {
			d = max(d, math.Abs(float64(a[i]-b[i])))
			s = max(s, math.Abs(float64(b[i])))
		}
		if r := d / max(s, 1e-30); r > worst {
			worst, worstName = r, name
		}
	}
	t.Logf("after an epoch the device's parameters are within %.2g of the CPU's (%s); test accuracy %.2f%% and %.2f%%", worst, worstName, accuracy["cuda"], accuracy["cpu"])
	if !(worst <= 1e-4) {
		t.Errorf("parameter %s is %.3g from the CPU's, relative; want <= 1e-4", worstName, worst)
	}
	if accuracy["cuda"] != accuracy["cpu"] {
		t.Errorf("test accuracy %.2f%% on the host model, %.2f%% on the CPU", accuracy["cuda"], accuracy["cpu"])
	}
}

// TestStandInValueRefused checks that a value of ORTHONET_CUDA_STANDIN
// other than 0 or 1 stops -device cuda and -device auto alike with a
// setting error (exit 2) naming the variable and the value, where auto
// used to train on the CPU without a word about it.
func TestStandInValueRefused(t *testing.T) {
	for _, device := range []string{"cuda", "auto"} {
		t.Run(device, func(t *testing.T) {
			t.Setenv(cudabackend.StandInEnv, "yes")
			c := config{device: device, engine: "program"}
			var log bytes.Buffer
			err := selectDevice(&c, &log)
			want := `-device ` + device + `: ORTHONET_CUDA_STANDIN="yes"`
			if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != 2 {
				t.Fatalf("error %v (exit %d), want exit 2 with %q; said %q", err, exitCode(err), want, log.String())
			}
		})
	}
}

// TestEvalOnHostModel evaluates a run's checkpoint with -device cuda on the
// host model of the device: the CUDA backend's evaluation gives the run's
// test accuracy, give or take an image near a tie.
func TestEvalOnHostModel(t *testing.T) {
	_, out, want := tinyRun(t, "ffn")
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	checkEval(t, out, want, "-device", "cuda")
}

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
	for _, tc := range append([]autoCase{
		{"orth", []string{"-r", "8", "-sampling", "orth"}, "RSDM with orth sampling does not run on a device"},
		{"clip", []string{"-r", "8", "-clip-norm", "1"}, "gradient clipping (ClipNorm 1) reads every gradient on the host"},
	}, refusedRuleCases()...) {
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

// autoCase is a setting of TestAutoDeviceTakesCPU: its name, its flags and
// what the device's refusal says.
type autoCase struct {
	name string
	args []string
	want string // in the refusal
}

// refusedRuleCases returns a case of TestAutoDeviceTakesCPU for each rule
// of optim.Rules that the device refuses, those that are not
// optim.Described (optim/device steps the Described rules from their
// descriptions, and its table of rules of their own is empty): the rule
// by -optim (a constrained rule) or -other, with a step size of 0.01.
func refusedRuleCases() []autoCase {
	var cases []autoCase
	for _, r := range optim.Rules {
		if _, ok := r.(optim.Described); ok {
			continue
		}
		args := []string{"-other", r.String(), "-lr-other", "0.01"}
		if r.Constrained() {
			args = []string{"-optim", r.String(), "-lr", "0.01"}
		}
		cases = append(cases, autoCase{r.String(), args, "the " + r.String() + " rule does not run on a device"})
	}
	return cases
}

// TestEveryRuleTrains trains the small FFN of TestTrainLearns with each
// constrained rule of optim.Rules (-optim NAME, with -r 8 where the rule
// takes it), on the CPU for three epochs and on the host model of the device
// for one: each learns the generated set (80% or more, 50% after the one
// epoch; chance is 10%) and keeps its weights on the manifold, and a rule the device refuses is
// refused there with optim.ErrNotOnDevice, naming it. A rule added to the
// table is run here with no edit (docs/extending/rule.md). -short skips the
// host model.
func TestEveryRuleTrains(t *testing.T) {
	dir := mnistDir(t, 400, 200)
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, name := range optim.RuleNames(true) {
		for _, d := range []struct{ device, epochs string }{{"cpu", "3"}, {"cuda", "1"}} {
			device, epochs, least := d.device, d.epochs, map[string]float64{"cpu": 80, "cuda": 50}[d.device]
			t.Run(name+"/"+device, func(t *testing.T) {
				if device == "cuda" && testing.Short() {
					t.Skip("the host model of the device is slow: not with -short")
				}
				args := []string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-hidden", "32", "-depth", "2",
					"-optim", name, "-batch", "10", "-epochs", epochs, "-device", device}
				if r, err := optim.ParseRuleFlags(name, nil); err != nil {
					t.Fatal(err)
				} else if slices.ContainsFunc(optim.SettingsOf(r), func(s optim.Setting) bool { return s.Name == "r" }) {
					args = append(args, "-r", "8")
				}
				c, err := parseFlags(args, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				if err := selectDevice(&c, io.Discard); err != nil || c.device != device {
					t.Fatalf("-device %s: %v (got %s)", device, err, c.device)
				}
				var out bytes.Buffer
				err = run(context.Background(), c, &out, hooks{})
				if device == "cuda" && errors.Is(err, optim.ErrNotOnDevice) {
					if !strings.Contains(err.Error(), name) {
						t.Errorf("the device's refusal does not name %s: %v", name, err)
					}
					t.Logf("refused on the device: %v", err)
					return
				}
				if err != nil {
					t.Fatalf("%v\n%s", err, out.String())
				}
				m := regexp.MustCompile(`test accuracy: ([0-9.]+)%`).FindStringSubmatch(out.String())
				if m == nil {
					t.Fatalf("no accuracy line in:\n%s", out.String())
				}
				if acc, _ := strconv.ParseFloat(m[1], 64); acc < least {
					t.Errorf("test accuracy %.2f%% on a learnable set, want >= %g%%", acc, least)
				}
				if feasible(t, out.String(), `fc\d.W`, 1e-4) == 0 {
					t.Errorf("no feasibility line in:\n%s", out.String())
				}
			})
		}
	}
}
