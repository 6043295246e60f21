package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// interruptedError reports a run stopped by a signal at a step boundary.
type interruptedError struct {
	signal      syscall.Signal // SIGINT or SIGTERM: the command exits 128 + its number
	epoch, step int
	dir, saved  string
	discarded   bool // the run had taken no step: its new folder was removed
}

func (e *interruptedError) Error() string {
	what := "interrupted"
	if e.signal == syscall.SIGTERM {
		what = "terminated"
	}
	if e.discarded {
		return fmt.Sprintf("%s before the first step; removed the new run folder %s, which held nothing", what, e.dir)
	}
	msg := fmt.Sprintf("%s at epoch %d, step %d; metrics so far are in %s", what, e.epoch+1, e.step, e.dir)
	if e.saved != "" {
		msg += fmt.Sprintf("; saved %s (go on with -resume %s)", e.saved, e.saved)
	}
	return msg
}

// metric is one row of metrics.csv.
type metric struct {
	Kind        string   `json:"kind"` // train or test
	Epoch       int      `json:"epoch"`
	Step        int      `json:"step"`
	Seconds     float64  `json:"seconds"`
	Loss        float64  `json:"loss"`
	Accuracy    float64  `json:"accuracy"`
	Feasibility *float64 `json:"feasibility,omitempty"` // largest ||W^T W - I||_F where measured (test rows)
	Examples    int      `json:"examples,omitempty"`    // test images evaluated (test rows)
	Skipped     int      `json:"skipped,omitempty"`     // batches skipped for a non-finite loss or gradient (train rows)
	// NoLoss marks a training row whose batches were all skipped: it has no
	// loss or accuracy (empty in metrics.csv).
	NoLoss bool `json:"no_loss,omitempty"`
	// TrainSeconds is the training time so far: Seconds without the
	// evaluations and checkpoints (-time-limit and -eval-interval count it).
	TrainSeconds float64 `json:"train_seconds"`
}

// imageSize is the side the paper resizes each data set to: 32 for the ViT,
// and for the FFN 32 (MNIST, 1024 inputs) or 20 (CIFAR-10, 1200 inputs);
// the CNN takes the images as they are (0: 28 for MNIST and Fashion-MNIST,
// 32 for CIFAR-10).
func imageSize(model, dataset string) int {
	switch {
	case model == "cnn":
		return 0
	case model == "ffn" && dataset == "cifar10":
		return 20
	}
	return 32
}

// loadData downloads the data set if asked, reads its training and test
// sets and resizes them to the model's side.
func loadData(ctx context.Context, c config, w io.Writer) (train, test *data.Set, err error) {
	dir := c.dataDir
	if dir == "" {
		dir = data.DefaultDir(c.dataset)
	}
	if c.download {
		fmt.Fprintf(w, "downloading %s into %s\n", c.dataset, dir)
		// The zero Downloader bounds each request (connect, idle, overall)
		// and goes on to the next mirror when one stalls.
		var dl data.Downloader
		if err := dl.Download(ctx, c.dataset, dir); err != nil {
			return nil, nil, err
		}
	}
	// Only the examples -limit-train and -limit-test keep are read.
	if train, test, err = data.LoadSplitFirst(c.dataset, dir, c.limitTrain, c.limitTest); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w (use -data DIR, or -download for mnist and cifar10)", err)
		}
		return nil, nil, err
	}
	train, test = train.Limit(c.limitTrain), test.Limit(c.limitTest)
	side := imageSize(c.model, c.dataset)
	if side == 0 { // the images as they are
		return train, test, nil
	}
	if train, err = train.Resize(side, side, 0); err != nil {
		return nil, nil, err
	}
	if test, err = test.Resize(side, side, 0); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// newRunDir creates a run in a fresh folder under out, never reusing an
