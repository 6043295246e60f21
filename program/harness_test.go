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
	"github.com/orthonet/orthonet/param"
)

// tolerance returns the largest relative difference allowed between the
// program and the tape machine: 1e-10 for float64, 1e-5 for float32.
func tolerance(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-5
	}
	return 1e-10
}

// relDiff returns max|a - b| / max(max|b|, tiny): the difference relative to
// the reference b's scale.
func relDiff(a, b []float64) float64 {
	var d, s float64
	for i := range b {
		if math.IsNaN(a[i]) != math.IsNaN(b[i]) {
			return math.Inf(1)
		}
		d = max(d, math.Abs(a[i]-b[i]))
		s = max(s, math.Abs(b[i]))
	}
	return d / max(s, 1e-300)
}

// worst says where a and b differ most, for a failure's message: the
// element and both values there (a NaN on one side only counts first).
func worst(a, b []float64) string {
	at, d := -1, -1.0
	for i := range b {
		if math.IsNaN(a[i]) != math.IsNaN(b[i]) {
			at = i
			break
		}
		if e := math.Abs(a[i] - b[i]); e > d {
			at, d = i, e
		}
	}
	if at < 0 {
		return "no elements"
	}
	return fmt.Sprintf("most at element %d of %d: %v against %v", at, len(b), a[at], b[at])
}

func floats(v any) []float64 {
	switch d := v.(type) {
	case []float32:
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = float64(x)
		}
		return out
	case []float64:
		return append([]float64(nil), d...)
	case float32:
		return []float64{float64(d)}
	case float64:
		return []float64{d}
	}
	panic(fmt.Sprintf("floats: %T", v))
}

// leafValue returns a tensor of dt with the given shape and values.
func leafValue(dt tensor.Dtype, shape []int, v []float64) tensor.Tensor {
	if len(shape) == 0 {
		if dt == tensor.Float32 {
			return tensor.New(tensor.FromScalar(float32(v[0])))
		}
		return tensor.New(tensor.FromScalar(v[0]))
	}
	if dt == tensor.Float32 {
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), v...)))
}

func newLeaf(g *G.ExprGraph, dt tensor.Dtype, name string, shape []int, v []float64) *G.Node {
	if len(shape) == 0 {
		return G.NewScalar(g, dt, G.WithName(name), G.WithValue(leafValue(dt, shape, v).Data()))
	}
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(leafValue(dt, shape, v)))
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

// reference holds what the tape machine computed.
type reference struct {
	out, loss []float64
	grads     [][]float64
}

