package main

import (
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/runtest"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
	"github.com/orthonet/orthonet/training"
)

// net is one build of the model with its gradients.
type net struct {
	g                    *G.ExprGraph
	loss, logits, x, y   *G.Node
	params               []param.Param
	batch, size, classes int
}

// build builds the model on a graph of its own with gradients, its weights
// drawn from seed: the same seed gives the same weights.
func build(t testing.TB, batch, c, h, w, classes int, seed uint64) *net {
	t.Helper()
	n := &net{g: G.NewGraph(), batch: batch, size: c * h * w, classes: classes}
	var err error
	n.loss, n.logits, n.x, n.y, n.params, err = buildModel(n.g, batch, c, h, w, classes, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(n.loss, param.Nodes(n.params)...); err != nil {
		t.Fatal(err)
	}
	return n
}

// compile compiles n for the CPU backend, closed when t ends.
func (n *net) compile(t testing.TB) *program.Program {
	t.Helper()
	be := cpu.New(cpu.Options{})
	p, err := program.Compile(n.g, program.Config{Backend: be, Outputs: []*G.Node{n.loss, n.logits},
		Params: n.params, Inputs: []*G.Node{n.x, n.y}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); be.Close() })
	return p
}

// solver returns the solver of prog, compiled from n, that trains it: RSDM
// (r = 32) on the Stiefel weight and Adam on the rest.
func (n *net) solver(t testing.TB, prog *program.Program) *optim.Solver {
	t.Helper()
	s, err := program.NewSolver(prog, (&training.Flags{R: 32, LR: 0.2, LROther: 3e-3, Seed: 1}).Groups(), optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs prog, compiled from n, on the images x and the one-hot labels
// y.
func (n *net) run(t testing.TB, prog *program.Program, x, y []float32) {
	t.Helper()
	if err := prog.SetInput(n.x, x); err != nil {
		t.Fatal(err)
	}
	if err := prog.SetInput(n.y, y); err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
}

// TestTapeAgreement runs one batch through the compiled program and through
// Gorgonia's tape machine, the model built alike for each, and compares the
// loss, the logits and every parameter's gradient.
func TestTapeAgreement(t *testing.T) {
	const batch, c, h, w, classes, tol = 6, 3, 7, 10, 5, 1e-4
	a, b := build(t, batch, c, h, w, classes, 3), build(t, batch, c, h, w, classes, 3)
	prog := a.compile(t)
	vm := G.NewTapeMachine(b.g, G.BindDualValues(param.Nodes(b.params)...))
	defer vm.Close()

	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, batch*c*h*w)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	labels := make([]int, batch)
	for i := range labels {
		labels[i] = rng.IntN(classes)
	}
	y := make([]float32, batch*classes)
	if err := nn.OneHot(y, labels, classes); err != nil {
		t.Fatal(err)
	}
	a.run(t, prog, x, y)
	for _, in := range []struct {
		n    *G.Node
		data []float32
	}{{b.x, x}, {b.y, y}} {
		if err := G.Let(in.n, tensor.New(tensor.WithShape(in.n.Shape()...), tensor.WithBacking(in.data))); err != nil {
			t.Fatal(err)
		}
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}

	var worst float64
	compare := func(what string, got []float32, want any) {
		t.Helper()
		g, w := testval.Floats(got), testval.Floats(want)
		d := testval.MaxRel(g, w)
		if !(d < tol) {
			t.Errorf("%s: relative difference %.3g, want < %g (%s)", what, d, tol, testval.Worst(g, w))
		}
		worst = max(worst, d)
	}
	for _, o := range []struct {
		name     string
		prog, tp *G.Node
	}{{"loss", a.loss, b.loss}, {"logits", a.logits, b.logits}} {
		got := make([]float32, o.prog.Shape().TotalSize())
		if err := prog.Read(o.prog, got); err != nil {
			t.Fatal(err)
		}
		compare(o.name, got, o.tp.Value().Data())
	}
	for i, pv := range prog.Params() {
		got := make([]float32, pv.Size)
		if err := prog.Backend().CopyOut(got, pv.Grad.Buf, pv.Grad.Off); err != nil {
			t.Fatal(err)
		}
		want, err := b.params[i].Node.Grad()
		if err != nil {
			t.Fatal(err)
		}
		compare("gradient of "+pv.Node.Name(), got, want.Data())
	}
	t.Logf("%d parameters: largest relative difference %.3g (loss, logits, gradients)", len(a.params), worst)
}

// protoSet is a separable synthetic image set: an example of class k is
// class k's fixed random image plus Gaussian noise twice its scale.
type protoSet struct {
	protos [][]float32
	noise  float64
	seed   uint64
	n      int
}

func (s *protoSet) Len() int        { return s.n }
func (s *protoSet) NumClasses() int { return len(s.protos) }

// Example writes example i, the same for the same i, into x.
func (s *protoSet) Example(i int, x []float32) (int, error) {
	rng := rand.New(rand.NewPCG(s.seed, uint64(i)))
	k := i % len(s.protos)
	for j, p := range s.protos[k] {
		x[j] = p + float32(s.noise*rng.NormFloat64())
	}
	return k, nil
}

// TestTrain trains the compiled model for 50 steps on a separable synthetic
// set, RSDM (r = 32) on the Stiefel weight and Adam on the rest, and checks
// that held-out accuracy rises well above chance and that the weight stays
// orthonormal.
func TestTrain(t *testing.T) {
	const batch, c, h, w, classes, steps = 32, 3, 8, 8, 4, 50
	size := c * h * w
	rng := rand.New(rand.NewPCG(7, 8))
	set := &protoSet{noise: 2, seed: 9, n: 100000}
	for range classes {
		p := make([]float32, size)
		for j := range p {
			p[j] = float32(rng.NormFloat64())
		}
		set.protos = append(set.protos, p)
	}

	n := build(t, batch, c, h, w, classes, 1)
	prog := n.compile(t)
	solver := n.solver(t, prog)

	x, y := make([]float32, batch*size), make([]float32, batch*classes)
	labels := make([]int, batch)
	logits := make([]float32, batch*classes)
	// run runs the batch of examples first, first+1, ... and returns its
	// accuracy.
	run := func(first int) float64 {
		for b := range batch {
			var err error
			if labels[b], err = set.Example(first+b, x[b*size:(b+1)*size]); err != nil {
				t.Fatal(err)
			}
		}
		if err := nn.OneHot(y, labels, classes); err != nil {
			t.Fatal(err)
		}
		n.run(t, prog, x, y)
		if err := prog.Read(n.logits, logits); err != nil {
			t.Fatal(err)
		}
		acc, err := nn.Accuracy(logits, labels, classes)
		if err != nil {
			t.Fatal(err)
		}
		return acc
	}
	heldOut := func() float64 { // 256 examples never trained on
		var sum float64
		for k := range 8 {
			sum += run(set.n/2 + k*batch)
		}
		return sum / 8
	}

	w1 := param.Constrained(n.params)[0]
	w0 := slices.Clone(w1.Node.Value().Data().([]float32))
	before := heldOut()
	for s := range steps {
		run(s * batch)
		if err := solver.Step(); err != nil {
			t.Fatal(err)
		}
	}
	after := heldOut()
	t.Logf("held-out accuracy %.3f before, %.3f after %d steps (chance %.2f)", before, after, steps, 1.0/classes)
	if !(after > 0.7 && after > before+0.3) {
		t.Errorf("held-out accuracy %.3f after %d steps (%.3f before), want above 0.7 and 0.3 above the start", after, steps, before)
	}

	runtest.Stepped(t, prog, w1, w0, steps)
}

// TestBuildRefuses checks that sizes the model cannot take are errors.
func TestBuildRefuses(t *testing.T) {
	for _, s := range [][5]int{{0, 1, 8, 8, 2}, {4, 0, 8, 8, 2}, {4, 1, 1, 8, 2}, {4, 1, 8, 8, 1}} {
		if _, _, _, _, _, err := buildModel(G.NewGraph(), s[0], s[1], s[2], s[3], s[4], rand.New(rand.NewPCG(1, 1))); err == nil {
			t.Errorf("buildModel(batch %d, %d x %d x %d, %d classes) took it", s[0], s[1], s[2], s[3], s[4])
		}
	}
}

// BenchmarkStep times one training step (forward and backward, RSDM and
// Adam) on batches of 32 images of 3 x 32 x 32 pixels in 10 classes.
func BenchmarkStep(b *testing.B) {
	const batch, c, h, w, classes = 32, 3, 32, 32, 10
	n := build(b, batch, c, h, w, classes, 1)
	prog := n.compile(b)
	solver := n.solver(b, prog)
	x, y := make([]float32, batch*c*h*w), make([]float32, batch*classes)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	for i := range batch {
		y[i*classes+i%classes] = 1
	}
	b.ResetTimer()
	for range b.N {
		n.run(b, prog, x, y)
		if err := solver.Step(); err != nil {
			b.Fatal(err)
		}
	}
}
