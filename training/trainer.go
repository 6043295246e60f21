package training

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// Progress is where a run stands: everything of the next step that is not
// in the weights, the optimizer or the configuration. Checkpoints hold it
// (KeyProgress).
type Progress struct {
	Epoch    int     `json:"epoch"` // epoch in progress, from 0
	Batch    int     `json:"batch"` // batches of it done
	Step     int     `json:"step"`  // steps done in all
	Seconds  float64 `json:"seconds"`
	RNG      []byte  `json:"dropout_rng"` // Batch.RNG's PCG state
	Window   Window  `json:"window"`
	Best     float64 `json:"best_accuracy"`
	BestStep int     `json:"best_step"`
	Metrics  []Row   `json:"metrics"`
	Skipped  int     `json:"skipped,omitempty"`  // batches skipped in all (Skip)
	SkipRun  int     `json:"skip_run,omitempty"` // of them, in a row up to now
	// TrainSeconds is the time spent in training steps, and TimedEvals the
	// evaluations EvalInterval has made.
	TrainSeconds float64 `json:"train_seconds,omitempty"`
	TimedEvals   int     `json:"timed_evals,omitempty"`
	// DataChanges records each resume on other data that
	// Config.AllowOtherData let through.
	DataChanges []string `json:"data_changes,omitempty"`
}

// Trainer trains one model. It is not safe for concurrent use.
type Trainer struct {
	c          Config
	m, ev      *Model
	classes    int
	exampleLen int
	eng        engine
	solver     solver
	loader     *data.Loader
	rngSrc     *rand.PCG
	rng        *rand.Rand
	dir        *checkpoint.Run // the run folder; nil for a finished run resumed, and on ranks but 0
	done       bool            // the run resumed has trained all its epochs
	created    bool            // this session created the run folder
	taken      int             // steps this session has taken
	last       string          // newest checkpoint written or loaded
	st         Progress
	start      time.Time // of this session
	clock0     float64   // the training clock when this session began
	sync       []float64 // what the ranks agree on each step (dist.go)
	resumed    *checkpoint.File
	resumePath string
	dataID     DataInfo

	// The batch buffers of training, and the evaluation (made at its
	// first use).
	images []float32
	labels []int
	onehot []float32
	eval   *evaluation

	// Per-session loop state, set by begin, beginEpoch and timed.
	steps      int // batches per epoch
	logEvery   int // steps between training rows of the metrics
	evalEvery  int // steps between mid-epoch evaluations (0: none)
	bar        *progressBar
	epochStart time.Time // of this session's part of the epoch
	timeUp     bool      // TimeLimit or MaxSteps reached
	firstBatch int       // the epoch's first batch in this session
}

// New builds a Trainer of m as c says: it settles the device, compiles the
// model, builds the optimizer, and restores c.Resume where set. The ranks
// of a data-parallel run first compare their settings and data.
func New(m Model, c Config) (_ *Trainer, err error) {
	if c, err = c.withDefaults(); err != nil {
		return nil, err
	}
	if err := checkModel(&m, &c); err != nil {
		return nil, err
	}
	ev := m.Eval
	if ev == nil {
		ev = &m
	} else if err := checkEvalModel(ev, c.Train, "Model.Eval"); err != nil {
		return nil, err
	}
	t := &Trainer{c: c, m: &m, ev: ev, sync: make([]float64, 2), classes: c.Train.NumClasses()}
	t.exampleLen = shapeLen(c.Train.Shape())
	if err := t.readResume(); err != nil {
		return nil, err
	}
	if err := t.agreeSettings(); err != nil {
		return nil, err
	}
	held, why, err := t.resumeFolder()
	if err != nil {
		return nil, err
	}
	if err := t.build(held, why); err != nil {
		if held != nil && held != t.dir {
			held.Close()
		}
		t.Close()
		return nil, err
	}
	return t, nil
}