// earlier run's; parent is the checkpoint it goes on from, or nil.
func newRunDir(out string, parent *checkpoint.Origin) (*checkpoint.Run, error) {
	base := filepath.Join(out, "run-"+time.Now().Format("20060102-150405"))
	dir := base
	for k := 2; ; k++ {
		r, err := checkpoint.CreateRun(dir, parent)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		dir = fmt.Sprintf("%s-%d", base, k)
	}
}

// solverGroups returns the optimizer's groups for a run of totalSteps
// steps: the orthogonal weights (RSDM, RGD or Riemannian Adam, -lr) and the
// rest (SGD, Adam or AdamW, -lr-other), both scaled by the -schedule.
func solverGroups(c config, totalSteps int) ([]optim.Group, optim.Options) {
	var sched optim.Schedule
	switch c.schedule {
	case "cosine":
		sched = optim.Cosine{Steps: totalSteps}
	case "warmup-cosine":
		sched = optim.WarmupCosine{Warmup: min(c.warmup, max(totalSteps-1, 1)), Steps: max(totalSteps, 2)}
	case "step":
		sched = optim.StepDecay{Every: c.decayEvery, Gamma: 0.5}
	}
	// The flags were checked against optim's names: parsing cannot fail.
	sampling, _ := optim.ParseSampler(c.sampling)
	rule, _ := optim.ParseRule(c.optim, optim.RuleSettings{SubmanifoldSize: c.r, Sampling: sampling, Seed: c.seed, Momentum: c.rgdMomentum})
	other, _ := optim.ParseRule(c.other, optim.RuleSettings{Momentum: c.momentum})
	constrained := optim.Group{Select: optim.Param.Constrained, Rule: rule, LR: c.lr, Schedule: sched}
	rest := optim.Group{Rule: other, LR: c.lrOther, Schedule: sched, WeightDecay: c.weightDecay}
	return []optim.Group{constrained, rest}, optim.Options{ClipNorm: c.clipNorm}
}

// progress is where a run stands: everything of the next step that is not
// in the weights, the optimizer or the configuration.
type progress struct {
	Epoch    int      `json:"epoch"` // epoch in progress, from 0
	Batch    int      `json:"batch"` // batches of it done
	Step     int      `json:"step"`  // steps done in all
	Seconds  float64  `json:"seconds"`
	Dropout  []byte   `json:"dropout_rng"` // the dropout masks' PCG state
	Window   window   `json:"window"`
	Best     float64  `json:"best_accuracy"`
	BestStep int      `json:"best_step"`
	Metrics  []metric `json:"metrics"`
	Skipped  int      `json:"skipped,omitempty"`  // batches skipped in all (-nonfinite skip)
	SkipRun  int      `json:"skip_run,omitempty"` // of them, in a row up to now
	// TrainSeconds is the time spent in training steps, and TimedEvals the
	// evaluations -eval-interval has made.
	TrainSeconds float64 `json:"train_seconds,omitempty"`
	TimedEvals   int     `json:"timed_evals,omitempty"`
}

// window accumulates training loss and accuracy between two log lines.
type window struct {
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"`
	Count    int     `json:"count"`
	Skipped  int     `json:"skipped,omitempty"`
}

// trainer holds a run: data, graphs, optimizer and progress.
type trainer struct {
	c           config
	w           io.Writer
	train, test *data.Set
	net, evNet  *network
	yb          []float32
	eng         engine
	solver      solver
	loader      *data.Loader
	maskSrc     *rand.PCG
	maskRNG     *rand.Rand
	dir         *checkpoint.Run // the run folder; nil for a finished run resumed, and on ranks but 0
	done        bool            // the run resumed has trained all its epochs
	created     bool            // this session created the run folder
	taken       int             // steps this session has taken
	last        string          // newest checkpoint written or loaded
	st          progress
	start       time.Time // of this session
	clock0      float64   // the training clock when this session began
	sync        []float64 // what the ranks agree on each step (distributed.go)

	// Per-session loop state, set by run.
	images     []float32 // the batch being trained on
	labels     []int
	steps      int // batches per epoch
	logEvery   int // steps between training rows of the metrics
	evalEvery  int // steps between mid-epoch evaluations (0: none)
	bar        *progressbar.ProgressBar
	epochStart time.Time // of this session's part of the epoch
	timeUp     bool      // -time-limit reached: the run stops after its evaluation and checkpoint
	firstBatch int       // the epoch's first batch in this session
}

