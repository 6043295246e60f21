// Package harness runs a Gorgonia model, built by code that knows nothing of
// orthonet, three ways: on Gorgonia's tape machine, as a compiled program of
// orthonet's, and both trained by optim's Solver with one dense weight on
// the Stiefel manifold. Package gorgoniaex builds Gorgonia's own examples
// against it; Main is the main function of those builds.
package harness

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/pprof"
	"slices"
	"time"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
	"github.com/orthonet/orthonet/program"
)

// Model is what an example's model code gives the harness: its input, its
// output (class probabilities, or scores whose largest is the class) and
// its learnable nodes.
type Model struct {
	X          *G.Node
	Out        *G.Node
	Learnables G.Nodes
	// Probs says Out holds probabilities (a softmax): the loss is then
	// -mean(sum(y log Out)); otherwise Out are logits and the loss is
	// their softmax cross-entropy.
	Probs bool
}

// Example describes an example to the harness.
type Example struct {
	// Name names the example in messages.
	Name string
	// Input is the shape of one input (channels, height, width).
	Input []int
	// Classes is the number of classes of Out.
	Classes int
	// Stiefel names the learnable node put on the Stiefel manifold and
	// stepped by RSDM; every other one is stepped by Adam.
	Stiefel string
	// Build builds the model on g in dt for batches of batch inputs, every
	// dropout layer's probability set to dropout, or the example's own
	// where dropout is negative.
	Build func(g *G.ExprGraph, dt tensor.Dtype, batch int, dropout float64) (*Model, error)
}

// Report is what a run of the harness prints, as JSON.
type Report struct {
	Example string `json:"example"`
	Mode    string `json:"mode"`
	DType   string `json:"dtype,omitempty"`
	Backend string `json:"backend,omitempty"`
	// compare: the largest relative differences of the program from the
	// tape machine.
	Out   float64 `json:"out,omitempty"`
	Loss  float64 `json:"loss,omitempty"`
	Grads float64 `json:"grads,omitempty"`
	// compare: the parameters after Steps steps of the same Solver on the
	// program and on the tape machine (the largest ||a - b|| / ||b|| of a
	// parameter: after steps of Adam an entry whose gradient is near Adam's
	// epsilon may move apart on two machines that round the gradient
	// differently, which the largest entry's difference would report), and
	// the losses along the way.
	Steps       int       `json:"steps,omitempty"`
	Trained     float64   `json:"trained,omitempty"`
	Losses      []float64 `json:"losses,omitempty"`
	Feasibility float64   `json:"feasibility,omitempty"`
	// train: test accuracy and time per batch.
	Accuracy     float64 `json:"accuracy,omitempty"`
	ProgramBatch float64 `json:"program_batch_seconds,omitempty"`
	TapeBatch    float64 `json:"tape_batch_seconds,omitempty"`
	// throughput: steady samples per second.
	SamplesPerSecond float64 `json:"samples_per_second,omitempty"`
	Params           int     `json:"params,omitempty"`
}

// Main runs the harness on ex as its command line asks and exits: 0 with a
// Report on standard output, 1 with an error on standard error.
func Main(ex Example) {
	if err := run(ex, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", ex.Name, err)
		os.Exit(1)
	}
}

type options struct {
	mode, dtype, backend, data string
	batch, steps, tapeSteps    int
	test, r                    int
	lr, lrOther                float64
	seed                       uint64
	profile                    bool
	cpuProfile                 string
}