// build fingerprints the data, builds the engine and the loader, restores
// the checkpoint and settles the run folder.
func (t *Trainer) build(held *checkpoint.Run, why string) error {
	c := &t.c
	var err error
	if t.dataID, err = dataInfo(c.Train, c.Test); err != nil {
		return err
	}
	if err := t.agreeData(); err != nil {
		return err
	}
	if c.Train.Len() < c.Batch {
		return &SettingError{fmt.Errorf("training: %d training examples, fewer than one batch of %d", c.Train.Len(), c.Batch)}
	}
	if err := selectDevice(c); err != nil {
		return err
	}
	t.rngSrc = rand.NewPCG(c.Seed, 0x64726f70)
	t.rng = rand.New(t.rngSrc)
	if err := t.buildEngine(); err != nil {
		return err
	}
	t.solver = t.eng.solver()
	if t.loader, err = data.NewLoader(c.Train, c.Batch, c.Seed); err != nil {
		return err
	}
	t.images = make([]float32, c.Batch*t.exampleLen)
	t.labels = make([]int, c.Batch)
	if t.m.Labels != nil {
		t.onehot = make([]float32, c.shard()*t.classes)
	}
	return t.openRun(held, why)
}

// buildEngine builds the engine; a setting the device's optimizer does not
// run makes Device auto train on the CPU, saying why.
func (t *Trainer) buildEngine() error {
	c := &t.c
	if err := checkR(c.Groups, param.Nodes(param.Constrained(t.m.Params))); err != nil {
		return &SettingError{err}
	}
	var err error
	t.eng, err = newEngine(c, t.m, t.ev)
	if errors.Is(err, optim.ErrNotOnDevice) && c.askedDevice == "auto" {
		fmt.Fprintf(c.Log, "train: device cpu instead: %v; -device auto trains on the CPU what the device's optimizer does not run\n", err)
		c.Device = "cpu"
		t.eng, err = newEngine(c, t.m, t.ev)
	}
	switch {
	case errors.Is(err, ErrMemory) && c.ranks() == 1: // on several ranks, maybe this rank's alone
		return &SettingError{err}
	case errors.Is(err, optim.ErrNotDistributed):
		return &SettingError{fmt.Errorf("-dist mpi: %w", err)}
	case errors.Is(err, optim.ErrNotOnDevice):
		return &SettingError{fmt.Errorf("-device %s: %w (-device cpu or auto trains with it)", c.Device, err)}
	}
	return err
}

// checkModel refuses a model the run cannot train, naming what is
// missing or of the wrong size.
func checkModel(m *Model, c *Config) error {
	switch {
	case m.Loss == nil:
		return errors.New("training: Model.Loss is nil")
	case len(m.Params) == 0:
		return errors.New("training: Model.Params is empty")
	case m.Feed == nil && m.Input == nil:
		return errors.New("training: Model.Input is nil (or set Model.Feed and Model.Inputs)")
	case m.Feed != nil && len(m.Inputs) == 0:
		return errors.New("training: Model.Feed is set but Model.Inputs is empty")
	case c.Batch%c.ranks() != 0:
		return &SettingError{fmt.Errorf("training: batch %d is not divisible by the %d ranks: each rank trains on an equal share of every global batch (try batch %d)",
			c.Batch, c.ranks(), max(c.ranks(), c.Batch/c.ranks()*c.ranks()))}
	}
	if c.Test != nil && !equalShapes(c.Test.Shape(), c.Train.Shape()) {
		return fmt.Errorf("training: test examples of shape %v, training examples of %v", c.Test.Shape(), c.Train.Shape())
	}
	return checkInputs(m, c.shard(), c.Train)
}

// checkEvalModel refuses an evaluation model of examples of d without the
// input or outputs evaluation needs; what names the model in the error.
func checkEvalModel(ev *Model, d data.Dataset, what string) error {
	switch {
	case ev.Logits == nil && ev.Loss == nil:
		return fmt.Errorf("training: %s has neither Logits nor Loss", what)
	case ev.Feed == nil && ev.Input == nil:
		return fmt.Errorf("training: %s has no Input (or set its Feed and Inputs)", what)
	case ev.Feed != nil && len(ev.Inputs) == 0:
		return fmt.Errorf("training: %s has a Feed but no Inputs", what)
	}
	b, err := modelBatch(ev, d)
	if err != nil {
		return err
	}
	return checkInputs(ev, b, d)
}

