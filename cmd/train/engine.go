package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
)

// solver is what a run needs of its optimizer: a step, a schedule's step
// sizes, its state for checkpoints and, in data-parallel training, the
// check that the ranks hold the same weights and what a step all-reduces.
type solver interface {
	Step() error
	checkpoint.Solver
	CheckWeights() error
	Traffic() optim.Traffic
}

// engine runs a model's training graph (forward and backward) and its
// optimizer, and a forward-only copy for evaluation: orthonet's compiled
// program, or Gorgonia's tape machine.
type engine interface {
	// run runs the forward and backward pass of training step step on the
	// batch in the training network's input buffers (and labels, one-hot in
	// yb) and returns the loss and the accuracy (nn.Accuracy's) of the
	// batch.
	run(step int, labels []int) (loss, accuracy float64, err error)
	// drawsMasks reports whether the engine draws the dropout masks itself
	// (for the step run is given); otherwise the caller fills them first.
	drawsMasks() bool
	// solver returns the optimizer of the parameters.
	solver() solver
	// discard drops the gradients of the last run without a step.
	discard()
	// store copies the parameters into their Gorgonia nodes, load the other
	// way (around checkpoints and reads of the node values).
	store() error
	load() error
	// evaluate runs the evaluation network on its input buffer and returns
	// its logits.
	evaluate() ([]float32, error)
	// report writes what the engine measured of its runs, if anything.
	report(w io.Writer)
	close()
}

// engines lists the values of -engine.
var engines = []string{"program", "tape"}

// newEngine builds the engine for the training network net (whose loss is
// loss against the labels node y) and the evaluation network ev.
func newEngine(c config, net *network, loss, y *G.Node, ev *network, totalSteps int) (engine, error) {
	groups, opts := solverGroups(c, totalSteps)
	if c.comm != nil {
		opts.Comm = c.comm
	}
	if c.engine == "tape" {
		return newTapeEngine(net, loss, ev, groups, opts)
	}
	return newProgramEngine(c, net, loss, y, ev, groups, opts)
}

// tapeEngine runs the graphs on Gorgonia's tape machines.
type tapeEngine struct {
	net, ev *network
	loss    *G.Node
	logits  G.Value // copied out by the tape machine on each run (G.Read)
	vm, evm G.VM
	s       *optim.Solver
}

func newTapeEngine(net *network, loss *G.Node, ev *network, groups []optim.Group, opts optim.Options) (*tapeEngine, error) {
	e := &tapeEngine{net: net, ev: ev, loss: loss}
	G.Read(net.logits, &e.logits)
	e.vm = G.NewTapeMachine(net.logits.Graph(), G.BindDualValues(net.Nodes()...))
	if err := models.Share(ev.Nodes(), net.Nodes()); err != nil {
		e.close()
		return nil, err
	}
	e.evm = G.NewTapeMachine(ev.logits.Graph())
	var err error
	if e.s, err = param.NewSolver(net.Params(), groups, opts); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *tapeEngine) drawsMasks() bool { return false }

func (e *tapeEngine) run(_ int, labels []int) (float64, float64, error) {
	e.vm.Reset()
	if err := e.vm.RunAll(); err != nil {
		return 0, 0, err
	}
	acc, err := nn.Accuracy(e.logits.Data().([]float32), labels, e.net.logits.Shape()[1])
	return float64(e.loss.Value().Data().(float32)), acc, err
}

func (e *tapeEngine) solver() solver { return e.s }

// discard clears the gradients: the tape machine adds the next run's to them.
func (e *tapeEngine) discard()     { _ = e.s.ZeroGrad() }
func (e *tapeEngine) store() error { return nil } // the nodes hold the parameters
func (e *tapeEngine) load() error  { return nil }

func (e *tapeEngine) evaluate() ([]float32, error) {
	e.evm.Reset()
	if err := e.evm.RunAll(); err != nil {
		return nil, err
	}
	return e.ev.logits.Value().Data().([]float32), nil
}

func (e *tapeEngine) report(io.Writer) {}

func (e *tapeEngine) close() {
	if e.vm != nil {
		e.vm.Close()
	}
	if e.evm != nil {
		e.evm.Close()
	}
}

