package training

import (
	"errors"
	"fmt"
	"io"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
	"github.com/orthonet/orthonet/program"
)

// solver is what a run needs of its optimizer: a step, its state for
// checkpoints and, in data-parallel training, the check that the ranks hold
// the same weights and what a step all-reduces.
type solver interface {
	Step() error
	checkpoint.Solver
	CheckWeights() error
	Traffic() optim.Traffic
}

// engine runs a model's training graph (forward and backward) with its
// optimizer, and its evaluation graph: orthonet's compiled program, or
// Gorgonia's tape machine.
type engine interface {
	forward
	// set puts data into the training graph's input n.
	set(n *G.Node, data any) error
	// run runs the forward and backward pass of training step step on the
	// inputs set and returns the loss and, with logits, the number of
	// correct predictions among labels (or -1 where the engine does not
	// count them).
	run(step int) (loss float64, correct int, err error)
	// trainLogits copies the training graph's logits of the last run.
	trainLogits() ([]float32, error)
	solver() solver
	// discard drops the gradients of the last run without a step.
	discard()
	// store copies the parameters into their Gorgonia nodes, load the other
	// way (around checkpoints and reads of the node values).
	store() error
	load() error
	// compiled returns the program checkpoints load into, nil for the tape.
	compiled() checkpoint.Program
	report(w io.Writer)
	close()
}

// forward runs an evaluation graph: what evaluating needs of an engine.
type forward interface {
	// evalSet puts data into the evaluation graph's input n.
	evalSet(n *G.Node, data any) error
	// evaluate runs the evaluation graph on its inputs and returns its
	// logits (nil without) and loss (NaN without).
	evaluate() (logits []float32, loss float64, err error)
}

// newBackend returns the backend of device, cuda or cpu (with threads);
// profile times the GPU's kernels.
func newBackend(device string, threads int, profile bool) (backend.Backend, error) {
	if device == "cuda" {
		return cudabackend.New(cudabackend.Options{Profile: profile})
	}
	return cpu.New(cpu.Options{Threads: threads}), nil
}

// inputsOf returns the input nodes of m.
func inputsOf(m *Model) []*G.Node {
	if m.Feed != nil {
		return m.Inputs
	}
	if m.Labels != nil {
		return []*G.Node{m.Input, m.Labels}
	}
	return []*G.Node{m.Input}
}

// programEngine runs the graphs as compiled programs on the CPU backend or
// a GPU, the optimizer stepping there too.
type programEngine struct {
	be       backend.Backend
	prog     *program.Program
	eval     *evalProgram
	s        *optim.Solver
	m        *Model
	lossHost []float32
	lossAny  any
	counts   bool // the program counts correct predictions
	logits   []float32
	// With KernelProfile on a backend that counts its launches, copies and
	// waits: their totals over the runs and the optimizer's steps.
	counter        backend.Counter
	runCounts      backend.Counts
	stepCounts     backend.Counts
	runs, stepRuns int
}

// countedSolver is the Solver when the engine counts the device's work of
// each optimizer step.
type countedSolver struct {
	*optim.Solver
	e *programEngine
}

// Step steps the Solver and counts what it made the device do.
func (s countedSolver) Step() error {
	before := s.e.counter.Counts()
	err := s.Solver.Step()
	s.e.stepCounts = s.e.stepCounts.Add(s.e.counter.Counts().Sub(before))
	s.e.stepRuns++
	return err
}