func run(ctx context.Context, c config, w io.Writer) error {
	if err := selectDevice(&c, w); err != nil {
		return err
	}
	t, err := newTrainer(ctx, c, w)
	if err != nil {
		return err
	}
	defer t.close()
	return t.run(ctx)
}

// newTrainer loads the data, builds the model and optimizer, and restores
// c.resumed when the run goes on from a checkpoint. The ranks of a
// data-parallel run first compare their settings, and a resumed run takes
// its run folder's lock, before anything is loaded or written.
func newTrainer(ctx context.Context, c config, w io.Writer) (_ *trainer, err error) {
	if err := agreeSettings(c); err != nil {
		return nil, err
	}
	if err := checkShards(c); err != nil {
		return nil, &usageError{err}
	}
	var held *checkpoint.Run // the folder a resumed run goes on in, locked
	var why string           // why it goes on in a new folder instead
	if c.resumed != nil && c.rank() == 0 {
		held, why, err = resumeFolder(c)
	}
	if err = fromRank0(c, err); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && held != nil {
			held.Close()
		}
	}()
	train, test, err := loadData(ctx, c, w)
	if err != nil {
		return nil, err
	}
	if err := agreeData(c, train, test); err != nil {
		return nil, err
	}
	if train.N < c.batch {
		return nil, fmt.Errorf("%d training examples, fewer than one batch of %d", train.N, c.batch)
	}
	t := &trainer{c: c, w: w, train: train, test: test, sync: make([]float64, 2)}
	t.maskSrc = rand.NewPCG(c.seed, 0x64726f70)
	t.maskRNG = rand.New(t.maskSrc)
	net, loss, y, yb, ev, err := buildNetworks(c, train, test)
	if err != nil {
		return nil, err
	}
	t.net, t.yb, t.evNet = net, yb, ev
	if err := checkR(c, net.Constrained()); err != nil {
		return nil, &usageError{err}
	}
	t.eng, err = newEngine(c, net, loss, y, ev, c.epochs*(train.N/c.batch))
	if errors.Is(err, optim.ErrNotOnDevice) && c.asked == "auto" { // -clip-norm, -sampling orth, -optim radam
		fmt.Fprintf(w, "train: device cpu instead: %v; -device auto trains on the CPU what the device's optimizer does not run\n", err)
		c.device, t.c.device = "cpu", "cpu"
		t.eng, err = newEngine(c, net, loss, y, ev, c.epochs*(train.N/c.batch))
	}
	if err != nil {
		switch {
		case errors.Is(err, optim.ErrNotDistributed): // -clip-norm, -sampling orth with -dist mpi
			return nil, &usageError{fmt.Errorf("-dist %s: %w", c.dist, err)}
		case errors.Is(err, optim.ErrNotOnDevice):
			return nil, &usageError{fmt.Errorf("-device %s: %w (-device cpu or auto trains with it)", c.device, err)}
		}
		return nil, err
	}
	t.solver = t.eng.solver()
	if t.loader, err = data.NewLoader(train, c.batch, c.seed); err != nil {
		t.close()
		return nil, err
	}
	if c.resumed != nil {
		t.last = c.resume
		if err = t.restore(c.resumed); err == nil && t.st.Epoch < c.epochs && t.writes() {
			t.dir, t.created, err = resumeRun(c, held, why, t.st.Step, w)
		}
		t.done = t.st.Epoch >= c.epochs
	} else if t.writes() {
		t.dir, err = newRunDir(c.out, nil)
		t.created = true
	}
	if err == nil && c.comm != nil {
		// The same seeds (or checkpoint) must have given every rank the
		// same weights; the run folder's fate is rank 0's.
		if err = t.solver.CheckWeights(); err == nil {
			err = t.syncCreated()
		}
	}
	if err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// close frees the engine and releases the run folder.