// runCase builds c in dt twice, runs it on the tape machine and as a
// compiled program on be, and compares the output, the loss sum(out * R)
// for a random R, and the gradient of the loss for every parameter leaf.
func runCase(t *testing.T, be backend.Backend, c graphCase, dt tensor.Dtype) {
	t.Helper()
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
	type built struct {
		g            *G.ExprGraph
		leaves       []*G.Node
		params       []*G.Node
		out, loss    *G.Node
		outV, lossV  G.Value
		weightValues []float64
	}
	build := func() (*built, error) {
		b := &built{g: G.NewGraph()}
		for i, s := range c.shapes {
			l := newLeaf(b.g, dt, fmt.Sprintf("x%d", i), s, values[i])
			b.leaves = append(b.leaves, l)
			if i >= len(c.constant) || !c.constant[i] {
				b.params = append(b.params, l)
			}
		}
		out, err := c.build(b.leaves)
		if err != nil {
			return nil, err
		}
		b.out = out
		wr := rand.New(rand.NewPCG(3, 4))
		b.weightValues = make([]float64, numel(out.Shape()))
		for i := range b.weightValues {
			b.weightValues[i] = wr.NormFloat64()
		}
		var prod *G.Node
		if out.Shape().IsScalar() || len(out.Shape()) == 0 {
			w := newLeaf(b.g, dt, "R", nil, b.weightValues[:1])
			prod = G.Must(G.Mul(out, w))
		} else {
			w := newLeaf(b.g, dt, "R", []int(out.Shape()), b.weightValues)
			prod = G.Must(G.Sum(G.Must(G.HadamardProd(out, w))))
		}
		b.loss = prod
		G.Read(out, &b.outV)
		G.Read(prod, &b.lossV)
		if !c.noGrad {
			if _, err := G.Grad(prod, b.params...); err != nil {
				return nil, err
			}
		}
		return b, nil
	}

	// The tape machine's reference.
	ref, err := build()
	if err != nil {
		t.Fatalf("%s %v: building: %v", c.name, dt, err)
	}
	var opts []G.VMOpt
	if !c.noGrad {
		opts = append(opts, G.BindDualValues(ref.params...))
	}
	if c.evalMode {
		opts = append(opts, G.EvalMode())
	}
	vm := G.NewTapeMachine(ref.g, opts...)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatalf("%s %v: tape machine: %v", c.name, dt, err)
	}
	want := reference{out: floats(ref.outV.Data()), loss: floats(ref.lossV.Data())}
	if !c.noGrad {
		for _, p := range ref.params {
			gr, err := p.Grad()
			if err != nil {
				t.Fatalf("%s %v: tape machine gradient of %s: %v", c.name, dt, p.Name(), err)
			}
			want.grads = append(want.grads, floats(gr.Data()))
		}
	}

	// The program, on a fresh copy of the graph.
	got, err := build()
	if err != nil {
		t.Fatal(err)
	}
	params := make([]param.Param, len(got.params))
	for i, p := range got.params {
		params[i] = param.Plain(p)
	}
	prog, err := Compile(got.g, Config{Backend: be, Outputs: []*G.Node{got.out, got.loss}, Params: params, NoGrad: c.noGrad, EvalMode: c.evalMode})
	if err != nil {
		t.Fatalf("%s %v: Compile: %v", c.name, dt, err)
	}
	defer prog.Close()
	for run := 0; run < 2; run++ { // a second run must not accumulate
		if err := prog.Run(); err != nil {
			t.Fatalf("%s %v: Run: %v", c.name, dt, err)
		}
	}
	read := func(n *G.Node) []float64 {
		var host any
		if dt == tensor.Float32 {
			host = make([]float32, numel(n.Shape()))
		} else {
			host = make([]float64, numel(n.Shape()))
		}
		if err := prog.Read(n, host); err != nil {
			t.Fatalf("%s %v: Read %s: %v", c.name, dt, n.Name(), err)
		}
		return floats(host)
	}
	tol := tolerance(dt)
	check := func(what string, a, b []float64) {
		if len(a) != len(b) {
			t.Errorf("%s %v: %s has %d values, the tape machine's %d", c.name, dt, what, len(a), len(b))
			return
		}
		if d := relDiff(a, b); !(d <= tol) {
			t.Errorf("%s %v: %s differs from the tape machine's by %.3g (relative), tolerance %g, %s\n got %v\nwant %v", c.name, dt, what, d, tol, worst(a, b), trim(a), trim(b))
		}
	}
	check("output", read(got.out), want.out)
	// The loss sums out * R: its rounding error scales with the terms'
	// magnitudes, not with the sum's, which may cancel.
	var lossScale float64
	for i, o := range want.out {
		lossScale += math.Abs(o * ref.weightValues[i%len(ref.weightValues)])
	}
	if l, w := read(got.loss), want.loss; len(l) != 1 || len(w) != 1 {
		t.Errorf("%s %v: loss has %d values, the tape machine's %d", c.name, dt, len(l), len(w))
	} else if d := math.Abs(l[0]-w[0]) / max(lossScale, math.Abs(w[0]), 1e-300); !(d <= tol) {
		t.Errorf("%s %v: loss %v differs from the tape machine's %v by %.3g of the terms' magnitude %.3g, tolerance %g", c.name, dt, l[0], w[0], d, lossScale, tol)
	}
	if c.noGrad {
		return
	}
	if err := prog.CheckGrads(); err != nil {
		t.Errorf("%s %v: CheckGrads: %v", c.name, dt, err)
	}
	for i, p := range prog.Params() {
		var host any
		if dt == tensor.Float32 {
			host = make([]float32, p.Size)
		} else {
			host = make([]float64, p.Size)
		}
		if err := be.CopyOut(host, p.Grad.Buf, p.Grad.Off); err != nil {
			t.Fatal(err)
		}
		check("gradient of "+p.Node.Name(), floats(host), want.grads[i])
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