// checkInputs checks that m's Input takes b examples of d and its Labels
// b one-hot rows of d's classes.
func checkInputs(m *Model, b int, d data.Dataset) error {
	if m.Feed != nil {
		return nil
	}
	want := b * shapeLen(d.Shape())
	if got := tensor.Shape(m.Input.Shape()).TotalSize(); got != want {
		return fmt.Errorf("training: input %q takes %d values (shape %v); a batch of %d examples of shape %v has %d",
			m.Input.Name(), got, m.Input.Shape(), b, d.Shape(), want)
	}
	if m.Labels != nil {
		if got, want := tensor.Shape(m.Labels.Shape()).TotalSize(), b*d.NumClasses(); got != want {
			return fmt.Errorf("training: labels %q take %d values (shape %v); %d one-hot rows of %d classes have %d",
				m.Labels.Name(), got, m.Labels.Shape(), b, d.NumClasses(), want)
		}
	}
	return nil
}

// modelBatch returns the examples one run of m takes: its input's first
// axis, or its logits' where Feed fills the inputs.
func modelBatch(m *Model, d data.Dataset) (int, error) {
	switch {
	case m.Feed == nil:
		size := tensor.Shape(m.Input.Shape()).TotalSize()
		if n := shapeLen(d.Shape()); n > 0 && size%n == 0 {
			return size / n, nil
		}
		return 0, fmt.Errorf("training: input %q of shape %v does not hold whole examples of shape %v", m.Input.Name(), m.Input.Shape(), d.Shape())
	case m.Logits != nil:
		return m.Logits.Shape()[0], nil
	}
	return 0, errors.New("training: an evaluation model with Feed needs Logits (their first axis is its batch)")
}