func (t *trainer) close() {
	t.eng.close()
	if t.dir != nil {
		t.dir.Close()
	}
}

func (t *trainer) seconds() float64 { return t.st.Seconds + time.Since(t.start).Seconds() }

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

// checkR refuses an RSDM submanifold size r above the rows of any
// orthogonal weight (of an n x p weight, max(n, p): one with fewer rows
// than columns is stepped as its transpose; a convolution kernel is the
// matrix of its first axis by the rest), naming the first such weight and
// the largest r the network takes.
func checkR(c config, weights G.Nodes) error {
	if c.optim != "rsdm" || len(weights) == 0 {
		return nil
	}
	rows := func(n *G.Node) int { // of the matrix view (optim.MatrixOf)
		r, c, _ := optim.MatrixOf(n.Shape())
		return max(r, c)
	}
	smallest := weights[0]
	for _, n := range weights {
		if rows(n) < rows(smallest) {
			smallest = n
		}
	}
	for _, n := range weights {
		if c.r > rows(n) {
			return fmt.Errorf("-r %d: RSDM's submanifold size exceeds the %d rows of weight %q (this network takes 2 <= r <= %d, the rows of %q)",
				c.r, rows(n), n.Name(), rows(smallest), smallest.Name())
		}
	}
	return nil
}

// interrupted ends a run stopped by a signal (ctx's cause): it saves a
// checkpoint and the metrics, or, when this session created the run folder
// and has taken no step, removes the folder, which holds nothing to go on
// from.
func (t *trainer) interrupted(ctx context.Context) error {
	sig := syscall.SIGINT
	if ctx.Err() != nil {
		sig = signalOf(ctx)
	}
	if t.created && t.taken == 0 {
		if !t.writes() {
			return &interruptedError{signal: sig, discarded: true}
		}
		err := t.dir.Discard()
		if err == nil {
			return &interruptedError{signal: sig, dir: t.dir.Dir(), discarded: true}
		}
		if t.c.ranks() > 1 { // the other ranks do not save either: no checkpoint
			fmt.Fprintln(t.w, "warning: removing the new run folder:", err)
			return &interruptedError{signal: sig, epoch: t.st.Epoch, step: t.st.Step, dir: t.dir.Dir()}
		}
	}
	saved := ""
	if err := t.save(false); err != nil {
		fmt.Fprintln(t.w, "warning: saving a checkpoint:", err)
	} else {
		saved = t.last
	}
	writeOutputs(t.dir, t.st.Metrics, t.w)
	return &interruptedError{signal: sig, epoch: t.st.Epoch, step: t.st.Step, dir: t.dirName(), saved: saved}
}

// run trains the remaining epochs and prints the summary.
func (t *trainer) run(ctx context.Context) error {
	if t.done {
		t.finished()
		return nil
	}
	c := t.c
	t.steps = t.train.N / c.batch // the last partial batch is dropped
	t.logEvery = max(1, t.steps/100)
	t.evalEvery = c.evalEvery
	if t.evalEvery == 0 { // auto: ten evaluations an epoch, so that the accuracy panel is a curve
		t.evalEvery = max(1, t.steps/10)
	}
	t.images = make([]float32, c.batch*t.train.Dim())
	t.labels = make([]int, c.batch)
	t.announce()
	t.start, t.clock0 = time.Now(), t.st.TrainSeconds
	var final metric
	if n := len(t.st.Metrics); n > 0 && t.st.Metrics[n-1].Kind == "test" {
		final = t.st.Metrics[n-1]
	}
	if c.timeLimit > 0 && t.st.TrainSeconds >= c.timeLimit.Seconds() {
		fmt.Fprintf(t.w, "the run has trained %.1f s, its -time-limit of %v: nothing to do; resume with a larger -time-limit to go on\n", t.st.TrainSeconds, c.timeLimit)
		return nil
	}
	for t.st.Epoch < c.epochs && !t.timeUp {
		m, err := t.epoch(ctx)
		if err != nil {
			return err
		}
		final = m
	}
	return t.summary(final)
}