// run runs the harness on ex with the command-line arguments args and
// prints its Report.
func run(ex Example, args []string) error {
	o, err := parseOptions(ex.Name, args)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	dt := tensor.Float64
	switch o.dtype {
	case "float64":
	case "float32":
		dt = tensor.Float32
	default:
		return fmt.Errorf("-dtype %q: want float64 or float32", o.dtype)
	}
	if o.batch < 1 || o.steps < 0 || o.r < 2 {
		return fmt.Errorf("-batch %d, -steps %d, -r %d: want a batch of 1 or more, steps >= 0, r >= 2", o.batch, o.steps, o.r)
	}
	var rep *Report
	switch o.mode {
	case "compare":
		rep, err = compare(ex, dt, o)
	case "devices":
		rep, err = devices(ex, dt, o)
	case "train":
		rep, err = train(ex, dt, o)
	case "throughput":
		rep, err = throughput(ex, dt, o)
	default:
		return fmt.Errorf("-mode %q: want compare, devices, train or throughput", o.mode)
	}
	if err != nil {
		return err
	}
	rep.Example, rep.Mode, rep.DType = ex.Name, o.mode, o.dtype
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// parseOptions parses the command line args of the example named name.
func parseOptions(name string, args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&o.mode, "mode", "compare", "compare (the program against the tape machine), devices (the program on the CPU against the CUDA backend), train, or throughput")
	fs.StringVar(&o.dtype, "dtype", "float64", "float64 or float32")
	fs.StringVar(&o.backend, "backend", "cpu", "cpu, or cuda (the host model of the GPU where ORTHONET_CUDA_STANDIN=1)")
	fs.StringVar(&o.data, "data", data.FashionMNISTDir, "Fashion-MNIST or MNIST folder (train, throughput)")
	fs.IntVar(&o.batch, "batch", 4, "batch size")
	fs.IntVar(&o.steps, "steps", 3, "training steps")
	fs.IntVar(&o.tapeSteps, "tape-steps", 20, "train: steps timed on the tape machine")
	fs.IntVar(&o.test, "test", 1000, "train: test images evaluated")
	fs.IntVar(&o.r, "r", 300, "RSDM's submanifold size")
	fs.Float64Var(&o.lr, "lr", 0.5, "RSDM's step size")
	fs.Float64Var(&o.lrOther, "lr-other", 1e-3, "Adam's step size")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the data, the inputs and RSDM")
	fs.BoolVar(&o.profile, "profile", false, "train, throughput: print the compiled program's time per kind of kernel and the optimizer's on standard error")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the run to this file")
	err := fs.Parse(args)
	return o, err
}

// net is an example's model on a graph of its own, with the harness's
// labels and loss.
type net struct {
	g      *G.ExprGraph
	m      *Model
	y      *G.Node
	loss   *G.Node
	params []param.Param
}

// ownDropout asks Build for the example's own dropout probabilities.
const ownDropout = -1

// build builds ex on a new graph with a loss, its gradients, and the
// parameters marked: the Stiefel one orthonormalized.
func build(ex Example, dt tensor.Dtype, batch int, dropout float64, seed uint64) (*net, error) {
	g := G.NewGraph()
	m, err := ex.Build(g, dt, batch, dropout)
	if err != nil {
		return nil, fmt.Errorf("building the model: %w", err)
	}
	if err := redraw(m.Learnables, seed); err != nil {
		return nil, err
	}
	if m.X == nil || m.Out == nil || len(m.Learnables) == 0 {
		return nil, errors.New("the model gave no input, output or learnables")
	}
	if s := m.Out.Shape(); len(s) != 2 || s[0] != batch || s[1] != ex.Classes {
		return nil, fmt.Errorf("output of shape %v, want (%d, %d)", s, batch, ex.Classes)
	}
	n := &net{g: g, m: m}
	n.y = G.NewMatrix(g, dt, G.WithShape(batch, ex.Classes), G.WithName("harness.y"), G.WithInit(G.Zeroes()))
	var logp *G.Node
	if m.Probs {
		logp, err = G.Log(m.Out)
	} else {
		logp, err = G.LogSoftMax(m.Out)
	}
	if err != nil {
		return nil, err
	}
	prod, err := G.HadamardProd(logp, n.y)
	if err != nil {
		return nil, err
	}
	sum, err := G.Sum(prod)
	if err != nil {
		return nil, err
	}
	if n.loss, err = G.HadamardDiv(sum, scalar(dt, -float64(batch))); err != nil {
		return nil, err
	}
	if _, err := G.Grad(n.loss, m.Learnables...); err != nil {
		return nil, fmt.Errorf("gradients: %w", err)
	}
	found := false
	for _, l := range m.Learnables {
		p := param.Plain(l)
		if l.Name() == ex.Stiefel {
			p, found = param.OnStiefel(l), true
			if err := p.Orthonormalize(); err != nil {
				return nil, err
			}
		}
		n.params = append(n.params, p)
	}
	if !found {
		return nil, fmt.Errorf("no learnable named %q", ex.Stiefel)
	}
	return n, nil
}

// redraw draws every learnable again as gorgonia's GlorotN(1) does, with
// which the examples initialize them, from a seeded generator: gorgonia
// seeds its initializers from the clock, and the harness's runs are to be
// reproducible.
func redraw(ns G.Nodes, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x696e6974)) // "init"
	for _, n := range ns {
		std := glorotStd(n.Shape())
		switch v := n.Value().Data().(type) {
		case []float32:
			for i := range v {
				v[i] = float32(std * rng.NormFloat64())
			}
		case []float64:
			for i := range v {
				v[i] = std * rng.NormFloat64()
			}
		default:
			return fmt.Errorf("learnable %s holds %T", n.Name(), v)
		}
	}
	return nil
}

