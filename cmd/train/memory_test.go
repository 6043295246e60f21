package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/datatest"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/training"
)

// Tests of issue 40's sizes: a flag or a checkpoint's flag that sets a
// network larger than the memory is refused with exit 2 and one line
// naming the flags, quickly and without allocating, never a runtime abort
// ("fatal error: out of memory", which also exits 2).

// memoryRun runs cmd/train with args as a process of its own, its address
// space limited to limitKB by bash's ulimit -v where above 0, and returns
// its standard error, exit code, time and peak resident memory.
func memoryRun(t *testing.T, limitKB int, args ...string) (stderr string, code int, took time.Duration, rssKB int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := trainCmd(ctx, args...)
	if limitKB > 0 {
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("no bash to limit the address space with ulimit -v")
		}
		cmd = exec.CommandContext(ctx, bash, append([]string{"-c", `ulimit -v "$0" && exec "$@"`, strconv.Itoa(limitKB), os.Args[0]}, args...)...)
		cmd.Env = append(os.Environ(), "ORTHONET_TRAIN_MAIN=1")
	}
	var e bytes.Buffer
	cmd.Stderr = &e
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("train %q did not end in 120 s\n%s", args, e.String())
	}
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("train %q: %v", args, err)
	}
	if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rssKB = u.Maxrss
	}
	return e.String(), code, took, rssKB
}

// TestMemoryRefusals gives every model family sizes far beyond the
// memory, on an empty data folder: each run must exit 2 before it reads
// the data, with one line naming the model's flags, the flag to lower and
// the budget, in well under a second and without allocating (its peak
// resident memory that of a process that has built nothing).
func TestMemoryRefusals(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"vit", []string{"-model", "vit", "-dim", "100000"}, []string{"-model vit -dim 100000 -depth 6", "lower -dim", "available ("}},
		{"rnn", []string{"-model", "rnn", "-hidden", "300000"}, []string{"-model rnn -hidden 300000", "lower -hidden", "available ("}},
		{"cnn", []string{"-model", "cnn", "-channels", "5000", "-max-memory", "6G"},
			[]string{"-model cnn -channels 5000 -depth 2", "-channels", "more than -max-memory 6.0 GB", "raise -max-memory"}},
		{"ffn", []string{"-model", "ffn", "-depth", "1000000"}, []string{"-model ffn -hidden 1024 -depth 1000000", "lower -hidden or -depth", "available ("}},
		{"batch", []string{"-model", "vit", "-batch", "100000", "-max-memory", "8Gi"}, []string{"-batch 100000", "lower -batch", "more than -max-memory 8.6 GB"}},
		{"overflow", []string{"-model", "rnn", "-hidden", "4611686018427387904"}, []string{"-model rnn -hidden 4611686018427387904", "overflow"}},
		{"cnn-shift", []string{"-model", "cnn", "-channels", "4611686018427387904"}, []string{"at most 65536"}},
		{"max-memory-unit", []string{"-max-memory", "4X"}, []string{"-max-memory: size \"4X\""}},
		{"max-memory-zero", []string{"-max-memory", "0"}, []string{"-max-memory: size \"0\": want at least 1 byte"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"-dataset", "mnist", "-data", empty, "-out", out, "-device", "cpu"}, tc.args...)
			stderr, code, took, rss := memoryRun(t, 0, args...)
			t.Logf("%v: exit %d in %v, peak %d MB: %s", tc.args, code, took.Round(time.Millisecond), rss>>10, strings.TrimSpace(stderr))
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			oneLine(t, tc.name, stderr, tc.want...)
			if strings.Contains(stderr, "no such file") || strings.Contains(stderr, "fatal error") {
				t.Errorf("stderr %q: the data were read, or the runtime aborted", stderr)
			}
			if took > 5*time.Second || rss > 256<<10 {
				t.Errorf("refused after %v with a peak of %d MB: want well under a second and nothing allocated", took, rss>>10)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("-out %s was made", out)
			}
		})
	}
}

