package program

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// The compiled-against-tape fixture: a model built twice, each copy run by
// a side (the tape machine with optim's Solver, or a compiled program with
// its own), and agree, which runs two sides in step and compares them.

// model is one build of a network or function on a graph of its own.
type model struct {
	g      *G.ExprGraph
	inputs []*G.Node // set from their nodes' values before each run
	// logits is the output compared besides the loss (a classifier's
	// logits, or a graph case's output).
	logits *G.Node
	loss   *G.Node
	params []param.Param
	masks  func(rng *rand.Rand) // redraws dropout masks into the nodes
	// lossScale, when set, gives from the reference's output the scale the
	// loss's rounding error is relative to (the magnitude of a sum's terms,
	// which may cancel); by default the loss's own.
	lossScale func(out []float64) float64
}

// compile compiles m for be, with cfg's other settings (Backend, Outputs,
// Params and Inputs are m's), closed when tb ends.
func (m *model) compile(tb testing.TB, be backend.Backend, cfg Config) *Program {
	tb.Helper()
	cfg.Backend, cfg.Outputs, cfg.Params, cfg.Inputs = be, []*G.Node{m.logits, m.loss}, m.params, m.inputs
	p, err := Compile(m.g, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// sideConfig says how a side runs its model.
type sideConfig struct {
	groups   []optim.Group // the solver's; nil: no steps
	noGrad   bool          // the forward pass only
	evalMode bool          // batch norm and dropout in inference
	ask      bool          // Config.Groups = groups, for a program
	runs     int           // a program's Runs per run, 1 if 0 (a second must not accumulate)
	// unchained keeps a program's elementwise kernels apart
	// (Config.unchained); chainOnHost chains them on a host backend too.
	unchained, chainOnHost bool
}

// A side runs one build of a model.
type side interface {
	model() *model
	name() string
	// run sets the inputs (with freshly drawn masks) and runs the model
	// forward and, unless noGrad, backward.
	run() error
	// read returns an output's values after run.
	read(n *G.Node) ([]float64, error)
	// grad returns parameter i's gradient after run, nil where there is
	// none (noGrad, or a gradient the program left factored).
	grad(i int) ([]float64, error)
	// step steps the solver and leaves the parameters in their nodes.
	step() error
	close()
}

// tapeSide runs a model on gorgonia's tape machine.
type tapeSide struct {
	m      *model
	noGrad bool
	vm     G.VM
	vals   map[*G.Node]*G.Value
	solver *optim.Solver
	rng    *rand.Rand
	ran    bool
}

// newTapeSide differentiates m (unless cfg.noGrad) and makes its tape
// machine and solver.
func newTapeSide(m *model, cfg sideConfig) (*tapeSide, error) {
	s := &tapeSide{m: m, noGrad: cfg.noGrad, vals: map[*G.Node]*G.Value{}, rng: rand.New(rand.NewPCG(1, 2))}
	for _, n := range []*G.Node{m.logits, m.loss} {
		s.vals[n] = new(G.Value)
		G.Read(n, s.vals[n])
	}
	nodes := param.Nodes(m.params)
	var opts []G.VMOpt
	if !cfg.noGrad {
		if _, err := G.Grad(m.loss, nodes...); err != nil {
			return nil, err
		}
		opts = append(opts, G.BindDualValues(nodes...))
	}
	if cfg.evalMode {
		opts = append(opts, G.EvalMode())
	}
	s.vm = G.NewTapeMachine(m.g, opts...)
	if cfg.groups != nil {
		var err error
		if s.solver, err = paramopt.NewSolver(m.params, cfg.groups, optim.Options{}); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *tapeSide) model() *model { return s.m }
func (s *tapeSide) name() string  { return "the tape machine" }
func (s *tapeSide) close()        { s.vm.Close() }

func (s *tapeSide) run() error {
	if s.ran {
		s.vm.Reset()
	}
	s.ran = true
	if s.m.masks != nil {
		s.m.masks(s.rng)
	}
	return s.vm.RunAll()
}

func (s *tapeSide) read(n *G.Node) ([]float64, error) {
	v, ok := s.vals[n]
	if !ok || *v == nil {
		return nil, fmt.Errorf("the tape machine has no value of %s", n.Name())
	}
	return testval.Floats(*v), nil
}

func (s *tapeSide) grad(i int) ([]float64, error) {
	if s.noGrad {
		return nil, nil
	}
	g, err := s.m.params[i].Node.Grad()
	if err != nil {
		return nil, err
	}
	return testval.Floats(g), nil
}

func (s *tapeSide) step() error { return s.solver.Step() }

// programSide runs a model compiled for a backend.
type programSide struct {
	m      *model
	prog   *Program
	solver *optim.Solver
	rng    *rand.Rand
	runs   int
}

// newProgramSide differentiates m (unless cfg.noGrad) and compiles it
// for be, with its solver.
func newProgramSide(be backend.Backend, m *model, cfg sideConfig) (*programSide, error) {
	if !cfg.noGrad {
		if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
			return nil, err
		}
	}
	prog, err := Compile(m.g, Config{Backend: be, Outputs: []*G.Node{m.logits, m.loss}, Params: m.params, Inputs: m.inputs,
		NoGrad: cfg.noGrad, EvalMode: cfg.evalMode, Groups: map[bool][]optim.Group{true: cfg.groups}[cfg.ask],
		unchained: cfg.unchained, chainOnHost: cfg.chainOnHost})
	if err != nil {
		return nil, fmt.Errorf("Compile on %s: %w", be.Name(), err)
	}
	s := &programSide{m: m, prog: prog, rng: rand.New(rand.NewPCG(1, 2)), runs: max(cfg.runs, 1)}
	if cfg.groups != nil {
		if s.solver, err = NewSolver(prog, cfg.groups, optim.Options{}); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *programSide) model() *model { return s.m }
func (s *programSide) name() string  { return "the program on " + s.prog.Backend().Name() }

func (s *programSide) close() {
	if s.solver != nil {
		s.solver.Close()
	}
	s.prog.Close()
}

func (s *programSide) run() error {
	if s.m.masks != nil {
		s.m.masks(s.rng)
	}
	for _, in := range s.m.inputs {
		if err := s.prog.SetInput(in, in.Value().Data()); err != nil {
			return err
		}
	}
	for range s.runs {
		if err := s.prog.Run(); err != nil {
			return err
		}
	}
	return nil
}

func (s *programSide) read(n *G.Node) ([]float64, error) {
	h := testval.Host(n.Dtype(), n.Shape().TotalSize())
	if err := s.prog.Read(n, h); err != nil {
		return nil, err
	}
	return testval.Floats(h), nil
}

func (s *programSide) grad(i int) ([]float64, error) {
	p := s.prog.Params()[i]
	if p.Grad.Buf == nil {
		return nil, nil // NoGrad, or factored: no gradient formed
	}
	h := testval.Host(p.Node.Dtype(), p.Size)
	if err := s.prog.Backend().CopyOut(h, p.Grad.Buf, p.Grad.Off); err != nil {
		return nil, err
	}
	return testval.Floats(h), nil
}

func (s *programSide) step() error {
	if err := s.solver.Step(); err != nil {
		return err
	}
	return s.prog.StoreParams()
}

// onTape and compiled make a side of a model for newSides.
func onTape(cfg sideConfig) func(m *model) (side, error) {
	return func(m *model) (side, error) { return newTapeSide(m, cfg) }
}

func compiled(be backend.Backend, cfg sideConfig) func(m *model) (side, error) {
	return func(m *model) (side, error) { return newProgramSide(be, m, cfg) }
}

// newSides builds the model twice and makes the reference side of one
// copy and the other side of the other, closed when the test ends.
func newSides(t *testing.T, label string, build func() (*model, error), ref, got func(*model) (side, error)) (side, side) {
	t.Helper()
	var sides [2]side
	for i, newSide := range []func(*model) (side, error){ref, got} {
		m, err := build()
		if err != nil {
			t.Fatalf("%s: building: %v", label, err)
		}
		s, err := newSide(m)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		t.Cleanup(s.close)
		sides[i] = s
	}
	return sides[0], sides[1]
}

// agree runs ref and got in step (label names them in failures), steps
// times with a step of their solvers after each run (once, without steps),
// and checks after each run that got's output, loss and gradients (but
// those a program left factored), and after each step its parameters,
// agree with ref's to tol: relative to the reference's largest value
// (testval.MaxRel), the loss relative to its scale. It returns the largest
// of those differences.
func agree(t *testing.T, label string, ref, got side, steps int, tol float64) (worst float64) {
	t.Helper()
	fail := func(s side, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %s: %v", label, s.name(), err)
		}
	}
	check := func(what string, a, b []float64) {
		t.Helper()
		d := testval.MaxRel(a, b)
		worst = max(worst, d)
		if !(d <= tol) {
			t.Errorf("%s: %s differs from %s's by %.3g (relative), tolerance %g, %s\n got %v\nwant %v",
				what, got.name(), ref.name(), d, tol, testval.Worst(a, b), trim(a), trim(b))
		}
	}
	rm, gm := ref.model(), got.model()
	for k := range max(steps, 1) {
		fail(ref, ref.run())
		fail(got, got.run())
		at := fmt.Sprintf("%s, run %d: ", label, k)
		refOut, err := ref.read(rm.logits)
		fail(ref, err)
		gotOut, err := got.read(gm.logits)
		fail(got, err)
		check(at+"output", gotOut, refOut)
		w, err := ref.read(rm.loss)
		fail(ref, err)
		l, err := got.read(gm.loss)
		fail(got, err)
		var scale float64
		if rm.lossScale != nil {
			scale = rm.lossScale(refOut)
		}
		if len(l) == 1 && len(w) == 1 {
			worst = max(worst, math.Abs(l[0]-w[0])/max(scale, math.Abs(w[0]), 1e-300))
		}
		if len(l) != 1 || len(w) != 1 {
			t.Errorf("%sloss has %d values, %s's %d", at, len(l), ref.name(), len(w))
		} else if d := math.Abs(l[0]-w[0]) / max(scale, math.Abs(w[0]), 1e-300); !(d <= tol) {
			t.Errorf("%sloss %v differs from %s's %v by %.3g of its scale %.3g, tolerance %g", at, l[0], ref.name(), w[0], d, max(scale, math.Abs(w[0])), tol)
		}
		for i, p := range gm.params {
			a, err := got.grad(i)
			fail(got, err)
			b, err := ref.grad(i)
			fail(ref, err)
			if a != nil && b != nil {
				check(at+"gradient of "+p.Node.Name(), a, b)
			}
		}
		if k >= steps {
			break
		}
		fail(ref, ref.step())
		fail(got, got.step())
		for i, p := range gm.params {
			check(at+p.Node.Name()+" after the step", testval.Floats(p.Node.Value()), testval.Floats(rm.params[i].Node.Value()))
		}
	}
	return worst
}

// tolerance returns the largest relative difference allowed between the
// program and the tape machine: 1e-10 for float64, 1e-5 for float32.
func tolerance(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-5
	}
	return 1e-10
}

// newLeaf returns a leaf of dt with the given shape (a scalar if none) and
// values.
func newLeaf(g *G.ExprGraph, dt tensor.Dtype, name string, shape []int, v []float64) *G.Node {
	if len(shape) == 0 {
		return G.NewScalar(g, dt, G.WithName(name), G.WithValue(testval.Tensor(dt, shape, v).Data()))
	}
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(testval.Tensor(dt, shape, v)))
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// graphCase is a function of some leaves to compare between the tape
// machine and a compiled program.
type graphCase struct {
	name   string
	shapes [][]int
	// build returns the node to check; leaves[i] has shapes[i].
	build func(leaves []*G.Node) (*G.Node, error)
	// positive draws the leaves from (0.5, 2) instead of N(0, 1).
	positive bool
	// constant lists leaves that are constants, not parameters.
	constant []bool
	// noGrad compares the forward values only.
	noGrad bool
	// evalMode runs the tape machine with gorgonia.EvalMode() and compiles
	// with Config.EvalMode (batch norm and dropout in inference).
	evalMode bool
}

// caseValues draws the leaf values of c: N(0, 1), or (0.5, 2) where c is
// positive, seeded by its name's length.
func caseValues(c graphCase) [][]float64 {
	rng := rand.New(rand.NewPCG(uint64(len(c.name)), 7))
	values := make([][]float64, len(c.shapes))
	for i, s := range c.shapes {
		values[i] = make([]float64, numel(s))
		for j := range values[i] {
			if c.positive {
				values[i][j] = 0.5 + 1.5*rng.Float64()
			} else {
				values[i][j] = rng.NormFloat64()
			}
		}
	}
	return values
}

// model builds c in dt from the leaf values: its output, the loss
// sum(out * R) for a fixed random R, and as parameters the leaves c does
// not list as constants.
func (c graphCase) model(dt tensor.Dtype, values [][]float64) (*model, error) {
	m := &model{g: G.NewGraph()}
	var leaves []*G.Node
	for i, s := range c.shapes {
		l := newLeaf(m.g, dt, fmt.Sprintf("x%d", i), s, values[i])
		leaves = append(leaves, l)
		if i >= len(c.constant) || !c.constant[i] {
			m.params = append(m.params, param.Plain(l))
		}
	}
	out, err := c.build(leaves)
	if err != nil {
		return nil, err
	}
	m.logits = out
	wr := rand.New(rand.NewPCG(3, 4))
	r := make([]float64, numel(out.Shape()))
	for i := range r {
		r[i] = wr.NormFloat64()
	}
	if out.Shape().IsScalar() || len(out.Shape()) == 0 {
		m.loss = G.Must(G.Mul(out, newLeaf(m.g, dt, "R", nil, r[:1])))
	} else {
		m.loss = G.Must(G.Sum(G.Must(G.HadamardProd(out, newLeaf(m.g, dt, "R", []int(out.Shape()), r)))))
	}
	// The loss sums out * R: its rounding error scales with the terms'
	// magnitudes, not with the sum's, which may cancel.
	m.lossScale = func(out []float64) float64 {
		var s float64
		for i, o := range out {
			s += math.Abs(o * r[i%len(r)])
		}
		return s
	}
	return m, nil
}

// runCase builds c in dt twice, runs it on the tape machine and as a
// compiled program on be (twice: a second run must not accumulate), and
// compares the output, the loss sum(out * R) for a random R, and the
// gradient of the loss for every parameter leaf.
func runCase(t *testing.T, be backend.Backend, c graphCase, dt tensor.Dtype) {
	t.Helper()
	values := caseValues(c)
	label := fmt.Sprintf("%s %v", c.name, dt)
	cfg := sideConfig{noGrad: c.noGrad, evalMode: c.evalMode, runs: 2}
	build := func() (*model, error) { return c.model(dt, values) }
	ref, got := newSides(t, label, build, onTape(cfg), compiled(be, cfg))
	agree(t, label, ref, got, 0, tolerance(dt))
	if c.noGrad {
		return
	}
	if err := got.(*programSide).prog.CheckGrads(); err != nil {
		t.Errorf("%s: CheckGrads: %v", label, err)
	}
}

func trim(a []float64) []float64 {
	if len(a) > 8 {
		return a[:8]
	}
	return a
}

// testBackends returns the backends every lowering runs on: the default
// CPU backend, one that splits every loop across three goroutines, and
// those of moreBackends.
func testBackends(t *testing.T) []backend.Backend {
	a, b := cpu.New(cpu.Options{}), cpu.New(cpu.Options{Threads: 3, Grain: 1})
	bs := []backend.Backend{a, b}
	for _, f := range moreBackends {
		bs = append(bs, f())
	}
	t.Cleanup(func() {
		for _, be := range bs {
			be.Close()
		}
	})
	return bs
}

// moreBackends start the backends of other builds (the CUDA kernels on
// the host model of the device where cgo is on).
var moreBackends []func() backend.Backend

func runCases(t *testing.T, cases []graphCase) {
	for bi, be := range testBackends(t) {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/backend%d", c.name, bi), func(t *testing.T) {
				for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
					runCase(t, be, c, dt)
				}
			})
		}
	}
}
