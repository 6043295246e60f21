package training

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/param"
)

// Evaluation on the test set, and the feasibility of the constrained
// weights, which each weight's own manifold measures.

// testLen returns the test set's size (0 without one).
func (t *Trainer) testLen() int {
	if t.c.Test == nil {
		return 0
	}
	return t.c.Test.Len()
}

// evaluate measures the test loss and accuracy during epoch (from 0) and
// records them.
func (t *Trainer) evaluate(epoch int) (Eval, error) { return t.evaluateFirst(epoch, t.testLen()) }

// evaluateFirst evaluates on the first n test examples and records the
// result as a test row of the metrics.
func (t *Trainer) evaluateFirst(epoch, n int) (Eval, error) {
	if n == 0 {
		return Eval{Epoch: epoch + 1, Step: t.st.Step, Loss: nan(), Feasibility: t.feasibility()}, nil
	}
	m, err := t.evaluateOn(context.Background(), t.c.Test, n, nil)
	if err != nil {
		return m, err
	}
	if math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) {
		t.writeOutputs()
		msg := fmt.Sprintf("epoch %d, step %d: the test loss is %v: the weights diverged; stopping (try a smaller -lr or -lr-other)", epoch+1, t.st.Step, m.Loss)
		return m, &SharedError{&cause{msg, ErrDiverged}}
	}
	m.Epoch, m.Step = epoch+1, t.st.Step
	row := Row{Kind: "test", Epoch: m.Epoch, Step: m.Step, Seconds: t.seconds(), Loss: m.Loss, Accuracy: m.Accuracy,
		Examples: n, TrainSeconds: t.st.TrainSeconds, Feasibility: &m.Feasibility, Extra: m.Metrics}
	t.st.Metrics = append(t.st.Metrics, row)
	on := ""
	if n < t.testLen() {
		on = fmt.Sprintf(" (first %d test images)", n)
	}
	acc := ""
	if t.ev.Logits != nil {
		acc = fmt.Sprintf(", test accuracy %.2f%%%s", 100*m.Accuracy, on)
	}
	fmt.Fprintf(t.c.Log, "epoch %d step %d: test loss %.4f%s, max ||W^T W - I||_F %.2e\n", m.Epoch, m.Step, m.Loss, acc, m.Feasibility)
	if cb := t.c.Callbacks.OnEval; cb != nil {
		if err := call("OnEval", func() error { return cb(m) }); err != nil {
			t.writeOutputs()
			return m, err
		}
	}
	return m, nil
}

// noteBest records m if it is the best test accuracy so far.
func (t *Trainer) noteBest(m Eval) bool {
	if m.Accuracy > t.st.Best || t.st.BestStep == 0 {
		t.st.Best, t.st.BestStep = m.Accuracy, t.st.Step
		return true
	}
	return false
}

// evaluateAndSave evaluates mid-epoch, on the first EvalSubset test
// examples, and saves a checkpoint if save is set or the accuracy on the
// whole test set is the best so far (a subset's is not compared with it).
func (t *Trainer) evaluateAndSave(save bool) (Eval, error) {
	n := t.testLen()
	if t.c.EvalSubset > 0 {
		n = min(n, t.c.EvalSubset)
	}
	m, err := t.evaluateFirst(t.st.Epoch, n)
	if err != nil {
		return m, err
	}
	best := n == t.testLen() && t.noteBest(m)
	if save || best {
		err = t.save(best)
	}
	return m, err
}

// Feasibility returns how far a constrained weight is from its manifold
// (param.Param.Feasibility, ||W^T W - I||_F on the Stiefel manifold), NaN
// when that cannot be measured.
func Feasibility(p param.Param) float64 {
	f, err := p.Feasibility()
	if err != nil {
		return math.NaN()
	}
	return f
}

// MaxFeasibility returns the largest Feasibility of the constrained
// parameters among ps (0 without any).
func MaxFeasibility(ps []param.Param) float64 {
	var worst float64
	for _, p := range param.Constrained(ps) {
		worst = max(worst, Feasibility(p))
	}
	return worst
}