// TestMemoryUnderUlimit runs the three settings that died with "fatal
// error: out of memory" under ulimit -v 6000000 (6 GB of address space):
// each must now exit 2 naming RLIMIT_AS and the flag.
func TestMemoryUnderUlimit(t *testing.T) {
	dir := mnistDir(t, 64, 32)
	for _, size := range [][]string{{"-model", "vit", "-dim", "100000"}, {"-model", "rnn", "-hidden", "300000"}, {"-model", "cnn", "-channels", "5000"}} {
		args := append([]string{"-dataset", "mnist", "-data", dir, "-limit-train", "64", "-limit-test", "32", "-epochs", "1",
			"-out", t.TempDir(), "-device", "cpu"}, size...)
		stderr, code, took, _ := memoryRun(t, 6000000, args...)
		t.Logf("%v: exit %d in %v: %s", size, code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", size, code)
		}
		oneLine(t, strings.Join(size, " "), stderr, size[3], "available (RLIMIT_AS)", "or set -max-memory")
	}
}

// TestMemoryCheckpointFlags gives a checkpoint of a small FFN the flags
// of a huge one (a hostile checkpoint's): resuming it and every
// subcommand must exit 2 with one line naming the checkpoint's -depth,
// before building the network; the checkpoint's own -max-memory, which
// train never saves, is not taken.
func TestMemoryCheckpointFlags(t *testing.T) {
	out, latest := tinyCheckpoint(t)
	elsewhere := t.TempDir()
	huge := hugeCheckpoint(t, latest, elsewhere)
	image := filepath.Join(elsewhere, "image.idx")
	if err := os.WriteFile(image, append(datatest.IDXHeader(1, 28, 28), make([]byte, 28*28)...), 0o644); err != nil {
		t.Fatal(err)
	}
	its := huge + ": its -model ffn -hidden 32 -depth 100000000"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-resume", huge, "-out", out}, []string{"-resume " + its + " -batch 10", "; set -max-memory"}},
		{[]string{"eval", "-resume", huge, "-out", out}, []string{"train eval: " + its + ":", "; set -max-memory"}},
		{[]string{"predict", "-resume", huge, "-out", out, image}, []string{"train predict: " + its + ":", "; set -max-memory"}},
		{[]string{"export", "-resume", huge, "-out", out, "-o", filepath.Join(elsewhere, "m.onnx")}, []string{"train export: " + its + ":"}},
		{[]string{"eval", "-resume", huge, "-out", out, "-max-memory", "1T"}, []string{its + ":", "more than -max-memory 1.0 TB; raise -max-memory"}},
	} {
		stderr, code, took, rss := memoryRun(t, 0, tc.args...)
		t.Logf("%v: exit %d in %v: %s", tc.args[:min(len(tc.args), 3)], code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(stderr, "more than") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q does not say %q", tc.args, stderr, w)
			}
		}
		if took > 10*time.Second || rss > 256<<10 {
			t.Errorf("%v: refused after %v with a peak of %d MB", tc.args, took, rss>>10)
		}
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "m.onnx")); err == nil {
		t.Error("export wrote m.onnx")
	}
}

// hugeCheckpoint writes into dir a copy of the checkpoint at path whose
// saved flags say -depth 100000000 and -max-memory 8E, and returns its
// path.
func hugeCheckpoint(t *testing.T, path, dir string) string {
	t.Helper()
	huge := filepath.Join(dir, "huge.safetensors")
	withFlags(t, path, huge, func(flags map[string]string) {
		if _, saved := flags["max-memory"]; saved {
			t.Errorf("the checkpoint saved -max-memory %q", flags["max-memory"])
		}
		flags["depth"], flags["max-memory"] = "100000000", "8E"
	})
	return huge
}

// withFlags writes to dst a copy of the checkpoint at src whose saved
// flags (training.KeySettings) edit has changed.
func withFlags(t *testing.T, src, dst string, edit func(flags map[string]string)) {
	t.Helper()
	f, err := checkpoint.Read(src)
	if err != nil {
		t.Fatal(err)
	}
	var flags map[string]string
	if err := f.JSON(training.KeySettings, &flags); err != nil {
		t.Fatal(err)
	}
	edit(flags)
	if err := f.SetJSON(training.KeySettings, flags); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Write(dst, f); err != nil {
		t.Fatal(err)
	}
}