// shapeLen returns the number of values of an example of shape s.
func shapeLen(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func equalShapes(a, b []int) bool { return shapeLen(a) == shapeLen(b) && len(a) == len(b) }

// checkR refuses an RSDM submanifold size r above the rows of a
// constrained weight (of an n x p weight, max(n, p)), naming it and the
// largest r the model takes.
func checkR(groups []optim.Group, weights G.Nodes) error {
	if len(weights) == 0 {
		return nil
	}
	r := 0
	for _, g := range groups {
		if rc, ok := g.Rule.(optim.RSDMConfig); ok {
			r = max(r, rc.SubmanifoldSize)
		}
	}
	if r == 0 {
		return nil
	}
	rows := func(n *G.Node) int {
		a, b, _ := manifold.MatrixOf(n.Shape())
		return max(a, b)
	}
	smallest := weights[0]
	for _, n := range weights {
		if rows(n) < rows(smallest) {
			smallest = n
		}
	}
	for _, n := range weights {
		if r > rows(n) {
			return fmt.Errorf("-r %d: RSDM's submanifold size exceeds the %d rows of weight %q (this network takes 2 <= r <= %d, the rows of %q)",
				r, rows(n), n.Name(), rows(smallest), smallest.Name())
		}
	}
	return nil
}

// Close frees the engine and releases the run folder.
func (t *Trainer) Close() error {
	if t.eng != nil {
		t.eng.close()
		t.eng = nil
	}
	if t.dir != nil {
		err := t.dir.Close()
		t.dir = nil
		return err
	}
	return nil
}

// RunDir returns the run folder's path, or "" where the run writes none.
func (t *Trainer) RunDir() string {
	if t.dir == nil {
		return ""
	}
	return t.dir.Dir()
}

// Progress returns where the run stands.
func (t *Trainer) Progress() Progress { return t.st }

// LastCheckpoint returns the newest checkpoint written or loaded.
func (t *Trainer) LastCheckpoint() string { return t.last }

// Params returns the model's parameters, their nodes holding the trained
// values.
func (t *Trainer) Params() ([]param.Param, error) {
	if err := t.eng.store(); err != nil {
		return nil, err
	}
	return t.m.Params, nil
}

// Solver returns the run's optimizer (the one Solver over every group).
func (t *Trainer) Solver() checkpoint.Solver { return t.solver }

// feed puts this rank's rows of the global batch held in t.images and
// t.labels into the training model's inputs; it returns those labels.
func (t *Trainer) feed(step int) ([]int, error) {
	b, d := t.c.shard(), t.exampleLen
	lo := t.c.rank() * b
	labels := t.labels[lo : lo+b]
	batch := Batch{X: t.images[lo*d : (lo+b)*d], Labels: labels, Size: b, Classes: t.classes, Step: step, RNG: t.rng}
	if cb := t.c.Callbacks.BeforeStep; cb != nil {
		if err := call("BeforeStep", func() error { return cb(t.stepInfo(0, 0, false), batch) }); err != nil {
			return nil, err
		}
	}
	if err := feedModel(t.m, batch, t.onehot, t.eng.set); err != nil {
		return nil, err
	}
	return labels, nil
}

// feedModel puts batch b into m's inputs by set: Feed's, or Input's and
// the one-hot Labels' (onehot their buffer).
func feedModel(m *Model, b Batch, onehot []float32, set func(*G.Node, any) error) error {
	if m.Feed != nil {
		if err := m.Feed(b, set); err != nil {
			return fmt.Errorf("training: Model.Feed: %w", err)
		}
		return nil
	}
	if err := setX(m.Input, b.X, set); err != nil {
		return err
	}
	if m.Labels == nil {
		return nil
	}
	clear(onehot)
	if err := nn.OneHot(onehot[:b.Size*b.Classes], b.Labels[:b.Size], b.Classes); err != nil {
		return fmt.Errorf("training: %w", err)
	}
	return setX(m.Labels, onehot, set)
}

// setX sets input n to x, converted to float64 for a float64 node.
func setX(n *G.Node, x []float32, set func(*G.Node, any) error) error {
	if n.Dtype() == tensor.Float64 {
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(v)
		}
		return set(n, y)
	}
	return set(n, x)
}

// call runs the callback f named what, turning a panic into an error.
func call(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("training: callback %s panicked: %v", what, r)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("training: callback %s: %w", what, err)
	}
	return nil
}

// stepInfo returns where the run stands, with the last batch's loss and
// accuracy.
func (t *Trainer) stepInfo(lv, acc float64, skipped bool) StepInfo {
	return StepInfo{Epoch: t.st.Epoch, Batch: t.st.Batch, Step: t.st.Step, Loss: lv, Accuracy: acc, Skipped: skipped}
}

// Fit trains the remaining epochs (or steps) and writes the metrics. ctx
// cancelled (Ctrl-C, see NotifySignals) stops it at the next step
// boundary on every rank, saving a checkpoint; Fit then returns an
// *InterruptedError.
func (t *Trainer) Fit(ctx context.Context) (Eval, error) {
	if t.done {
		t.finished()
		return t.lastEval(), nil
	}
	return t.run(ctx)
}

func nan() float64 { return math.NaN() }

// Run builds a Trainer of m as c says, fits it under ctx and closes it: a
// whole run in one call. See Fit for ctx.
func Run(ctx context.Context, m Model, c Config) (Eval, error) {
	t, err := New(m, c)
	if err != nil {
		return Eval{}, err
	}
	final, err := t.Fit(ctx)
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	return final, err
}

// ExitCode is a command's exit status for a run's error: 0, 2 for a
// setting that cannot train (SettingError), 128 + the signal for an
// interrupted run, else 1.
func ExitCode(err error) int {
	var interrupted *InterruptedError
	var setting *SettingError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &interrupted):
		return 128 + int(interrupted.Signal)
	case errors.As(err, &setting):
		return 2
	}
	return 1
}