// announce prints what the run trains, how, and where it writes.
func (t *trainer) announce() {
	c := t.c
	verb := "training"
	if c.resumed != nil {
		verb = fmt.Sprintf("resuming from %s at epoch %d, step %d:", c.resume, t.st.Epoch+1, t.st.Step)
	}
	fmt.Fprintf(t.w, "%s %s on %s (%d train, %d test images of %dx%dx%d), %s/%s r=%d lr=%g, %s lr=%g, batch %d, %d epochs, BLAS %s\nrun folder: %s\n",
		verb, c.model, c.dataset, t.train.N, t.test.N, t.train.C, t.train.H, t.train.W, c.optim, c.sampling, c.r, c.lr, c.other, c.lrOther, c.batch, c.epochs, blasName, t.dirName())
	if n := c.ranks(); c.comm != nil {
		fmt.Fprintf(t.w, "data-parallel: rank 0 of %d, each training on %d rows of every batch of %d\n", n, c.shard(), c.batch)
	}
}

// epoch trains the rest of the current epoch, then evaluates on the whole
// test set and saves a checkpoint; it returns that evaluation.
func (t *trainer) epoch(ctx context.Context) (metric, error) {
	c, epoch := t.c, t.st.Epoch
	if err := t.loader.Seek(epoch, t.st.Batch*c.batch); err != nil {
		return metric{}, err
	}
	if t.st.Batch == 0 {
		t.st.Window = window{}
	}
	t.bar = nil
	// Under mpirun a rank's stdout is a pseudo-terminal even where
	// mpirun's own output goes to a file: several ranks print plain lines.
	if t.c.ranks() == 1 && term.IsTerminal(int(os.Stdout.Fd())) {
		t.bar = progressbar.NewOptions(t.steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30),
			progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", epoch+1, c.epochs)))
		_ = t.bar.Set(t.st.Batch)
	}
	t.epochStart, t.firstBatch = time.Now(), t.st.Batch
	for t.st.Batch < t.steps {
		stop, err := t.anyRank(ctx.Err() != nil || (c.stopAfter > 0 && t.st.Step == c.stopAfter))
		if err != nil {
			return metric{}, err
		}
		if stop {
			return metric{}, t.interrupted(ctx)
		}
		t0 := time.Now()
		lv, acc, bad, err := t.step(epoch)
		t.st.TrainSeconds += time.Since(t0).Seconds()
		if err != nil && (bad == nil || c.nonFinite != "skip") {
			return metric{}, err
		}
		if err := t.syncClock(); err != nil {
			return metric{}, err
		}
		t.st.Batch++
		t.st.Step++
		t.taken++
		t.tally(epoch, lv, acc, bad)
		if err != nil { // -nonfinite skip: too many batches in a row
			writeOutputs(t.dir, t.st.Metrics, t.w)
			return metric{}, err
		}
		if t.bar != nil {
			_ = t.bar.Add(1)
		}
		if err := t.midEpoch(); err != nil {
			return metric{}, err
		}
		if m, stop, err := t.timed(epoch); err != nil || stop {
			if t.bar != nil {
				_ = t.bar.Finish()
				fmt.Fprintln(os.Stderr)
			}
			return m, err
		}
	}
	if t.bar != nil {
		_ = t.bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	// Every epoch ends with an evaluation on the whole test set, unless
	// -eval-interval has just made it.
	var m metric
	var err error
	if n := len(t.st.Metrics); n > 0 && t.st.Metrics[n-1].Kind == "test" && t.st.Metrics[n-1].Step == t.st.Step && t.st.Metrics[n-1].Examples == t.test.N {
		m = t.st.Metrics[n-1]
	} else if m, err = t.evaluate(epoch); err != nil {
		return m, err
	}
	best := t.noteBest(m)
	t.st.Epoch, t.st.Batch = epoch+1, 0
	return m, t.save(best)
}

// timed makes the evaluations that -eval-interval asks for at this much
// training time and, once -time-limit is reached, evaluates, saves a
// checkpoint and reports stop with that evaluation.
func (t *trainer) timed(epoch int) (m metric, stop bool, err error) {
	c := t.c
	due := false
	if iv := c.evalInterval.Seconds(); iv > 0 {
		for t.st.TrainSeconds >= float64(t.st.TimedEvals+1)*iv {
			t.st.TimedEvals++
			due = true
		}
	}
	up := c.timeLimit > 0 && t.st.TrainSeconds >= c.timeLimit.Seconds()
	if !due && !up {
		return metric{}, false, nil
	}
	if m, err = t.evaluate(epoch); err != nil {
		return m, false, err
	}
	best := t.noteBest(m)
	if !up {
		if best {
			return m, false, t.save(true)
		}
		return m, false, nil
	}
	t.timeUp = true
	fmt.Fprintf(t.w, "time limit: %v of training reached at epoch %d, step %d\n", c.timeLimit, epoch+1, t.st.Step)
	return m, true, t.save(best)
}

// step trains on the next batch: it returns the training loss and accuracy
// of the batch, or in bad why the step was not taken (a non-finite loss or
// gradient that -nonfinite skip drops). err ends the run.
func (t *trainer) step(epoch int) (lv, acc float64, bad, err error) {
	c := t.c
	n, err := t.loader.Next(t.images, t.labels)
	if err != nil {
		return 0, 0, nil, err
	}
	if n < c.batch {
		return 0, 0, nil, fmt.Errorf("epoch %d: batch %d holds %d examples, want %d", epoch+1, t.st.Batch, n, c.batch)
	}
	if c.nanSteps[t.st.Step] {
		t.images[0] = float32(math.NaN())
	}
	t.fault()
	// This rank's rows of the global batch: [r b, (r+1) b).
	b, d := c.shard(), t.train.Dim()
	lo := c.rank() * b
	labels := t.labels[lo : lo+b]
	t.net.fill(t.images[lo*d:(lo+b)*d], b)
	if t.net.vit != nil && !t.eng.drawsMasks() {
		t.net.vit.FillMasks(t.maskRNG)
	}
	if err := nn.OneHot(t.yb, labels, t.train.Classes); err != nil {
		return 0, 0, nil, err
	}
	lv, acc, err = t.eng.run(t.st.Step, labels)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("step %d: %w", t.st.Step, err)
	}
	// Every rank sees the global batch's loss, so all skip or step alike.
	if lv, acc, err = t.batchMean(lv, acc); err != nil {
		return 0, 0, nil, err
	}
	if math.IsNaN(lv) || math.IsInf(lv, 0) {
		bad = fmt.Errorf("the training loss is %v", lv)
		t.eng.discard()
	} else if err := t.solver.Step(); errors.Is(err, optim.ErrNotFinite) {
		bad = err // on every rank: the Solver fails a step on all ranks together
	} else if err != nil {
		return 0, 0, nil, fmt.Errorf("step %d: %w", t.st.Step, err)
	}
	if bad != nil {
		return lv, 0, bad, t.skip(bad, epoch)
	}
	t.st.SkipRun = 0
	return lv, acc, nil, nil
}