// glorotStd is the standard deviation of gorgonia's GlorotN(1) for a
// tensor of the shape: sqrt(2 / ((s0 + s1) s2 s3 ...)), a vector taken as
// 1 x s0.
func glorotStd(s tensor.Shape) float64 {
	n1, n2, field := 1, 1, 1
	switch len(s) {
	case 0:
	case 1:
		n2 = s[0]
	default:
		n1, n2 = s[0], s[1]
		for _, v := range s[2:] {
			field *= v
		}
	}
	return math.Sqrt(2 / float64((n1+n2)*field))
}

func scalar(dt tensor.Dtype, v float64) *G.Node {
	if dt == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// copyParams gives to's learnables from's values.
func copyParams(to, from *net) error {
	for i, p := range from.params {
		v := p.Node.Value().(tensor.Tensor).Clone().(tensor.Tensor)
		if err := G.Let(to.params[i].Node, v); err != nil {
			return err
		}
	}
	return nil
}

// groups are the Solver's groups: RSDM-P on the Stiefel weight, Adam on
// the rest.
func groups(o options) []optim.Group {
	return []optim.Group{
		{Select: optim.Param.Constrained, LR: o.lr, Rule: optim.RSDMConfig{SubmanifoldSize: o.r, Seed: o.seed}},
		{LR: o.lrOther, Rule: optim.AdamConfig{}},
	}
}

func newBackend(name string) (backend.Backend, error) {
	switch name {
	case "cpu":
		return cpu.New(cpu.Options{}), nil
	case "cuda":
		return cuda.New(cuda.Options{})
	}
	return nil, fmt.Errorf("-backend %q: want cpu or cuda", name)
}

// batchOf fills x and y with a batch: random inputs and labels from rng.
func batchOf(rng *rand.Rand, x []float64, y []float64, classes int) {
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	clear(y)
	for i := 0; i < len(y)/classes; i++ {
		y[i*classes+rng.IntN(classes)] = 1
	}
}

// as returns v as a slice of dt's Go type.
func as(dt tensor.Dtype, v []float64) any {
	if dt == tensor.Float32 {
		return testval.Float32s(v)
	}
	return slices.Clone(v)
}

// tapeRun sets a tape machine's inputs and runs it once.
func tapeRun(vm G.VM, n *net, x, y []float64, dt tensor.Dtype) error {
	if err := G.Let(n.m.X, testval.Tensor(dt, n.m.X.Shape(), x)); err != nil {
		return err
	}
	if err := G.Let(n.y, testval.Tensor(dt, n.y.Shape(), y)); err != nil {
		return err
	}
	vm.Reset()
	return vm.RunAll()
}

// progRun sets a program's inputs and runs it once.
func progRun(p *program.Program, n *net, x, y []float64, dt tensor.Dtype) error {
	if err := p.SetInput(n.m.X, as(dt, x)); err != nil {
		return err
	}
	if err := p.SetInput(n.y, as(dt, y)); err != nil {
		return err
	}
	return p.Run()
}

// read reads a node of a program as float64s.
func read(p *program.Program, n *G.Node, dt tensor.Dtype) ([]float64, error) {
	dst := testval.Host(dt, n.Shape().TotalSize())
	if err := p.Read(n, dst); err != nil {
		return nil, err
	}
	return testval.Floats(dst), nil
}

// grads reads a program's gradients, in the order of its parameters.
func grads(p *program.Program, dt tensor.Dtype) ([][]float64, error) {
	var out [][]float64
	for _, pv := range p.Params() {
		dst := testval.Host(dt, pv.Size)
		if err := p.Backend().CopyOut(dst, pv.Grad.Buf, pv.Grad.Off); err != nil {
			return nil, err
		}
		out = append(out, testval.Floats(dst))
	}
	return out, nil
}

// dropoutSeed seeds the programs' dropout masks.
const dropoutSeed = 1

// compile compiles n's model for training, its Stiefel weight's gradient
// left as factors where the groups' RSDM costs less from them on the CPU
// (program.Config.Groups, as cmd/train compiles; nil groups form every
// gradient), or with eval forward only in inference mode (its dropout the
// identity).
func compile(n *net, be backend.Backend, eval bool, groups []optim.Group, profile bool) (*program.Program, error) {
	return program.Compile(n.g, program.Config{Backend: be, Outputs: []*G.Node{n.m.Out, n.loss}, Params: n.params,
		Inputs: []*G.Node{n.m.X, n.y}, NoGrad: eval, EvalMode: eval, DropoutSeed: dropoutSeed, Groups: groups, Profile: profile})
}

// trainer is a model compiled for training on a backend of its own, with
// a Solver of the options' groups bound to the program.
type trainer struct {
	be   backend.Backend
	prog *program.Program
	ps   *optim.Solver
}

// newTrainer opens the backend named name, compiles n for training on it
// (with factor, its gradients factored for o's groups; profile) and binds
// a Solver of o's groups to the program. The caller closes it.
func newTrainer(n *net, name string, factor, profile bool, o options) (*trainer, error) {
	be, err := newBackend(name)
	if err != nil {
		return nil, err
	}
	var fg []optim.Group
	if factor {
		fg = groups(o)
	}
	prog, err := compile(n, be, false, fg, profile)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("compiling on %s: %w", name, err)
	}
	ps, err := program.NewSolver(prog, groups(o), optim.Options{})
	if err != nil {
		prog.Close()
		be.Close()
		return nil, err
	}
	return &trainer{be: be, prog: prog, ps: ps}, nil
}