// TestNetSizerIsBuilt checks that the sizes memory.go counts are those of
// the networks buildNet builds: the parameters of every model family on
// every data set's shape, exactly.
func TestNetSizerIsBuilt(t *testing.T) {
	for _, args := range [][]string{
		{"-model", "ffn", "-hidden", "48", "-depth", "3"},
		{"-model", "ffn", "-dataset", "cifar10", "-hidden", "40", "-depth", "2"},
		{"-model", "vit", "-dim", "16", "-depth", "2", "-heads", "2", "-mlp", "8", "-patch", "8"},
		{"-model", "vit", "-dataset", "cifar10", "-dim", "12", "-depth", "1", "-heads", "3", "-mlp", "4", "-patch", "16"},
		{"-model", "cnn", "-channels", "4", "-depth", "3"},
		{"-model", "cnn", "-dataset", "cifar10", "-channels", "2", "-depth", "2"},
		{"-model", "rnn", "-hidden", "20"},
		{"-model", "rnn", "-dataset", "cifar10", "-hidden", "12"},
	} {
		c, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		set, err := knownShape(c)
		if err != nil {
			t.Fatal(err)
		}
		n, err := netSizer(c, set)
		if err != nil {
			t.Fatal(err)
		}
		count, err := n.ParamCount()
		if err != nil {
			t.Fatal(err)
		}
		net, err := buildNet(c, G.NewGraph(), 2, set, true, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		var built int64
		for _, p := range net.Params() {
			built += int64(reflect.ValueOf(p.Node.Value().Data()).Len())
		}
		if count != built {
			t.Errorf("%v: ParamCount %d, the built network's parameters hold %d", args, count, built)
		}
		f, err := trainFootprint(c, set, nil)
		if err != nil || f.params != 12*built || f.total() <= f.params {
			t.Errorf("%v: footprint %+v, %v: want parameters of 12 bytes each (three float32 copies) and more", args, f, err)
		}
	}
}

// TestRuleBuffersMatchState checks the state buffers that memory.go counts
// (ruleSlots) for every rule of optim.Rules, with the settings train
// gives it, against the buffers of the weight's size in its stepper's
// State after a step on a 320 x 3 weight (320 rows: RSDM's default r is
// 300): as many for a Described rule, whose description they are counted
// on, and no fewer for another, counted as Riemannian Adam.
func TestRuleBuffersMatchState(t *testing.T) {
	for _, r := range optim.Rules {
		t.Run(r.String(), func(t *testing.T) {
			flag, rule := "-other", func(c config) optim.Rule { return c.otherRule }
			if r.Constrained() {
				flag, rule = "-optim", func(c config) optim.Rule { return c.rule }
			}
			c, err := parseFlags([]string{flag, r.String()}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			state, err := ruleSlots(rule(c))
			if err != nil {
				t.Fatal(err)
			}
			kept := stateBuffersAfterStep(t, rule(c), 320, 3)
			t.Logf("%v: %d state buffers; its State holds %d", r, state, kept)
			_, described := r.(optim.Described)
			if state != kept && (described || state < kept) {
				t.Errorf("%v: memory.go counts %d state buffers of the weight's size, its stepper's State holds %d", r, state, kept)
			}
		})
	}
}

// stateBuffersAfterStep returns the buffers of n*p entries in the State
// of r's stepper of an n x p float32 weight (on the Stiefel manifold for a
// constrained rule) after one step.
func stateBuffersAfterStep(t *testing.T, r optim.Rule, n, p int) int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	x, g := make([]float32, n*p), make([]float32, n*p)
	for i := range x {
		x[i], g[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	w := optim.Param{Name: "w", Shape: []int{n, p}, Value: optim.Host[float32](x)}
	if r.Constrained() {
		w.Manifold = manifold.StiefelKind{}
		if err := w.Orthonormalize(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := r.Stepper(w, optim.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(optim.Host[float32](g), 0.01); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	var kept int64
	for _, b := range s.State().Buffers {
		if reflect.ValueOf(b).Len() == n*p {
			kept++
		}
	}
	return kept
}
