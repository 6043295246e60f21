package training

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/nn"
)

// Evaluation of a model over a data set in chunks of its batch, which a
// Trainer and an Evaluator share, and the Evaluator: a model run forward
// only, on trained weights.

// Evaluator runs a model forward only on the weights its parameter nodes
// hold when NewEvaluator is called (a checkpoint's, loaded with
// checkpoint.File.LoadNodes; other weights want a new Evaluator): no
// gradients, no optimizer, no run folder. It evaluates and predicts as a
// Trainer does, for a command that uses a trained model rather than
// training one. It is not safe for concurrent use.
type Evaluator struct {
	fw   forward
	eval *evaluation
	be   backend.Backend
	prog *evalProgram
	vm   G.VM
}

// EvaluatorConfig says what examples an Evaluator takes and where it runs.
type EvaluatorConfig struct {
	// Shape is the shape of one example and Classes the number of classes,
	// as a data set of them gives (data.Dataset). Required.
	Shape   []int
	Classes int
	// Device is cpu (the default) or cuda; SelectDevice settles auto
	// first.
	Device string
	// Engine is program (orthonet's compiled executor, the default) or
	// tape (Gorgonia's tape machine, on the CPU only). Either runs the
	// forward pass only, not the gradients G.Grad may have added.
	Engine string
	// Threads, when above 0, bounds the CPU backend's threads, as
	// Config.Threads does the Trainer's.
	Threads int
	// MaxBytes bounds the memory of the compiled program
	// (program.Config.MaxBytes).
	MaxBytes int64
	// Metrics are measured by Evaluate and EvaluateWith besides the loss
	// and accuracy (Eval.Metrics).
	Metrics []Metric
}

// NewEvaluator compiles the forward pass of m as c says. m needs Logits or
// Loss, and Input or Feed with Inputs; its Eval is not used: m is the
// evaluation model.
func NewEvaluator(m Model, c EvaluatorConfig) (*Evaluator, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	desc := &sliceSet{shape: c.Shape, classes: c.Classes}
	if err := checkEvalModel(&m, desc, "NewEvaluator: the model"); err != nil {
		return nil, err
	}
	b, err := modelBatch(&m, desc)
	if err != nil {
		return nil, err
	}
	if m.Logits != nil {
		if got, want := tensor.Shape(m.Logits.Shape()).TotalSize(), b*c.Classes; got != want {
			return nil, fmt.Errorf("training: NewEvaluator: logits %q hold %d values (shape %v); a batch of %d examples of %d classes has %d",
				m.Logits.Name(), got, m.Logits.Shape(), b, c.Classes, want)
		}
	}
	e := &Evaluator{eval: newEvaluation(&m, b, c.Shape, c.Classes, c.Metrics, rand.New(rand.NewPCG(0, 0)))}
	if c.Engine == "tape" {
		e.vm = G.NewTapeMachine(forwardGraph(&m), G.EvalMode())
		e.fw = tapeForward{e.vm, &m}
		return e, nil
	}
	if e.be, err = newBackend(c.Device, c.Threads, false); err != nil {
		return nil, err
	}
	if e.prog, err = compileEval(e.be, &m, nil, c.MaxBytes); err != nil {
		e.Close()
		return nil, err
	}
	e.fw = e.prog
	return e, nil
}

// check refuses a configuration NewEvaluator cannot run, naming the field.
func (c EvaluatorConfig) check() error {
	switch {
	case len(c.Shape) == 0 || shapeLen(c.Shape) < 1:
		return fmt.Errorf("training: NewEvaluator: examples of shape %v", c.Shape)
	case c.Classes < 1:
		return fmt.Errorf("training: NewEvaluator: %d classes, want at least 1", c.Classes)
	case c.Device == "auto":
		return errors.New("training: NewEvaluator: device auto: settle it first with SelectDevice")
	case c.Device != "" && c.Device != "cpu" && c.Device != "cuda":
		return fmt.Errorf("training: NewEvaluator: device %q: want cpu or cuda", c.Device)
	case c.Engine != "" && c.Engine != "program" && c.Engine != "tape":
		return fmt.Errorf("training: NewEvaluator: engine %q: want program or tape", c.Engine)
	case c.Engine == "tape" && c.Device == "cuda":
		return errors.New("training: NewEvaluator: the tape engine runs on the CPU only; device cuda needs engine program")
	case c.MaxBytes < 0 || c.Threads < 0:
		return fmt.Errorf("training: NewEvaluator: MaxBytes %d and Threads %d must not be negative", c.MaxBytes, c.Threads)
	}
	return nil
}

