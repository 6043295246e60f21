package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/datatest"
)

// TestTapeOnCUDARefused runs the command with -engine tape -device cuda:
// it must exit 2 with the reason before it reads or writes anything.
func TestTapeOnCUDARefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	_, stderr, code := trainExit(t, "-engine", "tape", "-device", "cuda", "-dataset", "mnist", "-data", t.TempDir(), "-out", out)
	if code != 2 {
		t.Fatalf("exit %d, want status 2\n%s", code, stderr)
	}
	want := "train: the tape engine runs on the CPU only; -device cuda needs -engine program\n"
	if stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("-out %s: %v, want nothing written", out, err)
	}
}

// mnistDir returns a new folder with fixture's training split of train
// images and its test split of test images.
func mnistDir(t *testing.T, train, test int) string {
	t.Helper()
	dir := t.TempDir()
	fixture(t, train, "train", dir, 1)
	fixture(t, test, "t10k", dir, 2)
	return dir
}

// fixture writes a learnable MNIST-format data set: an image of class k is
// dark with a bright band at rows 2k to 2k+4, plus noise.
func fixture(t *testing.T, n int, prefix, dir string, seed byte) {
	t.Helper()
	var im, lb bytes.Buffer
	im.Write(datatest.IDXHeader(n, 28, 28))
	lb.Write(datatest.IDXHeader(n))
	state := uint32(seed) + 1
	for i := 0; i < n; i++ {
		k := i % 10
		lb.WriteByte(byte(k))
		bandImage(&im, &state, 28, 27, 2*k, 5, 200) // noise 0..31
	}
	for name, b := range map[string][]byte{prefix + "-images-idx3-ubyte": im.Bytes(), prefix + "-labels-idx1-ubyte": lb.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// bandImage appends a side x side image to b: each pixel is noise, the
// bits of the linear congruential generator's next state from shift up,
// plus bright on the rows from top to top+rows-1.
func bandImage(b *bytes.Buffer, state *uint32, side int, shift uint, top, rows int, bright byte) {
	for r := 0; r < side; r++ {
		for c := 0; c < side; c++ {
			*state = *state*1664525 + 1013904223
			v := byte(*state >> shift)
			if r >= top && r < top+rows {
				v += bright
			}
			b.WriteByte(v)
		}
	}
}

// runForAccuracy runs c with the hooks h and returns its output and the
// test accuracy it printed, in percent.
func runForAccuracy(t *testing.T, c config, h hooks) (string, float64) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), c, &out, h); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m := regexp.MustCompile(`test accuracy: ([0-9.]+)%`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no accuracy line in:\n%s", out.String())
	}
	acc, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), acc
}

// feasible checks the lines of a run's output out that give ||W^T W - I||_F
// of a weight whose name matches the regular expression weights: each must
// be under tol. It returns how many there are.
func feasible(t *testing.T, out, weights string, tol float64) int {
	t.Helper()
	lines := regexp.MustCompile(`\|\|W\^T W - I\|\|_F of (`+weights+`): ([0-9.e+-]+)`).FindAllStringSubmatch(out, -1)
	for _, f := range lines {
		if v, _ := strconv.ParseFloat(f[2], 64); !(v < tol) {
			t.Errorf("%s: ||W^T W - I||_F = %s, want under %g", f[1], f[2], tol)
		}
	}
	return len(lines)
}