func newProgramEngine(c *Config, m, ev *Model) (*programEngine, error) {
	e := &programEngine{m: m}
	var err error
	if e.be, err = newBackend(c.Device, c.Threads, c.KernelProfile); err != nil {
		return nil, err
	}
	outputs := []*G.Node{m.Loss}
	cfg := program.Config{Backend: e.be, Params: m.Params, Inputs: inputsOf(m), Groups: c.Groups,
		Profile: c.KernelProfile, Dropout: m.Dropout, DropoutSeed: dropoutSeed(c), MaxBytes: c.MaxBytes}
	if m.Logits != nil {
		outputs = append(outputs, m.Logits)
		if m.Labels != nil {
			cfg.Accuracy = program.Accuracy{Logits: m.Logits, Targets: m.Labels}
			e.counts = true
		} else {
			e.logits = make([]float32, tensor.Shape(m.Logits.Shape()).TotalSize())
		}
	}
	cfg.Outputs = outputs
	if e.prog, err = program.Compile(m.Loss.Graph(), cfg); err != nil {
		e.close()
		return nil, fmt.Errorf("training: compiling the training graph: %w", err)
	}
	if e.eval, err = compileEval(e.be, ev, e.prog, c.MaxBytes); err != nil {
		e.close()
		return nil, err
	}
	opts := c.Options
	if c.Comm != nil {
		opts.Comm = c.Comm
	}
	if e.s, err = program.NewSolver(e.prog, c.Groups, opts); err != nil {
		e.close()
		return nil, err
	}
	e.lossHost = make([]float32, 1)
	e.lossAny = e.lossHost
	if c.KernelProfile {
		e.counter, _ = e.be.(backend.Counter)
	}
	return e, nil
}

// dropoutSeed keys the program's dropout masks and random nodes: the
// run's seed and, in data-parallel training, the rank, so that each rank's
// rows get masks of their own (rank 0's are those of one process).
func dropoutSeed(c *Config) uint64 {
	return c.Seed ^ 0x64726f706f7574 ^ uint64(c.rank())<<56 // "dropout"
}

// evalProgram is the forward pass of an evaluation model compiled on its
// own (NoGrad, EvalMode), with buffers for its logits and loss.
type evalProgram struct {
	prog   *program.Program
	ev     *Model
	logits []float32
	loss   []float32
}

// compileEval compiles the forward pass of ev on be, its parameters those
// of share where share is not nil (the training program's), within
// maxBytes (program.Config.MaxBytes).
func compileEval(be backend.Backend, ev *Model, share *program.Program, maxBytes int64) (*evalProgram, error) {
	p := &evalProgram{ev: ev}
	outputs := []*G.Node{}
	if ev.Logits != nil {
		outputs = append(outputs, ev.Logits)
		p.logits = make([]float32, tensor.Shape(ev.Logits.Shape()).TotalSize())
	}
	if ev.Loss != nil {
		outputs = append(outputs, ev.Loss)
		p.loss = make([]float32, 1)
	}
	var err error
	p.prog, err = program.Compile(graphOf(ev), program.Config{Backend: be, Outputs: outputs,
		Params: ev.Params, NoGrad: true, EvalMode: true, Inputs: inputsOf(ev), Share: share, MaxBytes: maxBytes})
	if err != nil {
		return nil, fmt.Errorf("training: compiling the evaluation graph: %w", err)
	}
	return p, nil
}

func (p *evalProgram) evalSet(n *G.Node, data any) error { return p.prog.SetInput(n, data) }

func (p *evalProgram) evaluate() ([]float32, float64, error) {
	if err := p.prog.Run(); err != nil {
		return nil, 0, err
	}
	loss := nan()
	if p.loss != nil {
		if err := p.prog.Read(p.ev.Loss, p.loss); err != nil {
			return nil, 0, err
		}
		loss = float64(p.loss[0])
	}
	if p.logits != nil {
		if err := p.prog.Read(p.ev.Logits, p.logits); err != nil {
			return nil, 0, err
		}
	}
	return p.logits, loss, nil
}

// graphOf returns the graph of m.
func graphOf(m *Model) *G.ExprGraph {
	if m.Logits != nil {
		return m.Logits.Graph()
	}
	return m.Loss.Graph()
}

// forwardGraph returns the part of the evaluation model m's graph that its
// outputs (Logits, Loss) need: its forward pass, without the gradients
// G.Grad may have added, which a tape machine of the whole graph would
// compute on every run.
func forwardGraph(m *Model) *G.ExprGraph {
	var outs []*G.Node
	for _, n := range []*G.Node{m.Logits, m.Loss} {
		if n != nil {
			outs = append(outs, n)
		}
	}
	return graphOf(m).ExactSubgraphRoots(outs...)
}