// Evaluate measures the model on every example of set: the loss, the
// accuracy, EvaluatorConfig.Metrics and the feasibility of its weights.
func (e *Evaluator) Evaluate(ctx context.Context, set data.Dataset) (Eval, error) {
	return e.EvaluateWith(ctx, set, nil)
}

// EvaluateWith evaluates as Evaluate does and gives observe, where not nil,
// the logits (n x classes) and labels of each chunk of n examples.
func (e *Evaluator) EvaluateWith(ctx context.Context, set data.Dataset, observe func(logits []float32, labels []int)) (Eval, error) {
	if set == nil || set.Len() == 0 {
		return Eval{}, errors.New("training: Evaluate: no examples")
	}
	if !equalShapes(set.Shape(), e.eval.shape) {
		return Eval{}, fmt.Errorf("training: Evaluate: examples of shape %v, the model takes %v", set.Shape(), e.eval.shape)
	}
	if k := set.NumClasses(); k != e.eval.classes {
		return Eval{}, fmt.Errorf("training: Evaluate: a data set of %d classes, the model's logits have %d", k, e.eval.classes)
	}
	m, err := e.eval.run(ctx, e.fw, set, set.Len(), observe)
	if err != nil {
		return Eval{}, err
	}
	m.Feasibility = MaxFeasibility(e.eval.ev.Params)
	return m, nil
}

// Predict returns the logits (n x classes) of the n examples in x (n times
// the example size values).
func (e *Evaluator) Predict(x []float32) ([]float32, error) {
	if err := e.eval.checkPredict(x); err != nil {
		return nil, err
	}
	return e.eval.predict(e.fw, x)
}

// Close frees the compiled program or the tape machine.
func (e *Evaluator) Close() error {
	if e.vm != nil {
		e.vm.Close()
	}
	if e.prog != nil {
		e.prog.prog.Close()
	}
	if e.be != nil {
		return e.be.Close()
	}
	return nil
}

// tapeForward runs an evaluation model on a tape machine of its own.
type tapeForward struct {
	vm G.VM
	ev *Model
}

func (f tapeForward) evalSet(n *G.Node, data any) error { return setNode(n, data) }

func (f tapeForward) evaluate() ([]float32, float64, error) {
	f.vm.Reset()
	if err := f.vm.RunAll(); err != nil {
		return nil, 0, err
	}
	return tapeOutputs(f.ev)
}

// evaluation runs an evaluation model over the examples of a data set in
// chunks of its batch, the last zero-padded and its padding ignored.
type evaluation struct {
	ev         *Model
	batch      int   // examples one run of ev takes
	shape      []int // of one example
	exampleLen int
	classes    int
	metrics    []Metric
	rng        *rand.Rand // Batch.RNG
	images     []float32
	onehot     []float32 // ev's Labels, where it has them
	labels     []int
}

// newEvaluation returns the evaluation of ev in batches of b examples of
// shape, of classes classes.
func newEvaluation(ev *Model, b int, shape []int, classes int, metrics []Metric, rng *rand.Rand) *evaluation {
	e := &evaluation{ev: ev, batch: b, shape: shape, exampleLen: shapeLen(shape), classes: classes, metrics: metrics, rng: rng}
	e.images = make([]float32, b*e.exampleLen)
	e.labels = make([]int, b)
	if ev.Labels != nil {
		e.onehot = make([]float32, b*classes)
	}
	return e
}