// tally adds a step to the training window and, every logEvery steps,
// writes the window's means as a training row of the metrics and on the
// progress bar (or, without a terminal, as a line ten times an epoch).
func (t *trainer) tally(epoch int, lv, acc float64, bad error) {
	win := &t.st.Window
	if bad != nil {
		win.Skipped++
	} else {
		win.Loss += lv
		win.Accuracy += acc
		win.Count++
	}
	// A skipped batch is recorded in the row of its own step when that
	// step writes one, else in the next row; the epoch's last step writes
	// the skips of its window, so that none is lost.
	due := t.st.Step%t.logEvery == 0 || (win.Skipped > 0 && (t.st.Batch == t.steps || t.st.SkipRun >= maxSkipRun))
	if !due || win.Count+win.Skipped == 0 {
		return
	}
	m := metric{Kind: "train", Epoch: epoch + 1, Step: t.st.Step, Seconds: t.seconds(), Skipped: win.Skipped, TrainSeconds: t.st.TrainSeconds}
	if win.Count == 0 {
		m.NoLoss = true // every batch of the row was skipped
		t.st.Metrics = append(t.st.Metrics, m)
		*win = window{}
		return
	}
	m.Loss, m.Accuracy = win.Loss/float64(win.Count), win.Accuracy/float64(win.Count)
	t.st.Metrics = append(t.st.Metrics, m)
	rate := float64((t.st.Batch-t.firstBatch)*t.c.batch) / time.Since(t.epochStart).Seconds()
	desc := fmt.Sprintf("epoch %d/%d loss %.4f acc %.1f%% %.0f samples/s", epoch+1, t.c.epochs, win.Loss/float64(win.Count), 100*win.Accuracy/float64(win.Count), rate)
	if t.bar != nil {
		t.bar.Describe(desc)
	} else if t.st.Step%max(1, t.steps/10) < t.logEvery {
		fmt.Fprintf(t.w, "%s (step %d/%d)\n", desc, t.st.Step, t.c.epochs*t.steps) // steps of the run, as metrics.csv counts them
	}
	*win = window{}
}