// factorFor returns program.Config.FactorForRSDM for the run: the r of a
// rule that steps factored gradients (RSDM's submanifold size), or 0 for
// one that needs the formed gradients (RGD).
func factorFor(c config) int {
	f, ok := c.rule.(optim.FactoredRule)
	if !ok || c.device != "cpu" { // the device's RSDM takes whole gradients
		return 0
	}
	if r, ok := f.FactorsGradients(); ok {
		return r
	}
	return 0
}

// dropoutSeed keys the program's dropout masks: the run's seed, and for
// data-parallel training the rank, so that each rank's rows get masks of
// their own (rank 0's are those of one process).
func dropoutSeed(c config) uint64 {
	return c.seed ^ 0x64726f706f7574 ^ uint64(c.rank())<<56 // "dropout"
}

// programEngine runs the graphs as compiled programs on the CPU backend or,
// with -device cuda, on the GPU, the optimizer stepping there too.
type programEngine struct {
	be          backend.Backend
	prog, eprog *program.Program
	s           *optim.Solver
	net, ev     *network
	loss        *G.Node
	// The inputs, each converted to an interface once so that setting
	// them does not allocate.
	inputs      []*G.Node
	inputData   []any
	lossHost    []float32
	lossAny     any
	evLogits    []float32
	evLogitsAny any
	evInputAny  any
	// With -kernel-profile on a backend that counts its launches, copies
	// and waits (backend.Counter): their totals over the forward and
	// backward passes (with the reads of run) and over the optimizer's
	// steps, and how many of each.
	counter        backend.Counter
	runCounts      backend.Counts
	stepCounts     backend.Counts
	runs, stepRuns int
}

// countedSolver is the programEngine's Solver when it counts the device's
// work of each optimizer step.
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

func newProgramEngine(c config, net *network, loss, y *G.Node, ev *network, groups []optim.Group, opts optim.Options) (*programEngine, error) {
	e := &programEngine{net: net, ev: ev, loss: loss}
	var err error
	if e.be, err = newBackend(c); err != nil {
		return nil, err
	}
	inputs := []*G.Node{net.x, y}
	var drop []program.Dropout
	for _, m := range net.masks() {
		drop = append(drop, program.Dropout{Node: m, P: net.vit.Drop.P})
	}
	e.prog, err = program.Compile(net.logits.Graph(), program.Config{Backend: e.be, Outputs: []*G.Node{loss, net.logits},
		Params: net.Params(), Inputs: inputs, FactorForRSDM: factorFor(c), Profile: c.kernelProfile,
		Dropout: drop, DropoutSeed: dropoutSeed(c), Accuracy: program.Accuracy{Logits: net.logits, Targets: y}})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("compiling the training graph: %w", err)
	}
	if err = e.compileEval(ev, e.prog); err != nil {
		e.close()
		return nil, err
	}
	if e.s, err = program.NewSolver(e.prog, groups, opts); err != nil {
		e.close()
		return nil, err
	}
	e.inputs = inputs
	for _, n := range inputs {
		e.inputData = append(e.inputData, n.Value().Data())
	}
	e.lossHost = make([]float32, 1)
	e.lossAny = e.lossHost
	if c.kernelProfile {
		e.counter, _ = e.be.(backend.Counter)
	}
	return e, nil
}

// newBackend returns the backend of -device: the GPU's, or the CPU's.
func newBackend(c config) (backend.Backend, error) {
	if c.device == "cuda" {
		return cudabackend.New(cudabackend.Options{Profile: c.kernelProfile})
	}
	return cpu.New(cpu.Options{Threads: c.blasShare}), nil
}

// compileEval compiles the forward pass of the evaluation network ev on
// e's backend, its parameters those of the training program share (nil:
// ev's own values, as constants).
func (e *programEngine) compileEval(ev *network, share *program.Program) error {
	var err error
	e.eprog, err = program.Compile(ev.logits.Graph(), program.Config{Backend: e.be, Outputs: []*G.Node{ev.logits},
		Params: ev.Params(), NoGrad: true, Inputs: []*G.Node{ev.x}, Share: share})
	if err != nil {
		return fmt.Errorf("compiling the evaluation graph: %w", err)
	}
	e.ev = ev
	e.evLogits = make([]float32, tensor.Shape(ev.logits.Shape()).TotalSize())
	e.evLogitsAny = e.evLogits
	e.evInputAny = ev.xb
	return nil
}

