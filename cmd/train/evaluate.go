package main

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/param"
)

// Evaluation on the test set, and the feasibility of the constrained
// weights, which each weight's own manifold measures.

// evaluate measures the test loss and accuracy during epoch (from 0) and
// records them.
func (t *trainer) evaluate(epoch int) (metric, error) { return t.evaluateFirst(epoch, t.test.N) }

// evaluateFirst evaluates on the first n test images.
func (t *trainer) evaluateFirst(epoch, n int) (metric, error) {
	if err := t.eng.store(); err != nil { // the feasibility reads the nodes
		return metric{}, err
	}
	m, err := evaluateOn(t.eng, t.evNet, t.test, n)
	if err != nil {
		return m, err
	}
	if math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) {
		writeOutputs(t.dir, t.st.Metrics, t.w)
		return m, shared("epoch %d, step %d: the test loss is %v: the weights diverged; stopping (try a smaller -lr or -lr-other)", epoch+1, t.st.Step, m.Loss)
	}
	m.Kind, m.Epoch, m.Step, m.Seconds, m.Examples, m.TrainSeconds = "test", epoch+1, t.st.Step, t.seconds(), n, t.st.TrainSeconds
	feas := maxFeasibility(t.net.Params())
	m.Feasibility = &feas
	t.st.Metrics = append(t.st.Metrics, m)
	on := ""
	if n < t.test.N {
		on = fmt.Sprintf(" (first %d test images)", n)
	}
	fmt.Fprintf(t.w, "epoch %d step %d: test loss %.4f, test accuracy %.2f%%%s, max ||W^T W - I||_F %.2e\n", m.Epoch, m.Step, m.Loss, 100*m.Accuracy, on, feas)
	return m, nil
}

// noteBest records m if it is the best test accuracy so far.
func (t *trainer) noteBest(m metric) bool {
	if m.Accuracy > t.st.Best || t.st.BestStep == 0 {
		t.st.Best, t.st.BestStep = m.Accuracy, t.st.Step
		return true
	}
	return false
}

// evaluateAndSave evaluates mid-epoch, on the first -eval-subset test
// images, and saves a checkpoint if save is set or the accuracy on the whole
// test set is the best so far (a subset's is not compared with it).
func (t *trainer) evaluateAndSave(save bool) (metric, error) {
	n := t.test.N
	if t.c.evalSubset > 0 {
		n = min(n, t.c.evalSubset)
	}
	m, err := t.evaluateFirst(t.st.Epoch, n)
	if err != nil {
		return m, err
	}
	best := n == t.test.N && t.noteBest(m)
	if save || best {
		err = t.save(best)
	}
	return m, err
}

// feasibility returns how far a constrained weight is from its manifold
// (param.Param.Feasibility), NaN when that cannot be measured.
func feasibility(p param.Param) float64 {
	f, err := p.Feasibility()
	if err != nil {
		return math.NaN()
	}
	return f
}

// maxFeasibility returns the largest feasibility of the constrained
// parameters among ps.
func maxFeasibility(ps []param.Param) float64 {
	var worst float64
	for _, p := range param.Constrained(ps) {
		worst = max(worst, feasibility(p))
	}
	return worst
}

// evaluateOn returns the test loss and accuracy of the engine's evaluation
// network ev over the first count examples of s; the last chunk is
// zero-padded and its padding ignored.
func evaluateOn(e engine, ev *network, s *data.Set, count int) (metric, error) {
	return evaluateWith(e, ev, s, count, nil)
}

// evaluateWith evaluates as evaluateOn does and, unless observe is nil,
// gives it the logits (n x classes) and labels of each chunk of n examples.
func evaluateWith(e engine, ev *network, s *data.Set, count int, observe func(logits []float32, labels []int)) (metric, error) {
	d, k := s.Dim(), s.Classes
	batch := len(ev.xb) / d
	labels := make([]int, batch)
	var correct, lossSum float64
	for lo := 0; lo < count; lo += batch {
		n := min(batch, count-lo)
		ev.fill(s.X[lo*d:(lo+n)*d], n)
		z, err := e.evaluate()
		if err != nil {
			return metric{}, fmt.Errorf("evaluating: %w", err)
		}
		for i, y := range s.Y[lo : lo+n] {
			labels[i] = int(y)
		}
		acc, err := nn.Accuracy(z[:n*k], labels[:n], k)
		if err != nil {
			return metric{}, fmt.Errorf("evaluating: %w", err)
		}
		loss, err := nn.CrossEntropyLoss(z[:n*k], labels[:n], k)
		if err != nil {
			return metric{}, fmt.Errorf("evaluating: %w", err)
		}
		correct += math.Round(acc * float64(n))
		lossSum += loss * float64(n)
		if observe != nil {
			observe(z[:n*k], labels[:n])
		}
	}
	return metric{Loss: lossSum / float64(count), Accuracy: correct / float64(count)}, nil
}