// midEpoch evaluates on the test subset every evalEvery steps and saves a
// checkpoint every -save-every steps, except after an epoch's last batch,
// which the epoch's end evaluates and saves.
func (t *trainer) midEpoch() error {
	if t.st.Batch >= t.steps {
		return nil
	}
	save := t.c.saveEvery > 0 && t.st.Step%t.c.saveEvery == 0
	if t.evalEvery > 0 && t.st.Step%t.evalEvery == 0 {
		_, err := t.evaluateAndSave(save)
		return err
	}
	if save {
		return t.save(false)
	}
	return nil
}

// summary writes the metrics files and prints the run's outcome: the final
// test accuracy, skipped batches, feasibility and the last checkpoint; it
// fails when the accuracy is below -min-accuracy.
func (t *trainer) summary(final metric) error {
	c, w := t.c, t.w
	writeOutputs(t.dir, t.st.Metrics, w)
	t.eng.report(w)
	t.trafficLine(w)
	if t.st.Skipped > 0 {
		fmt.Fprintf(w, "skipped %d batches with a non-finite loss or gradient (-nonfinite skip)\n", t.st.Skipped)
	}
	fmt.Fprintf(w, "test accuracy: %.2f%%\n", 100*final.Accuracy)
	for _, p := range param.Constrained(t.net.Params()) {
		fmt.Fprintf(w, "||W^T W - I||_F of %s: %.2e\n", p.Name(), feasibility(p))
	}
	fmt.Fprintf(w, "checkpoint: %s\n", t.last)
	if c.minAccuracy > 0 && 100*final.Accuracy < c.minAccuracy {
		return shared("test accuracy %.2f%% is below -min-accuracy %.2f%%", 100*final.Accuracy, c.minAccuracy)
	}
	return nil
}

// maxSkipRun is how many batches in a row -nonfinite skip drops before it
// stops the run.
const maxSkipRun = 10

