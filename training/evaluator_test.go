package training

import (
	"context"
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/param"
)

// TestEvaluatorAgreesWithTrainer trains the classifier, hands its weights
// to a forward-only model of another batch, and checks that an Evaluator
// on each engine measures and predicts what the Trainer does.
func TestEvaluatorAgreesWithTrainer(t *testing.T) {
	train, test := blobs(160, 12, 4, 1), blobs(40, 12, 4, 1)
	c := smallConfig(t.TempDir(), train, test)
	c.Epochs = 1
	tr, _ := fit(t, classifier(t, 8, 12, 16, 4), c)
	want, err := tr.Evaluate(context.Background(), test)
	if err != nil {
		t.Fatal(err)
	}
	x := test.X[:7*12]
	wantLogits, err := tr.Predict(x)
	if err != nil {
		t.Fatal(err)
	}
	trained, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{"program", "tape"} {
		t.Run(engine, func(t *testing.T) {
			m := classifier(t, 5, 12, 16, 4)
			if err := shareNodes(param.Nodes(m.Params), param.Nodes(trained)); err != nil {
				t.Fatal(err)
			}
			ev, err := NewEvaluator(Model{Logits: m.Logits, Input: m.Input, Params: m.Params},
				EvaluatorConfig{Shape: test.Shape(), Classes: 4, Device: "cpu", Engine: engine, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer ev.Close()
			got, err := ev.Evaluate(context.Background(), test)
			if err != nil {
				t.Fatal(err)
			}
			if got.Accuracy != want.Accuracy || got.Examples != want.Examples || math.Abs(got.Loss-want.Loss) > 1e-5*math.Abs(want.Loss) ||
				got.Feasibility != want.Feasibility {
				t.Errorf("Evaluate = %+v, the Trainer's %+v", got, want)
			}
			logits, err := ev.Predict(x)
			if err != nil {
				t.Fatal(err)
			}
			if len(logits) != len(wantLogits) {
				t.Fatalf("Predict gave %d logits, the Trainer %d", len(logits), len(wantLogits))
			}
			for i := range logits {
				if math.Abs(float64(logits[i]-wantLogits[i])) > 1e-5 {
					t.Fatalf("logit %d = %g, the Trainer's %g", i, logits[i], wantLogits[i])
				}
			}
		})
	}
}

// TestEvaluatorRefuses checks that an Evaluator refuses a model, examples
// or values it cannot evaluate, saying what is wrong.
func TestEvaluatorRefuses(t *testing.T) {
	m := classifier(t, 5, 12, 16, 4)
	fwd := Model{Logits: m.Logits, Input: m.Input, Params: m.Params}
	cfg := EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 4, Device: "cpu"}
	for _, tc := range []struct {
		name string
		m    Model
		c    EvaluatorConfig
		want string
	}{
		{"no shape", fwd, EvaluatorConfig{Classes: 4}, "examples of shape"},
		{"no outputs", Model{Input: m.Input, Params: m.Params}, cfg, "NewEvaluator: the model has neither Logits nor Loss"},
		{"no input", Model{Logits: m.Logits, Params: m.Params}, cfg, "the model has no Input"},
		{"feed without inputs", Model{Logits: m.Logits, Params: m.Params, Feed: func(Batch, func(*G.Node, any) error) error { return nil }}, cfg,
			"has a Feed but no Inputs"},
		{"other examples", fwd, EvaluatorConfig{Shape: []int{1, 1, 7}, Classes: 4}, "does not hold whole examples"},
		{"no classes", fwd, EvaluatorConfig{Shape: []int{1, 1, 12}}, "0 classes"},
		{"other classes", fwd, EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 5}, "a batch of 5 examples of 5 classes"},
		{"device auto", fwd, EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 4, Device: "auto"}, "SelectDevice"},
		{"device typo", fwd, EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 4, Device: "gpu"}, `device "gpu"`},
		{"engine typo", fwd, EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 4, Engine: "Tape"}, `engine "Tape"`},
		{"negative threads", fwd, EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 4, Threads: -2}, "Threads -2"},
		{"tape on cuda", fwd, EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 4, Device: "cuda", Engine: "tape"}, "CPU only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := NewEvaluator(tc.m, tc.c)
			if err == nil {
				ev.Close()
				t.Fatal("NewEvaluator: no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewEvaluator: %v, want it to say %q", err, tc.want)
			}
		})
	}
	ev, err := NewEvaluator(fwd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if _, err := ev.Predict(make([]float32, 13)); err == nil || !strings.Contains(err.Error(), "not whole examples") {
		t.Errorf("Predict of 13 values: %v, want a refusal of partial examples", err)
	}
	if _, err := ev.Evaluate(context.Background(), blobs(10, 8, 4, 1)); err == nil || !strings.Contains(err.Error(), "examples of shape") {
		t.Errorf("Evaluate of examples of 8 values: %v, want a refusal naming the shapes", err)
	}
	if _, err := ev.Evaluate(context.Background(), blobs(10, 12, 3, 1)); err == nil || !strings.Contains(err.Error(), "3 classes") {
		t.Errorf("Evaluate of a set of 3 classes: %v, want a refusal naming the classes", err)
	}
}

// TestTapeEvaluatorRunsForwardOnly checks that the tape Evaluator of a
// model built with its gradients (G.Grad) computes none of them: every
// node its outputs do not need, and that held no value (an operation, not
// an input or a constant), holds none after Evaluate.
func TestTapeEvaluatorRunsForwardOnly(t *testing.T) {
	m := classifier(t, 5, 12, 16, 4)
	fwd := Model{Logits: m.Logits, Input: m.Input, Params: m.Params}
	needed := map[int64]bool{}
	for _, n := range forwardGraph(&fwd).AllNodes() {
		needed[n.ID()] = true
	}
	var rest []*G.Node
	for _, n := range graphOf(&fwd).AllNodes() {
		if !needed[n.ID()] && n.Value() == nil {
			rest = append(rest, n)
		}
	}
	if len(rest) == 0 {
		t.Fatal("the classifier's graph has no operation beyond its forward pass: no gradients to leave out")
	}
	ev, err := NewEvaluator(fwd, EvaluatorConfig{Shape: []int{1, 1, 12}, Classes: 4, Device: "cpu", Engine: "tape"})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if _, err := ev.Evaluate(context.Background(), blobs(10, 12, 4, 1)); err != nil {
		t.Fatal(err)
	}
	for _, n := range rest {
		if n.Value() != nil {
			t.Errorf("node %s, which the logits do not need, was computed", n)
		}
	}
}
