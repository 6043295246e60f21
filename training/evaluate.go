package training

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/nn"
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
	if t.ev.Logits == nil {
		return nil, errors.New("training: Predict: the model has no logits")
	}
	d := t.exampleLen
	if d == 0 || len(x)%d != 0 {
		return nil, fmt.Errorf("training: Predict: %d values are not whole examples of %d", len(x), d)
	}
	if err := t.checkFinite(); err != nil {
		return nil, err
	}
	n := len(x) / d
	set := &sliceSet{x: x, n: n, shape: t.c.Train.Shape(), classes: t.classes}
	out := make([]float32, 0, n*t.classes)
	_, err := t.evaluateOn(context.Background(), set, n, func(z []float32, _ []int) { out = append(out, z...) })
	return out, err
}

// sliceSet is a data set of unlabelled examples held in a slice (Predict's).
type sliceSet struct {
	x       []float32
	n       int
	shape   []int
	classes int
}

func (s *sliceSet) Len() int        { return s.n }
func (s *sliceSet) Shape() []int    { return s.shape }
func (s *sliceSet) NumClasses() int { return s.classes }
func (s *sliceSet) Example(i int, x []float32) (int, error) {
	d := len(s.x) / s.n
	copy(x, s.x[i*d:(i+1)*d])
	return 0, nil
}

// evaluateOn returns the loss, accuracy and metrics of the evaluation
// model over the first count examples of set; the last chunk is
// zero-padded and its padding ignored. With logits the loss is their
// cross-entropy; without, the graph's loss over the whole batches only.
func (t *Trainer) evaluateOn(ctx context.Context, set data.Dataset, count int, observe func([]float32, []int)) (Eval, error) {
	if err := t.evalBuffers(); err != nil {
		return Eval{}, err
	}
	for _, m := range t.c.Metrics {
		m.Reset()
	}
	var sum evalSum
	labels := make([]int, t.evBatch)
	for lo := 0; lo < count; lo += t.evBatch {
		if err := ctx.Err(); err != nil {
			return Eval{}, err
		}
		if err := t.evaluateChunk(set, lo, min(t.evBatch, count-lo), labels, &sum, observe); err != nil {
			return Eval{}, err
		}
	}
	e := Eval{Loss: sum.loss / float64(max(sum.lossN, 1)), Accuracy: sum.correct / float64(count), Examples: count, Feasibility: t.feasibility()}
	if sum.lossN == 0 {
		e.Loss = nan()
	}
	if len(t.c.Metrics) > 0 {
		e.Metrics = map[string]float64{}
		for _, m := range t.c.Metrics {
			e.Metrics[m.Name()] = m.Value()
		}
	}
	return e, nil
}

// evalSum accumulates an evaluation's chunks: the correct predictions,
// and the loss summed over lossN examples.
type evalSum struct {
	correct, loss float64
	lossN         int
}

// evaluateChunk evaluates the n examples of set from lo on (n at most the
// evaluation batch; the rest of the batch zero) and adds them to sum.
func (t *Trainer) evaluateChunk(set data.Dataset, lo, n int, labels []int, sum *evalSum, observe func([]float32, []int)) error {
	k, d := set.NumClasses(), t.exampleLen
	for i := 0; i < n; i++ {
		y, err := set.Example(lo+i, t.evImages[i*d:(i+1)*d])
		if err != nil {
			return fmt.Errorf("training: evaluating: example %d: %w", lo+i, err)
		}
		labels[i] = y
	}
	clear(t.evImages[n*d:])
	clear(labels[n:])
	b := Batch{X: t.evImages, Labels: labels[:n], Size: n, Classes: k, RNG: t.rng}
	if err := feedModel(t.ev, b, t.evOnehot, t.eng.evalSet); err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	z, loss, err := t.eng.evaluate()
	if err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	if z == nil { // the graph's loss, of whole batches only
		if n == t.evBatch {
			sum.loss += loss * float64(n)
			sum.lossN += n
		}
		return nil
	}
	if err := checkLabels(labels[:n], k); err != nil {
		return err
	}
	z = z[:n*k]
	acc, err := nn.Accuracy(z, labels[:n], k)
	if err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	ce, err := nn.CrossEntropyLoss(z, labels[:n], k)
	if err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	sum.correct += math.Round(acc * float64(n))
	sum.loss += ce * float64(n)
	sum.lossN += n
	for _, m := range t.c.Metrics {
		m.Observe(z, labels[:n], k)
	}
	if observe != nil {
		observe(z, labels[:n])
	}
	return nil
}

// evalBuffers makes the evaluation batch's buffers once.
func (t *Trainer) evalBuffers() error {
	if t.evImages != nil {
		return nil
	}
	b := t.c.shard() // the training graph's batch
	if t.ev != t.m {
		var err error
		if b, err = modelBatch(t.ev, t.c.Train); err != nil {
			return err
		}
	}
	t.evBatch = b
	t.evImages = make([]float32, b*t.exampleLen)
	if t.ev.Labels != nil {
		t.evOnehot = make([]float32, b*t.classes)
	}
	return nil
}