// set copies an input in, counting the copy with the run's work where the
// device's work is counted.
func (e *programEngine) set(n *G.Node, data any) error {
	if e.counter == nil {
		return e.prog.SetInput(n, data)
	}
	before := e.counter.Counts()
	err := e.prog.SetInput(n, data)
	e.runCounts = e.runCounts.Add(e.counter.Counts().Sub(before))
	return err
}

func (e *programEngine) evalSet(n *G.Node, data any) error { return e.eval.evalSet(n, data) }

// run reads, in one wait on a device, the loss, the count of correct
// predictions and the gradients' finite flags, which the Solver's next
// Step checks.
func (e *programEngine) run(step int) (float64, int, error) {
	if e.counter != nil {
		before := e.counter.Counts()
		defer func() {
			e.runCounts = e.runCounts.Add(e.counter.Counts().Sub(before))
			e.runs++
		}()
	}
	if err := e.prog.SetStep(step); err != nil {
		return 0, 0, err
	}
	if err := e.prog.Run(); err != nil {
		return 0, 0, err
	}
	correct, err := e.prog.Collect(program.Read{Node: e.m.Loss, Dst: e.lossAny})
	if err != nil {
		return 0, 0, err
	}
	if !e.counts {
		correct = -1
	}
	return float64(e.lossHost[0]), correct, nil
}

func (e *programEngine) trainLogits() ([]float32, error) {
	if e.logits == nil {
		return nil, errors.New("training: the model has no logits")
	}
	return e.logits, e.prog.Read(e.m.Logits, e.logits)
}

func (e *programEngine) solver() solver {
	if e.counter != nil {
		return countedSolver{e.s, e}
	}
	return e.s
}

// discard does nothing: a program writes its gradients afresh each run.
func (e *programEngine) discard()                     {}
func (e *programEngine) store() error                 { return e.prog.StoreParams() }
func (e *programEngine) load() error                  { return e.prog.LoadParams() }
func (e *programEngine) compiled() checkpoint.Program { return e.prog }

func (e *programEngine) evaluate() ([]float32, float64, error) { return e.eval.evaluate() }

// report prints the kernel profile of the training program: the kinds of
// kernel that took the most time per step.
func (e *programEngine) report(w io.Writer) {
	prof, runs := e.prog.Profile()
	if runs == 0 {
		return
	}
	e.reportCounts(w)
	if t, ok := e.be.(backend.Timer); ok {
		e.reportDevice(w, t, runs)
	}
	var total time.Duration
	for _, k := range prof {
		total += k.PerRun
	}
	fmt.Fprintf(w, "kernel profile over %d steps: %.2f ms a step in %d kernels (forward and backward)\n", runs, total.Seconds()*1e3, e.prog.Kernels())
	for i, k := range prof {
		if i == 20 {
			fmt.Fprintf(w, "  ... %d more kinds\n", len(prof)-i)
			break
		}
		fmt.Fprintf(w, "  %7.3f ms %5.1f%% %4dx %s\n", k.PerRun.Seconds()*1e3, 100*k.PerRun.Seconds()/total.Seconds(), k.Count, k.Kernel)
	}
}

// reportDevice prints the device's own kernel times; the host's that
// follow are then the cost of enqueueing.
func (e *programEngine) reportDevice(w io.Writer, t backend.Timer, runs int) {
	kernels, span := t.KernelTimes()
	var busy time.Duration
	for _, k := range kernels {
		busy += k.Total
	}
	if span > 0 {
		fmt.Fprintf(w, "device profile over %d steps: kernels busy %.3f ms a step of the stream's %.3f ms between waits (%.0f%%; the rest is transfers and launch gaps)\n",
			runs, busy.Seconds()*1e3/float64(runs), span.Seconds()*1e3/float64(runs), 100*busy.Seconds()/span.Seconds())
	}
	for i, k := range kernels {
		if i == 20 {
			fmt.Fprintf(w, "  ... %d more kinds\n", len(kernels)-i)
			break
		}
		fmt.Fprintf(w, "  %7.3f ms %5.1f%% %5dx %s\n", k.Total.Seconds()*1e3/float64(runs), 100*k.Total.Seconds()/busy.Seconds(), k.Count, k.Kernel)
	}
	fmt.Fprintln(w, "host time to enqueue each kind of kernel:")
}