func smallConfig(t *testing.T, dir string) config {
	c, err := parseFlags([]string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-hidden", "32", "-depth", "2",
		"-r", "8", "-lr", "0.2", "-lr-other", "0.05", "-batch", "10", "-epochs", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTrainLearns trains a small orthogonal FFN on a generated learnable set
// and checks the printed accuracy beats chance by far, the weights stay on
// the manifold, and the metrics files exist.
func TestTrainLearns(t *testing.T) {
	dir := mnistDir(t, 400, 200)
	c := smallConfig(t, dir)
	out, acc := runForAccuracy(t, c, hooks{})
	t.Logf("test accuracy on the generated set: %.2f%%", acc)
	if acc < 80 {
		t.Errorf("test accuracy %.2f%% on a learnable set, want >= 80%% (chance is 10%%)", acc)
	}
	feasible(t, out, `fc\d.W`, 1e-4)
	runs, _ := filepath.Glob(filepath.Join(c.out, "run-*", "metrics.*"))
	if len(runs) != 2 {
		t.Errorf("run folder holds %v, want metrics.csv and metrics.png", runs)
	}
}

// TestTrainStops checks the runs that stop with an error: a diverging one
// and one without data (a cancelled one: TestInterruptedBeforeFirstStep).
func TestTrainStops(t *testing.T) {
	dir := mnistDir(t, 100, 20)

	// An absurd step size drives the loss (training or test) to Inf or
	// NaN: the run stops, saying so.
	c := smallConfig(t, dir)
	c.lrOther = 1e30
	if err := run(context.Background(), c, io.Discard, hooks{}); err == nil || !strings.Contains(err.Error(), "stopping") || !strings.Contains(err.Error(), "try a smaller -lr") {
		t.Errorf("diverging run: error %v", err)
	}

	// Missing data names the folder and the way out.
	c = smallConfig(t, t.TempDir())
	if err := run(context.Background(), c, io.Discard, hooks{}); err == nil || !strings.Contains(err.Error(), "-download") {
		t.Errorf("missing data: error %v", err)
	}
}

// cifarDir returns a new folder with cifarFixture's five training batches
// of perBatch images each and its test batch of test images.
func cifarDir(t *testing.T, perBatch, test int) string {
	t.Helper()
	dir := t.TempDir()
	for i := 1; i <= 5; i++ {
		cifarFixture(t, dir, "data_batch_"+strconv.Itoa(i)+".bin", perBatch, uint32(i))
	}
	cifarFixture(t, dir, "test_batch.bin", test, 99)
	return dir
}

// cifarFixture writes learnable CIFAR-10 batches: an image of class k has a
// bright band at rows 3k to 3k+2 in every channel, plus noise.
func cifarFixture(t *testing.T, dir, name string, n int, seed uint32) {
	t.Helper()
	var b bytes.Buffer
	state := seed + 1
	for i := 0; i < n; i++ {
		k := i % 10
		b.WriteByte(byte(k))
		for ch := 0; ch < 3; ch++ {
			bandImage(&b, &state, 32, 26, 3*k, 3, 150) // noise 0..63
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSmallModelsLearn trains a small orthogonal CNN (4 and 8 channels) on
// a generated CIFAR-format set, its kernels stepped by RSDM-P, and a small
// orthogonal RNN (hidden 32) reading the generated MNIST-format images row
// by row, its recurrent weight stepped by RSDM-P: r takes the model's
// default, the test accuracy must clearly beat chance (10%) and the
// constrained weights stay on the manifold (the RNN's on O(32) to 1e-5).
func TestSmallModelsLearn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    func(t *testing.T) string
		args    []string
		r       int
		why     string // of r's default
		weights string // the constrained weights' names, a regular expression
		tol     float64
		last    string // the name of a constrained weight
	}{
		{"cnn", func(t *testing.T) string { return cifarDir(t, 40, 100) },
			[]string{"-model", "cnn", "-dataset", "cifar10", "-channels", "4", "-depth", "2", "-lr", "0.2", "-other", "adam", "-lr-other", "0.003", "-batch", "20", "-epochs", "3"},
			27, "the 4 x 27 first kernel's larger side", `conv\d.W`, 1e-4, "conv2.W"},
		{"rnn", func(t *testing.T) string { return mnistDir(t, 400, 100) },
			[]string{"-model", "rnn", "-dataset", "mnist", "-hidden", "32", "-lr", "0.2", "-other", "adam", "-lr-other", "0.01", "-batch", "10", "-epochs", "5"},
			32, "the recurrent weight's side", `recurrent.W`, 1e-5, "recurrent.W"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parsed(t, append(tc.args, "-data", tc.data(t), "-out", t.TempDir())...)
			if c.r != tc.r {
				t.Errorf("-r by default %d, want %d (%s)", c.r, tc.r, tc.why)
			}
			out, acc := runForAccuracy(t, c, hooks{})
			t.Logf("%s test accuracy on the generated set: %.2f%%", tc.name, acc)
			if acc < 50 {
				t.Errorf("%s test accuracy %.2f%%, want >= 50%% (chance is 10%%)", tc.name, acc)
			}
			if feasible(t, out, tc.weights, tc.tol) == 0 || !strings.Contains(out, "of "+tc.last+":") {
				t.Errorf("no feasibility line for %s:\n%s", tc.last, out)
			}
		})
	}
}

// TestViTLearns trains a small orthogonal ViT (embedding 128, depth 2) on a
// generated CIFAR-format set: the training loss must fall and the test
// accuracy must clearly beat chance (10%).
func TestViTLearns(t *testing.T) {
	dir := cifarDir(t, 100, 100)
	c, err := parseFlags([]string{"-model", "vit", "-dataset", "cifar10", "-data", dir, "-out", t.TempDir(),
		"-dim", "128", "-depth", "2", "-heads", "4", "-mlp", "64", "-patch", "8", "-r", "32", "-lr", "0.1",
		"-other", "adam", "-lr-other", "0.002", "-batch", "20", "-epochs", "2", "-dropout", "0.1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, acc := runForAccuracy(t, c, hooks{})
	t.Logf("ViT test accuracy on the generated set: %.2f%%", acc)
	if acc < 50 {
		t.Errorf("ViT test accuracy %.2f%%, want >= 50%% (chance is 10%%)", acc)
	}
	runs, _ := filepath.Glob(filepath.Join(c.out, "run-*", "metrics.csv"))
	if len(runs) != 1 {
		t.Fatalf("metrics: %v", runs)
	}
	rows, _ := os.ReadFile(runs[0])
	var first, last float64
	for _, line := range strings.Split(string(rows), "\n") {
		f := strings.Split(line, ",")
		if len(f) == 10 && f[0] == "train" {
			v, _ := strconv.ParseFloat(f[4], 64)
			if first == 0 {
				first = v
			}
			last = v
		}
	}
	t.Logf("training loss %.3f -> %.3f", first, last)
	if !(last < first/2) {
		t.Errorf("training loss went from %.3f to %.3f, want it at least halved", first, last)
	}
}