// close releases the program, then its backend.
func (t *trainer) close() {
	t.prog.Close()
	t.be.Close()
}

// printProfile writes a program's time per kind of kernel, and the
// optimizer's time per step, to standard error.
func printProfile(p *program.Program, stepTime time.Duration, steps int) {
	ks, runs := p.Profile()
	var total time.Duration
	for _, k := range ks {
		total += k.PerRun
	}
	fmt.Fprintf(os.Stderr, "program: %v a run in its kernels (%d runs); optimizer: %v a step\n", total, runs, stepTime/time.Duration(max(steps, 1)))
	for _, k := range ks {
		fmt.Fprintf(os.Stderr, "%10v %3d  %s\n", k.PerRun, k.Count, k.Kernel)
	}
}

// compareDropout is the dropout probability of compare: the one at which
// gorgonia v0.9.18's dropout gradient (dy / p where the output is not zero)
// equals the true one, dy / (1 - p) where an element is kept.
const compareDropout = 0.5

// drawLikeProgram makes every dropout op of tape (a graph built by the same
// code as prog's, so its nodes have the same IDs) draw the masks that the
// program compiled from prog draws: gorgonia's dropoutOp keeps element i
// where its generator's i-th value r of the run is below 1 - p, the
// program where DropoutDraw(seed, 2^32 + the node's ID, step, i) >= p (see
// program.Config.DropoutSeed), so the generator returns 1 - that draw, run
// k being step k. The generator is an unexported field of gorgonia's op,
// set here by reflection: a test's means to run both on the same masks.
func drawLikeProgram(tape, prog *G.ExprGraph) (int, error) {
	tn, pn := tape.AllNodes(), prog.AllNodes()
	if len(tn) != len(pn) {
		return 0, fmt.Errorf("the graphs have %d and %d nodes", len(tn), len(pn))
	}
	count := 0
	for i, n := range tn {
		op := n.Op()
		if op == nil || reflect.TypeOf(op).String() != "*gorgonia.dropoutOp" {
			continue
		}
		if pn[i].ID() != n.ID() || reflect.TypeOf(pn[i].Op()) != reflect.TypeOf(op) {
			return 0, fmt.Errorf("node %d: %v and %v: the graphs differ", i, n, pn[i])
		}
		f := reflect.ValueOf(op).Elem().FieldByName("rndGen")
		if !f.IsValid() || f.Kind() != reflect.Func {
			return 0, fmt.Errorf("gorgonia's dropoutOp has no generator field rndGen (gorgonia's internals changed?)")
		}
		stream, size := uint64(1)<<32+uint64(n.ID()), uint64(n.Shape().TotalSize())
		var calls uint64
		gen := func() float64 {
			i, step := calls%size, calls/size
			calls++
			return 1 - backend.DropoutDraw(dropoutSeed, stream, step, i)
		}
		reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(gen))
		count++
	}
	return count, nil
}