// drawsMasks reports true: the program draws the masks on its backend
// (program.Config.Dropout), keyed by the seed and the step.
func (e *programEngine) drawsMasks() bool { return true }

// run reads, in one wait on a device, the loss, the count of correct
// predictions (the program counts them where the logits live) and the
// gradients' finite flags, which the Solver's next Step checks: a step
// waits for the device once.
func (e *programEngine) run(step int, labels []int) (float64, float64, error) {
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
	for i, n := range e.inputs {
		if err := e.prog.SetInput(n, e.inputData[i]); err != nil {
			return 0, 0, err
		}
	}
	if err := e.prog.Run(); err != nil {
		return 0, 0, err
	}
	correct, err := e.prog.Collect(program.Read{Node: e.loss, Dst: e.lossAny})
	if err != nil {
		return 0, 0, err
	}
	return float64(e.lossHost[0]), float64(correct) / float64(len(labels)), nil
}

func (e *programEngine) solver() solver {
	if e.counter != nil {
		return countedSolver{e.s, e}
	}
	return e.s
}

// discard does nothing: a program writes its gradients afresh each run.
func (e *programEngine) discard()     {}
func (e *programEngine) store() error { return e.prog.StoreParams() }
func (e *programEngine) load() error  { return e.prog.LoadParams() }

func (e *programEngine) evaluate() ([]float32, error) {
	if err := e.eprog.SetInput(e.ev.x, e.evInputAny); err != nil {
		return nil, err
	}
	if err := e.eprog.Run(); err != nil {
		return nil, err
	}
	if err := e.eprog.Read(e.ev.logits, e.evLogitsAny); err != nil {
		return nil, err
	}
	return e.evLogits, nil
}

// report prints the kernel profile of the training program: the kinds of
// kernel that took the most time per step.
func (e *programEngine) report(w io.Writer) {
	prof, runs := e.prog.Profile()
	if runs == 0 {
		return
	}
	e.reportCounts(w)
	if t, ok := e.be.(backend.Timer); ok {
		// On a device the host's times below are the cost of enqueueing.
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

// reportCounts prints the device's launches, copies and waits per
// training step: the forward and backward pass with its reads, and the
// optimizer's step.
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
	fmt.Fprintf(w, "device work per training step: %.4g kernel launches (%.4g forward and backward, %.4g in the optimizer's step); %.4g copies in, %.4g %s for the device\n",
		rl+sl, rl, sl, rc+sc, rw+sw, plural(rw+sw, "wait", "waits"))
}

// plural returns one for n == 1, else many.
func plural(n float64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (e *programEngine) close() {
	if e.s != nil {
		e.s.Close()
	}
	if e.eprog != nil {
		e.eprog.Close()
	}
	if e.prog != nil {
		e.prog.Close()
	}
	e.be.Close()
}

// buildNetworks builds the training network (for one rank's rows of a
// batch) with its loss and labels, and the evaluation network for batches
// of evalBatch test images.
func buildNetworks(c config, train, test *data.Set) (net *network, loss, y *G.Node, yb []float32, ev *network, err error) {
	rng := rand.New(rand.NewPCG(c.seed, 0x747261696e))
	g := G.NewGraph()
	b := c.shard() // each rank's rows of the global batch
	if net, err = buildNet(c, g, b, train, true, rng); err != nil {
		return
	}
	yb = make([]float32, b*train.Classes)
	y = G.NewMatrix(g, tensor.Float32, G.WithShape(b, train.Classes), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(b, train.Classes), tensor.WithBacking(yb))))
	if loss, err = nn.CrossEntropy(net.logits, y); err != nil {
		return
	}
	if _, err = G.Grad(loss, net.Nodes()...); err != nil {
		err = fmt.Errorf("building gradients: %w", err)
		return
	}
	if test.N == 0 {
		err = fmt.Errorf("the test set is empty")
		return
	}
	ev, err = buildNet(c, G.NewGraph(), evalBatch(c, test), test, false, rand.New(rand.NewPCG(0, 0)))
	return
}

// evalBatch is how many test images one evaluation run takes.
func evalBatch(c config, test *data.Set) int {
	if c.model == "vit" {
		return min(100, test.N)
	}
	return min(500, test.N)
}