// feasibility returns the model's MaxFeasibility, its nodes first brought
// up to date.
func (t *Trainer) feasibility() float64 {
	if err := t.eng.store(); err != nil {
		return nan()
	}
	return MaxFeasibility(t.m.Params)
}

// Evaluate measures the model on every example of set: the loss, the
// accuracy, Config.Metrics and the feasibility. It refuses a model whose
// parameters are not finite, naming the first such tensor.
func (t *Trainer) Evaluate(ctx context.Context, set data.Dataset) (Eval, error) {
	if set == nil || set.Len() == 0 {
		return Eval{}, errors.New("training: Evaluate: no examples")
	}
	if !equalShapes(set.Shape(), t.c.Train.Shape()) {
		return Eval{}, fmt.Errorf("training: Evaluate: examples of shape %v, the model takes %v", set.Shape(), t.c.Train.Shape())
	}
	if err := t.checkFinite(); err != nil {
		return Eval{}, err
	}
	return t.evaluateOn(ctx, set, set.Len(), nil)
}

// EvaluateWith evaluates as Evaluate does and gives observe the logits (n x
// classes) and labels of each chunk of n examples.
func (t *Trainer) EvaluateWith(ctx context.Context, set data.Dataset, observe func(logits []float32, labels []int)) (Eval, error) {
	if err := t.checkFinite(); err != nil {
		return Eval{}, err
	}
	return t.evaluateOn(ctx, set, set.Len(), observe)
}

// checkFinite refuses parameters with a NaN or Inf entry.
func (t *Trainer) checkFinite() error {
	if err := t.eng.store(); err != nil {
		return err
	}
	return CheckFinite(t.m.Params)
}

// CheckFinite returns an error naming the first parameter with a NaN or
// Inf entry.
func CheckFinite(ps []param.Param) error {
	for _, p := range ps {
		v := p.Node.Value()
		if v == nil {
			continue
		}
		bad := -1
		switch d := v.Data().(type) {
		case []float32:
			for i, x := range d {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					bad = i
					break
				}
			}
		case []float64:
			for i, x := range d {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					bad = i
					break
				}
			}
		}
		if bad >= 0 {
			return fmt.Errorf("training: parameter %q has a non-finite entry at %d: the weights are not usable", p.Name(), bad)
		}
	}
	return nil
}

// Predict returns the logits (n x classes) of the n examples in x (n times
// the example size values).
func (t *Trainer) Predict(x []float32) ([]float32, error) {
	ev, err := t.evaluation()
	if err != nil {
		return nil, err
	}
	if err := ev.checkPredict(x); err != nil {
		return nil, err
	}
	if err := t.checkFinite(); err != nil {
		return nil, err
	}
	return ev.predict(t.eng, x)
}

// evaluateOn returns the loss, accuracy and metrics of the evaluation
// model over the first count examples of set (evaluation.run), and the
// feasibility.
func (t *Trainer) evaluateOn(ctx context.Context, set data.Dataset, count int, observe func([]float32, []int)) (Eval, error) {
	ev, err := t.evaluation()
	if err != nil {
		return Eval{}, err
	}
	e, err := ev.run(ctx, t.eng, set, count, observe)
	if err != nil {
		return Eval{}, err
	}
	e.Feasibility = t.feasibility()
	return e, nil
}

// evaluation returns the Trainer's evaluation, made at the first use.
func (t *Trainer) evaluation() (*evaluation, error) {
	if t.eval != nil {
		return t.eval, nil
	}
	b := t.c.shard() // the training graph's batch
	if t.ev != t.m {
		var err error
		if b, err = modelBatch(t.ev, t.c.Train); err != nil {
			return nil, err
		}
	}
	t.eval = newEvaluation(t.ev, b, t.c.Train.Shape(), t.classes, t.c.Metrics, t.rng)
	return t.eval, nil
}