// compare builds the model twice, runs one as a compiled program and the
// other on the tape machine on the same parameters and inputs, and
// compares the output, the loss and every gradient; then trains both for
// o.steps steps with the same Solver and compares the parameters. Every
// dropout has probability compareDropout, and the tape machine's draw the
// program's masks (drawLikeProgram).
func compare(ex Example, dt tensor.Dtype, o options) (*Report, error) {
	a, b, err := comparePair(ex, dt, o)
	if err != nil {
		return nil, err
	}
	be, err := newBackend(o.backend)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	prog, err := compile(a, be, false, nil, false)
	if err != nil {
		return nil, fmt.Errorf("compiling: %w", err)
	}
	defer prog.Close()
	vm := G.NewTapeMachine(b.g, G.BindDualValues(param.Nodes(b.params)...))
	defer vm.Close()

	c := &comparison{a: a, b: b, prog: prog, vm: vm, dt: dt, classes: ex.Classes, rng: rand.New(rand.NewPCG(o.seed, 2))}
	c.x = make([]float64, a.m.X.Shape().TotalSize())
	c.y = make([]float64, o.batch*ex.Classes)
	batchOf(c.rng, c.x, c.y, ex.Classes)
	if err := progRun(prog, a, c.x, c.y, dt); err != nil {
		return nil, fmt.Errorf("running the program: %w", err)
	}
	if err := tapeRun(vm, b, c.x, c.y, dt); err != nil {
		return nil, fmt.Errorf("running the tape machine: %w", err)
	}
	rep := &Report{Backend: be.Name(), Steps: o.steps}
	if err := c.differences(rep); err != nil {
		return nil, err
	}
	if err := c.train(rep, o); err != nil {
		return nil, err
	}
	return rep, nil
}

// comparePair builds compare's two models, b's dropout drawing a's masks
// and b's parameters a's.
func comparePair(ex Example, dt tensor.Dtype, o options) (a, b *net, err error) {
	if a, err = build(ex, dt, o.batch, compareDropout, o.seed); err != nil {
		return nil, nil, err
	}
	if b, err = build(ex, dt, o.batch, compareDropout, o.seed); err != nil {
		return nil, nil, err
	}
	if _, err := drawLikeProgram(b.g, a.g); err != nil {
		return nil, nil, err
	}
	if err := copyParams(b, a); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// comparison is compare's pair of models, a compiled as prog and b on the
// tape machine vm, and the batch x, y both run on, drawn from rng.
type comparison struct {
	a, b    *net
	prog    *program.Program
	vm      G.VM
	dt      tensor.Dtype
	classes int
	rng     *rand.Rand
	x, y    []float64
}

// differences sets rep's Out, Loss and Grads: how far the program's output,
// loss and gradients of the last run are from the tape machine's.
func (c *comparison) differences(rep *Report) error {
	a, b, dt := c.a, c.b, c.dt
	out, err := read(c.prog, a.m.Out, dt)
	if err != nil {
		return err
	}
	rep.Out = testval.MaxRel(out, testval.Floats(b.m.Out.Value().Data()))
	loss, err := read(c.prog, a.loss, dt)
	if err != nil {
		return err
	}
	rep.Loss = testval.MaxRel(loss, testval.Floats(b.loss.Value().Data()))
	gs, err := grads(c.prog, dt)
	if err != nil {
		return err
	}
	for i, p := range b.params {
		d, err := p.Node.Grad()
		if err != nil {
			return fmt.Errorf("tape gradient of %s: %w", p.Node.Name(), err)
		}
		rep.Grads = max(rep.Grads, testval.MaxRel(gs[i], testval.Floats(d.Data())))
	}
	return nil
}

// train takes o.steps steps of the same Solver on both models, each on a
// new batch but the first, and sets rep's Losses (the program's), Trained,
// Params and Feasibility.
func (c *comparison) train(rep *Report, o options) error {
	ps, err := program.NewSolver(c.prog, groups(o), optim.Options{})
	if err != nil {
		return err
	}
	ts, err := paramopt.NewSolver(c.b.params, groups(o), optim.Options{})
	if err != nil {
		return err
	}
	for s := 0; s < o.steps; s++ {
		if s > 0 {
			batchOf(c.rng, c.x, c.y, c.classes)
			if err := progRun(c.prog, c.a, c.x, c.y, c.dt); err != nil {
				return err
			}
			if err := tapeRun(c.vm, c.b, c.x, c.y, c.dt); err != nil {
				return err
			}
		}
		l, err := read(c.prog, c.a.loss, c.dt)
		if err != nil {
			return err
		}
		rep.Losses = append(rep.Losses, l[0])
		if err := ps.Step(); err != nil {
			return fmt.Errorf("program step %d: %w", s, err)
		}
		if err := ts.Step(); err != nil {
			return fmt.Errorf("tape step %d: %w", s, err)
		}
	}
	if err := c.prog.StoreParams(); err != nil {
		return err
	}
	return trainedApart(rep, c.a, c.b)
}

// trainedApart sets rep's Trained, the largest relative distance of a
// parameter of got from want's, Params, the parameters' entries, and
// Feasibility, got's Stiefel weight's.
func trainedApart(rep *Report, got, want *net) error {
	for i, p := range got.params {
		rep.Trained = max(rep.Trained, testval.NormRel(testval.Floats(p.Node.Value().Data()), testval.Floats(want.params[i].Node.Value().Data())))
		rep.Params += p.Node.Shape().TotalSize()
	}
	var err error
	rep.Feasibility, err = feasibility(got)
	return err
}

// devices trains the model, its dropout on, for o.steps steps as a compiled
// program on the CPU backend and on the CUDA backend (the host model of the
// GPU where ORTHONET_CUDA_STANDIN=1) from the same start and batches, and
// compares the parameters and losses.
func devices(ex Example, dt tensor.Dtype, o options) (*Report, error) {
	nets := make([]*net, 2)
	progs := make([]*program.Program, 2)
	solvers := make([]*optim.Solver, 2)
	names := []string{"cpu", "cuda"}
	rep := &Report{Steps: o.steps}
	for i := range nets {
		n, err := build(ex, dt, o.batch, ownDropout, o.seed)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			if err := copyParams(n, nets[0]); err != nil {
				return nil, err
			}
		}
		tr, err := newTrainer(n, names[i], false, false, o)
		if err != nil {
			return nil, err
		}
		defer tr.close()
		nets[i], progs[i], solvers[i] = n, tr.prog, tr.ps
		rep.Backend += tr.be.Name() + "; "
	}
	rng := rand.New(rand.NewPCG(o.seed, 2))
	x := make([]float64, nets[0].m.X.Shape().TotalSize())
	y := make([]float64, o.batch*ex.Classes)
	var loss [2][]float64
	for s := 0; s < o.steps; s++ {
		batchOf(rng, x, y, ex.Classes)
		for i, p := range progs {
			if err := progRun(p, nets[i], x, y, dt); err != nil {
				return nil, fmt.Errorf("step %d on %s: %w", s, names[i], err)
			}
			l, err := read(p, nets[i].loss, dt)
			if err != nil {
				return nil, err
			}
			loss[i] = append(loss[i], l[0])
			if err := solvers[i].Step(); err != nil {
				return nil, fmt.Errorf("step %d on %s: %w", s, names[i], err)
			}
		}
	}
	rep.Losses = loss[1]
	rep.Loss = testval.MaxRel(loss[1], loss[0])
	for i := range progs {
		if err := progs[i].StoreParams(); err != nil {
			return nil, err
		}
	}
	if err := trainedApart(rep, nets[1], nets[0]); err != nil {
		return nil, err
	}
	return rep, nil
}