// reportCounts prints the device's launches, copies and waits per
// training step.
func (e *programEngine) reportCounts(w io.Writer) {
	if e.counter == nil || e.runs == 0 {
		return
	}
	per := func(c backend.Counts, n int) (float64, float64, float64) {
		if n == 0 {
			return 0, 0, 0
		}
		return float64(c.Launches) / float64(n), float64(c.CopiesIn) / float64(n), float64(c.Waits) / float64(n)
	}
	rl, rc, rw := per(e.runCounts, e.runs)
	sl, sc, sw := per(e.stepCounts, e.stepRuns)
	waits := "waits"
	if rw+sw == 1 {
		waits = "wait"
	}
	fmt.Fprintf(w, "device work per training step: %.4g kernel launches (%.4g forward and backward, %.4g in the optimizer's step); %.4g copies in, %.4g %s for the device\n",
		rl+sl, rl, sl, rc+sc, rw+sw, waits)
}

func (e *programEngine) close() {
	if e.s != nil {
		e.s.Close()
	}
	if e.eval != nil {
		e.eval.prog.Close()
	}
	if e.prog != nil {
		e.prog.Close()
	}
	e.be.Close()
}

// tapeEngine runs the graphs on Gorgonia's tape machines.
type tapeEngine struct {
	m, ev   *Model
	logits  G.Value // copied out by the tape machine on each run (G.Read)
	vm, evm G.VM
	s       *optim.Solver
}

