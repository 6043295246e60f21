package training

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// blobs returns n examples of d features in k classes, each class a
// Gaussian blob around its own centre: linearly separable for a wide
// margin.
func blobs(n, d, k int, seed uint64) *data.Set {
	rng := rand.New(rand.NewPCG(seed, 7))
	centres := make([]float32, k*d)
	for i := range centres {
		centres[i] = float32(rng.NormFloat64())
	}
	s := &data.Set{Name: "blobs", N: n, C: 1, H: 1, W: d, Classes: k, X: make([]float32, n*d), Y: make([]uint8, n)}
	for i := range n {
		c := i % k
		s.Y[i] = uint8(c)
		for j := range d {
			s.X[i*d+j] = centres[c*d+j] + 0.3*float32(rng.NormFloat64())
		}
	}
	return s
}

// classifier builds a two-layer classifier of d features and k classes
// for batches of b, its first weight on the Stiefel manifold.
func classifier(t testing.TB, b, d, hidden, k int) Model {
	t.Helper()
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(b, d), G.WithName("x"), G.WithInit(G.Zeroes()))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(b, k), G.WithName("y"), G.WithInit(G.Zeroes()))
	rng := rand.New(rand.NewPCG(1, 2))
	fc1, err1 := nn.NewOrthoLinear(g, "fc1", d, hidden, tensor.Float32, true, rng)
	fc2, err2 := nn.NewLinear(g, "fc2", hidden, k, tensor.Float32, true, rng)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	logits := G.Must(fc2.Forward(G.Must(fc1.ForwardAct(x, fused.ReLU))))
	loss := G.Must(nn.CrossEntropy(logits, y))
	params := append(fc1.Params(), fc2.Params()...)
	if _, err := G.Grad(loss, param.Nodes(params)...); err != nil {
		t.Fatal(err)
	}
	return Model{Loss: loss, Logits: logits, Input: x, Labels: y, Params: params}
}

// smallConfig trains the classifier on blobs with RSDM-P and Adam.
func smallConfig(out string, train, test *data.Set) Config {
	return Config{Train: train, Test: test, Batch: 8, Epochs: 3, Seed: 3, Out: out, Device: "cpu", EvalEvery: 5, SaveEvery: 7,
		Groups: []optim.Group{
			{Select: optim.Param.Constrained, LR: 0.2, Rule: optim.RSDMConfig{SubmanifoldSize: 6, Seed: 1}},
			{Rule: optim.AdamConfig{}, LR: 0.01},
		}}
}