// feasibility returns ||W^T W - I||_F of the Stiefel weight (||W W^T - I||_F
// of a wide one), in float64.
func feasibility(n *net) (float64, error) {
	for _, p := range n.params {
		if !p.Constrained() {
			continue
		}
		s := p.Node.Shape()
		rows, cols := s[0], s.TotalSize()/s[0]
		w := testval.Floats(p.Node.Value().Data())
		if rows < cols { // stepped as its transpose
			t := make([]float64, len(w))
			for i := 0; i < rows; i++ {
				for j := 0; j < cols; j++ {
					t[j*rows+i] = w[i*cols+j]
				}
			}
			w, rows, cols = t, cols, rows
		}
		st, err := manifold.NewStiefel[float64](rows, cols)
		if err != nil {
			return 0, err
		}
		return st.Feasibility(w), nil
	}
	return 0, errors.New("no Stiefel weight")
}

// loadData loads the first n training and test images of the data folder.
func loadData(o options, nTrain, nTest int) (train, test *data.Set, err error) {
	return data.LoadSplitFirst("fashion-mnist", o.data, nTrain, nTest)
}

// fill copies a batch of images and one-hot labels into x and y.
func fill(xs []float32, ys []int, x, y []float64, classes int) error {
	linalg.Convert(x, xs)
	return nn.OneHot(y, ys, classes)
}