// skip handles a step whose loss or gradient was not finite (why): with
// -nonfinite stop it ends the run, with skip it counts the batch, which
// moved nothing, and goes on unless maxSkipRun batches in a row were
// skipped.
func (t *trainer) skip(why error, epoch int) error {
	// Steps are named as metrics.csv counts them: the n-th step is step n.
	where := fmt.Sprintf("epoch %d, step %d", epoch+1, t.st.Step+1)
	if t.c.nonFinite == "stop" {
		writeOutputs(t.dir, t.st.Metrics, t.w)
		msg := fmt.Sprintf("%s: %v; stopping rather than training on garbage (try a smaller -lr or -lr-other, or -nonfinite skip to drop such batches)", where, why)
		if t.last != "" {
			msg += "; the last checkpoint is " + t.last
		}
		return shared("%s", msg)
	}
	t.st.Skipped++
	t.st.SkipRun++
	fmt.Fprintf(t.w, "%s: %v; skipping the batch (nothing was updated)\n", where, why)
	if t.st.SkipRun >= maxSkipRun {
		return shared("%s: %d batches in a row had a non-finite loss or gradient; stopping (try a smaller -lr or -lr-other)", where, t.st.SkipRun)
	}
	return nil
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

// writeOutputs writes metrics.csv and metrics.png into the run folder,
// each replaced atomically; a failure is a warning on w. Without a run
// folder (the ranks but 0 of data-parallel training) it writes nothing.
func writeOutputs(run *checkpoint.Run, metrics []metric, w io.Writer) {
	if run == nil {
		return
	}
	if err := run.WriteFile("metrics.csv", func(f io.Writer) error { return writeCSV(f, metrics) }); err != nil {
		fmt.Fprintln(w, "warning: writing metrics:", err)
	}
	if err := run.WriteFile("metrics.png", func(f io.Writer) error { return plotMetrics(f, metrics) }); err != nil {
		fmt.Fprintln(w, "warning: plotting metrics:", err)
	}
	fmt.Fprintf(w, "metrics: %s, %s\n", filepath.Join(run.Dir(), "metrics.csv"), filepath.Join(run.Dir(), "metrics.png"))
}

// writeCSV writes metrics as CSV; max_feasibility is empty where it was not
// measured.
func writeCSV(f io.Writer, metrics []metric) error {
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"kind", "epoch", "step", "seconds", "loss", "accuracy", "max_feasibility", "test_examples", "skipped", "train_seconds"})
	for _, m := range metrics {
		feas := ""
		if m.Feasibility != nil {
			feas = strconv.FormatFloat(*m.Feasibility, 'g', 3, 64)
		}
		examples, skipped := "", ""
		if m.Kind == "test" && m.Examples > 0 {
			examples = strconv.Itoa(m.Examples)
		}
		if m.Kind == "train" {
			skipped = strconv.Itoa(m.Skipped)
		}
		loss, acc := strconv.FormatFloat(m.Loss, 'g', 6, 64), strconv.FormatFloat(m.Accuracy, 'g', 6, 64)
		if m.NoLoss {
			loss, acc = "", ""
		}
		_ = cw.Write([]string{m.Kind, strconv.Itoa(m.Epoch), strconv.Itoa(m.Step), strconv.FormatFloat(m.Seconds, 'f', 3, 64),
			loss, acc, feas, examples, skipped,
			strconv.FormatFloat(m.TrainSeconds, 'f', 3, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// shared returns the error of format and a, made by every rank of a
// data-parallel run at the same step (sameOnEveryRank).
func shared(format string, a ...any) error {
	return &sharedError{fmt.Errorf(format, a...)}
}

// dirName returns the run folder's path, or "" on a rank that writes none.
func (t *trainer) dirName() string {
	if t.dir == nil {
		return ""
	}
	return t.dir.Dir()
}