// run returns the loss, accuracy and metrics of the evaluation model,
// run by fw, over the first count examples of set. With logits the loss is
// their cross-entropy; without, the graph's loss over the whole batches
// only.
func (e *evaluation) run(ctx context.Context, fw forward, set data.Dataset, count int, observe func([]float32, []int)) (Eval, error) {
	for _, m := range e.metrics {
		m.Reset()
	}
	var sum evalSum
	for lo := 0; lo < count; lo += e.batch {
		if err := ctx.Err(); err != nil {
			return Eval{}, err
		}
		if err := e.chunk(fw, set, lo, min(e.batch, count-lo), &sum, observe); err != nil {
			return Eval{}, err
		}
	}
	m := Eval{Loss: sum.loss / float64(max(sum.lossN, 1)), Accuracy: float64(sum.correct) / float64(count), Examples: count}
	if sum.lossN == 0 {
		m.Loss = nan()
	}
	if len(e.metrics) > 0 {
		m.Metrics = map[string]float64{}
		for _, x := range e.metrics {
			m.Metrics[x.Name()] = x.Value()
		}
	}
	return m, nil
}

// evalSum accumulates an evaluation's chunks: the correct predictions,
// and the loss summed over lossN examples.
type evalSum struct {
	correct, lossN int
	loss           float64
}

// chunk evaluates the n examples of set from lo on (n at most the batch;
// the rest of the batch zero) and adds them to sum.
func (e *evaluation) chunk(fw forward, set data.Dataset, lo, n int, sum *evalSum, observe func([]float32, []int)) error {
	k, d, labels := set.NumClasses(), e.exampleLen, e.labels
	for i := 0; i < n; i++ {
		y, err := set.Example(lo+i, e.images[i*d:(i+1)*d])
		if err != nil {
			return fmt.Errorf("training: evaluating: example %d: %w", lo+i, err)
		}
		labels[i] = y
	}
	clear(e.images[n*d:])
	clear(labels[n:])
	b := Batch{X: e.images, Labels: labels[:n], Size: n, Classes: k, RNG: e.rng}
	if err := feedModel(e.ev, b, e.onehot, fw.evalSet); err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	z, loss, err := fw.evaluate()
	if err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	if z == nil { // the graph's loss, of whole batches only
		if n == e.batch {
			sum.loss += loss * float64(n)
			sum.lossN += n
		}
		return nil
	}
	if err := checkLabels(labels[:n], k); err != nil {
		return err
	}
	if len(z) < n*k || len(z)%e.batch != 0 || len(z)/e.batch != k {
		return fmt.Errorf("training: evaluating: the logits hold %d values for a batch of %d, not %d classes a row", len(z), e.batch, k)
	}
	z = z[:n*k]
	correct, err := nn.Correct(z, labels[:n], k)
	if err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	ce, err := nn.CrossEntropyLoss(z, labels[:n], k)
	if err != nil {
		return fmt.Errorf("training: evaluating: %w", err)
	}
	sum.correct += correct
	sum.loss += ce * float64(n)
	sum.lossN += n
	for _, m := range e.metrics {
		m.Observe(z, labels[:n], k)
	}
	if observe != nil {
		observe(z, labels[:n])
	}
	return nil
}

// checkPredict refuses x that Predict cannot classify: a model without
// logits, or values that are not whole examples.
func (e *evaluation) checkPredict(x []float32) error {
	if e.ev.Logits == nil {
		return errors.New("training: Predict: the model has no logits")
	}
	if d := e.exampleLen; d == 0 || len(x)%d != 0 {
		return fmt.Errorf("training: Predict: %d values are not whole examples of %d", len(x), d)
	}
	return nil
}

// predict returns the logits of the examples in x (checkPredict's),
// run by fw.
func (e *evaluation) predict(fw forward, x []float32) ([]float32, error) {
	n := len(x) / e.exampleLen
	set := &sliceSet{x: x, n: n, shape: e.shape, classes: e.classes}
	out := make([]float32, 0, n*e.classes)
	_, err := e.run(context.Background(), fw, set, n, func(z []float32, _ []int) { out = append(out, z...) })
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