// train trains the model with its dropout on, compiled on the CPU, for
// o.steps batches of Fashion-MNIST, then evaluates it on o.test test
// images; it also times o.tapeSteps steps of the same model on the tape
// machine.
func train(ex Example, dt tensor.Dtype, o options) (*Report, error) {
	trainSet, testSet, err := loadData(o, o.steps*o.batch, o.test)
	if err != nil {
		return nil, err
	}
	if want := ex.Input; trainSet.C != want[0] || trainSet.H != want[1] || trainSet.W != want[2] {
		return nil, fmt.Errorf("images of %dx%dx%d, the model takes %v", trainSet.C, trainSet.H, trainSet.W, want)
	}
	a, err := build(ex, dt, o.batch, ownDropout, o.seed)
	if err != nil {
		return nil, err
	}
	ev, err := build(ex, dt, o.batch, ownDropout, o.seed)
	if err != nil {
		return nil, err
	}
	tr, err := newTrainer(a, o.backend, true, o.profile, o)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	bs, err := newBatches(trainSet, o.batch, o.seed, ex.Classes)
	if err != nil {
		return nil, err
	}
	rep := &Report{Backend: tr.be.Name(), Steps: o.steps}
	if err := trainProgram(rep, tr, a, bs, dt, o); err != nil {
		return nil, err
	}
	if rep.Accuracy, err = evaluate(tr, a, ev, testSet, bs, dt); err != nil {
		return nil, err
	}
	if o.tapeSteps > 0 {
		if rep.TapeBatch, err = tapeBatchTime(ex, dt, o, bs); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// batches are a loader's batches of images and the buffers they are read
// into: xs and ys as the loader gives them, x and y (one-hot) as the
// models take them.
type batches struct {
	loader  *data.Loader
	xs      []float32
	ys      []int
	x, y    []float64
	classes int
}

// newBatches returns batches of batch images of set, shuffled by seed,
// with labels of classes classes.
func newBatches(set *data.Set, batch int, seed uint64, classes int) (*batches, error) {
	loader, err := data.NewLoader(set, batch, seed)
	if err != nil {
		return nil, err
	}
	xs, ys := make([]float32, batch*set.Dim()), make([]int, batch)
	return &batches{loader: loader, xs: xs, ys: ys, x: make([]float64, len(xs)), y: make([]float64, batch*classes), classes: classes}, nil
}

// next reads the next whole batch into x and y; what and s name it in
// errors.
func (b *batches) next(what string, s int) error {
	if k, err := b.loader.Next(b.xs, b.ys); err != nil || k < len(b.ys) {
		return fmt.Errorf("%s %d: %d images (%v)", what, s, k, err)
	}
	return fill(b.xs, b.ys, b.x, b.y, b.classes)
}

// trainProgram trains a, compiled in tr, for o.steps batches of bs and sets
// rep's Losses (every 50th step's and the last's), ProgramBatch and
// Feasibility; with o.profile it prints the program's profile.
func trainProgram(rep *Report, tr *trainer, a *net, bs *batches, dt tensor.Dtype, o options) error {
	prog, ps := tr.prog, tr.ps
	var progTime, optTime time.Duration
	for s := 0; s < o.steps; s++ {
		if err := bs.next("batch", s); err != nil {
			return err
		}
		start := time.Now()
		if err := prog.SetStep(s); err != nil {
			return err
		}
		if err := progRun(prog, a, bs.x, bs.y, dt); err != nil {
			return err
		}
		t0 := time.Now()
		if err := ps.Step(); err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		optTime += time.Since(t0)
		progTime += time.Since(start)
		if s%50 == 0 || s == o.steps-1 {
			l, err := read(prog, a.loss, dt)
			if err != nil {
				return err
			}
			rep.Losses = append(rep.Losses, l[0])
		}
	}
	rep.ProgramBatch = progTime.Seconds() / float64(o.steps)
	if o.profile {
		printProfile(prog, optTime, o.steps)
	}
	var err error
	rep.Feasibility, err = feasibility(a)
	return err
}

// evaluate returns the test accuracy, in percent, on testSet of the
// dropout-free model ev given a's parameters trained in tr, compiled for
// inference on tr's backend; it reads the images through bs's buffers.
func evaluate(tr *trainer, a, ev *net, testSet *data.Set, bs *batches, dt tensor.Dtype) (float64, error) {
	if err := tr.prog.StoreParams(); err != nil {
		return 0, err
	}
	if err := copyParams(ev, a); err != nil {
		return 0, err
	}
	eprog, err := compile(ev, tr.be, true, nil, false)
	if err != nil {
		return 0, fmt.Errorf("compiling the evaluation: %w", err)
	}
	defer eprog.Close()
	xs, ys, batch, classes := bs.xs, bs.ys, len(bs.ys), bs.classes
	correct := 0
	for i := 0; i < testSet.N; i += batch {
		k := min(batch, testSet.N-i) // the last batch padded with zeros
		clear(xs)
		clear(ys)
		for j := 0; j < k; j++ {
			ys[j] = int(testSet.Y[i+j])
			copy(xs[j*testSet.Dim():], testSet.Image(i+j))
		}
		if err := fill(xs, ys, bs.x, bs.y, classes); err != nil {
			return 0, err
		}
		if err := progRun(eprog, ev, bs.x, bs.y, dt); err != nil {
			return 0, err
		}
		out, err := read(eprog, ev.m.Out, dt)
		if err != nil {
			return 0, err
		}
		c, err := nn.Correct(out[:k*classes], ys[:k], classes)
		if err != nil {
			return 0, err
		}
		correct += c
	}
	return 100 * float64(correct) / float64(testSet.N), nil
}

// tapeBatchTime returns the tape machine's time per batch, in seconds, of
// o.tapeSteps steps of the same model and Solver on bs's first batches.
func tapeBatchTime(ex Example, dt tensor.Dtype, o options, bs *batches) (float64, error) {
	t, err := build(ex, dt, o.batch, ownDropout, o.seed)
	if err != nil {
		return 0, err
	}
	vm := G.NewTapeMachine(t.g, G.BindDualValues(param.Nodes(t.params)...))
	defer vm.Close()
	ts, err := paramopt.NewSolver(t.params, groups(o), optim.Options{})
	if err != nil {
		return 0, err
	}
	bs.loader.SetEpoch(0)
	var tapeTime time.Duration
	for s := 0; s < o.tapeSteps; s++ {
		if err := bs.next("tape batch", s); err != nil {
			return 0, err
		}
		start := time.Now()
		if err := tapeRun(vm, t, bs.x, bs.y, dt); err != nil {
			return 0, err
		}
		if err := ts.Step(); err != nil {
			return 0, err
		}
		tapeTime += time.Since(start)
	}
	return tapeTime.Seconds() / float64(o.tapeSteps), nil
}

// throughput trains o.steps batches on the backend (or the tape machine
// with -backend tape) and returns the samples per second after the first
// fifth of them.
func throughput(ex Example, dt tensor.Dtype, o options) (*Report, error) {
	trainSet, _, err := loadData(o, o.steps*o.batch, o.batch)
	if err != nil {
		return nil, err
	}
	n, err := build(ex, dt, o.batch, ownDropout, o.seed)
	if err != nil {
		return nil, err
	}
	var step func(x, y []float64) error
	rep := &Report{Steps: o.steps}
	if o.backend == "tape" {
		vm := G.NewTapeMachine(n.g, G.BindDualValues(param.Nodes(n.params)...))
		defer vm.Close()
		ts, err := paramopt.NewSolver(n.params, groups(o), optim.Options{})
		if err != nil {
			return nil, err
		}
		rep.Backend = "tape machine"
		step = func(x, y []float64) error {
			if err := tapeRun(vm, n, x, y, dt); err != nil {
				return err
			}
			return ts.Step()
		}
	} else {
		tr, err := newTrainer(n, o.backend, true, o.profile, o)
		if err != nil {
			return nil, err
		}
		defer tr.close()
		prog, ps := tr.prog, tr.ps
		rep.Backend = tr.be.Name()
		s := 0
		step = func(x, y []float64) error {
			if err := prog.SetStep(s); err != nil {
				return err
			}
			s++
			if err := progRun(prog, n, x, y, dt); err != nil {
				return err
			}
			return ps.Step()
		}
	}
	bs, err := newBatches(trainSet, o.batch, o.seed, ex.Classes)
	if err != nil {
		return nil, err
	}
	if rep.SamplesPerSecond, err = samplesPerSecond(bs, o.steps, step); err != nil {
		return nil, err
	}
	return rep, nil
}

// samplesPerSecond takes steps steps of step on bs's batches and returns
// the samples per second after the first fifth of them.
func samplesPerSecond(bs *batches, steps int, step func(x, y []float64) error) (float64, error) {
	warm := max(steps/5, 1)
	var start time.Time
	for s := 0; s < steps; s++ {
		if s == warm {
			start = time.Now()
		}
		if err := bs.next("batch", s); err != nil {
			return 0, err
		}
		if err := step(bs.x, bs.y); err != nil {
			return 0, fmt.Errorf("step %d: %w", s, err)
		}
	}
	if steps <= warm {
		return 0, fmt.Errorf("-steps %d: want more than %d", steps, warm)
	}
	return float64((steps-warm)*len(bs.ys)) / time.Since(start).Seconds(), nil
}