// fit builds a Trainer of m as c says, closed when t ends, and fits it; it
// returns the Trainer and the final evaluation.
func fit(t *testing.T, m Model, c Config) (*Trainer, Eval) {
	t.Helper()
	tr, err := New(m, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	final, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tr, final
}

func TestFitLearns(t *testing.T) {
	train, test := blobs(160, 12, 4, 1), blobs(40, 12, 4, 1)
	tr, final := fit(t, classifier(t, 8, 12, 16, 4), smallConfig(t.TempDir(), train, test))
	if final.Accuracy < 0.9 {
		t.Errorf("test accuracy %.3f after 3 epochs on separable blobs, want >= 0.9", final.Accuracy)
	}
	if !(final.Feasibility < 1e-5) {
		t.Errorf("max ||W^T W - I||_F = %g, want < 1e-5", final.Feasibility)
	}
	// The first evaluation is at chance level or so; the last well above.
	rows := tr.Progress().Metrics
	var tests []Row
	for _, r := range rows {
		if r.Kind == "test" {
			tests = append(tests, r)
		}
	}
	if len(tests) < 4 || tests[0].Accuracy >= tests[len(tests)-1].Accuracy {
		t.Errorf("test rows %+v: want several, accuracy rising", tests)
	}
	csv, err := os.ReadFile(filepath.Join(tr.RunDir(), "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(csv), "\ntest,"); n != len(tests) {
		t.Errorf("metrics.csv has %d test rows, the run %d", n, len(tests))
	}
	if _, _, ok := mustRun(t, tr.RunDir()).Best(); !ok {
		t.Error("no best.safetensors")
	}
	ev, err := tr.Evaluate(context.Background(), test)
	if err != nil || ev.Accuracy != final.Accuracy {
		t.Errorf("Evaluate = %.4f, %v; Fit's final %.4f", ev.Accuracy, err, final.Accuracy)
	}
	logits, err := tr.Predict(test.X[:5*12])
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := nn.Accuracy(logits, []int{0, 1, 2, 3, 0}, 4)
	if len(logits) != 5*4 || acc < 0.8 {
		t.Errorf("Predict gave %d logits, accuracy %.2f on 5 test examples", len(logits), acc)
	}
}

func mustRun(t *testing.T, dir string) *checkpoint.Run {
	t.Helper()
	r, err := checkpoint.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// finalTensors returns the tensors of the newest checkpoint under out.
func finalTensors(t *testing.T, out string) (*checkpoint.File, Progress) {
	t.Helper()
	path, bad, err := checkpoint.LatestUnder(out)
	if err != nil || bad != nil || path == "" {
		t.Fatalf("newest checkpoint under %s: %q, %v, %v", out, path, bad, err)
	}
	f, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var st Progress
	if err := f.JSON(KeyProgress, &st); err != nil {
		t.Fatal(err)
	}
	return f, st
}

// TestResumeBitExact stops runs after k steps (mid-epoch, at an epoch's
// end) by cancelling their context, resumes each from "latest" in a fresh
// Trainer, and checks that every tensor of the final checkpoint (weights,
// Adam's moments, RSDM's sampler state) equals a straight run's bit for
// bit, and the progress too.
func TestResumeBitExact(t *testing.T) {
	train, test := blobs(96, 12, 4, 2), blobs(24, 12, 4, 2)
	fit := func(out string, stopAt int) error {
		c := smallConfig(out, train, test)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if stopAt > 0 {
			c.Callbacks.OnStep = func(s StepInfo) error {
				if s.Step == stopAt {
					cancel()
				}
				return nil
			}
		} else if stopAt < 0 {
			c.Resume = "latest"
		}
		tr, err := New(classifier(t, 8, 12, 16, 4), c)
		if err != nil {
			return err
		}
		defer tr.Close()
		_, err = tr.Fit(ctx)
		return err
	}
	straight := t.TempDir()
	if err := fit(straight, 0); err != nil {
		t.Fatal(err)
	}
	want, wst := finalTensors(t, straight)
	for _, k := range []int{5, 12, 13} { // mid-epoch, an epoch's end, just after
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			out := t.TempDir()
			var ie *InterruptedError
			if err := fit(out, k); !errors.As(err, &ie) || ie.Step != k || ie.Saved == "" {
				t.Fatalf("stopped run: %v, want an InterruptedError at step %d with a checkpoint", err, k)
			}
			if err := fit(out, -1); err != nil {
				t.Fatal(err)
			}
			got, gst := finalTensors(t, out)
			if gst.Step != wst.Step || gst.Epoch != wst.Epoch || gst.Best != wst.Best {
				t.Errorf("resumed progress %d/%d best %v, straight %d/%d best %v", gst.Step, gst.Epoch, gst.Best, wst.Step, wst.Epoch, wst.Best)
			}
			if len(got.Tensors) != len(want.Tensors) || len(want.Tensors) < 8 {
				t.Fatalf("resumed checkpoint has %d tensors, straight %d", len(got.Tensors), len(want.Tensors))
			}
			for name, a := range want.Tensors {
				b, ok := got.Tensors[name]
				if !ok || !testval.SameBits(a.Data, b.Data) {
					t.Errorf("tensor %s differs from the straight run's", name)
				}
			}
		})
	}
}