func newTapeEngine(c *Config, m, ev *Model) (*tapeEngine, error) {
	e := &tapeEngine{m: m, ev: ev}
	if m.Logits != nil {
		G.Read(m.Logits, &e.logits)
	}
	if err := checkTape(c, m.Loss.Graph(), "training", param.Nodes(m.Params)); err != nil {
		return nil, err
	}
	if ev != m {
		if err := checkTape(c, graphOf(ev), "evaluation", nil); err != nil {
			return nil, err
		}
	}
	e.vm = G.NewTapeMachine(m.Loss.Graph(), G.BindDualValues(param.Nodes(m.Params)...))
	if ev != m {
		if err := shareNodes(param.Nodes(ev.Params), param.Nodes(m.Params)); err != nil {
			e.close()
			return nil, err
		}
		e.evm = G.NewTapeMachine(forwardGraph(ev), G.EvalMode())
	}
	opts := c.Options
	if c.Comm != nil {
		opts.Comm = c.Comm
	}
	var err error
	if e.s, err = paramopt.NewSolver(m.Params, c.Groups, opts); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// shareNodes makes each node of dst hold the value of the node of src of
// the same name, so that an evaluation graph sees the trained weights.
func shareNodes(dst, src G.Nodes) error {
	byName := map[string]*G.Node{}
	for _, n := range src {
		byName[n.Name()] = n
	}
	for _, n := range dst {
		s, ok := byName[n.Name()]
		if !ok {
			return fmt.Errorf("training: the evaluation model's parameter %q is not a parameter of the training model", n.Name())
		}
		if err := G.Let(n, s.Value()); err != nil {
			return fmt.Errorf("training: sharing %q: %w", n.Name(), err)
		}
	}
	return nil
}

// setNode copies data into the value of input node n.
func setNode(n *G.Node, data any) error {
	v := n.Value()
	if v == nil {
		return fmt.Errorf("training: input %q has no value", n.Name())
	}
	switch dst := v.Data().(type) {
	case []float32:
		src, ok := data.([]float32)
		if !ok || len(src) != len(dst) {
			return fmt.Errorf("training: input %q takes %d float32 values, got %T", n.Name(), len(dst), data)
		}
		copy(dst, src)
	case []float64:
		src, ok := data.([]float64)
		if !ok || len(src) != len(dst) {
			return fmt.Errorf("training: input %q takes %d float64 values, got %T", n.Name(), len(dst), data)
		}
		copy(dst, src)
	default:
		return fmt.Errorf("training: input %q holds %T", n.Name(), v.Data())
	}
	return nil
}

func (e *tapeEngine) set(n *G.Node, data any) error     { return setNode(n, data) }
func (e *tapeEngine) evalSet(n *G.Node, data any) error { return setNode(n, data) }

func (e *tapeEngine) run(int) (float64, int, error) {
	e.vm.Reset()
	if err := e.vm.RunAll(); err != nil {
		return 0, 0, err
	}
	return scalar(e.m.Loss.Value()), -1, nil
}

func (e *tapeEngine) trainLogits() ([]float32, error) {
	if e.logits == nil {
		return nil, errors.New("training: the model has no logits")
	}
	z, ok := e.logits.Data().([]float32)
	if !ok {
		return nil, fmt.Errorf("training: logits of %T, want float32", e.logits.Data())
	}
	return z, nil
}

// scalar returns a scalar value as a float64.
func scalar(v G.Value) float64 {
	switch d := v.Data().(type) {
	case float32:
		return float64(d)
	case float64:
		return d
	case []float32:
		return float64(d[0])
	case []float64:
		return d[0]
	}
	return nan()
}

func (e *tapeEngine) solver() solver { return e.s }

// discard clears the gradients: the tape machine adds the next run's to them.
func (e *tapeEngine) discard()                     { _ = e.s.ZeroGrad() }
func (e *tapeEngine) store() error                 { return nil } // the nodes hold the parameters
func (e *tapeEngine) load() error                  { return nil }
func (e *tapeEngine) compiled() checkpoint.Program { return nil }
func (e *tapeEngine) report(io.Writer)             {}

func (e *tapeEngine) evaluate() ([]float32, float64, error) {
	if e.evm != nil { // an evaluation model of its own
		return tapeForward{e.evm, e.ev}.evaluate()
	}
	e.vm.Reset() // the training graph itself
	if err := e.vm.RunAll(); err != nil {
		return nil, 0, err
	}
	_ = e.s.ZeroGrad() // the run added gradients: drop them
	return tapeOutputs(e.ev)
}

// tapeOutputs returns the logits (nil without) and loss (NaN without) that
// a tape machine's run of ev left in its nodes.
func tapeOutputs(ev *Model) ([]float32, float64, error) {
	loss := nan()
	if ev.Loss != nil && ev.Loss.Value() != nil {
		loss = scalar(ev.Loss.Value())
	}
	if ev.Logits == nil {
		return nil, loss, nil
	}
	z, ok := ev.Logits.Value().Data().([]float32)
	if !ok {
		return nil, 0, fmt.Errorf("training: logits of %T, want float32", ev.Logits.Value().Data())
	}
	return z, loss, nil
}

func (e *tapeEngine) close() {
	if e.vm != nil {
		e.vm.Close()
	}
	if e.evm != nil {
		e.evm.Close()
	}
}

// newEngine builds the engine for m (and its evaluation model ev) that c
// asks for.
func newEngine(c *Config, m, ev *Model) (engine, error) {
	if c.Engine == "tape" {
		if e, err := newTapeEngine(c, m, ev); err == nil {
			return e, nil
		} else {
			return nil, err // no typed nil in the interface
		}
	}
	e, err := newProgramEngine(c, m, ev)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// accuracyOf returns the fraction of the first n rows of logits z whose
// largest score is the label's.
func accuracyOf(z []float32, labels []int, classes int) (float64, error) {
	return nn.Accuracy(z[:len(labels)*classes], labels, classes)
}
