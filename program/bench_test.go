package program

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// paperFFN builds the paper's FFN (1024 inputs, five 1024-wide Stiefel
// layers, 10 classes) for a batch, with its loss and gradients.
func paperFFN(tb testing.TB, batch, width int) *model {
	g, x, y, rng := classifierInputs(tensor.Float32, []int{batch, width}, 1)
	ffn, err := models.NewFFN(g, models.FFNConfig{In: width, Hidden: width, Classes: 10, Depth: 5, Bias: true}, tensor.Float32, rng)
	m, err := classifierOn(g, x, y, ffn, err)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := G.Grad(m.loss, ffn.Nodes()...); err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkFFN times one forward and backward pass of the paper's FFN
// (batch 16, float32) on Gorgonia's tape machine and as a compiled program
// on the CPU backend: with the default threads, with one (no loop split
// across goroutines), and leaving the Stiefel weights' gradients factored
// as cmd/train does for RSDM (Config.Groups).
func BenchmarkFFN(b *testing.B) {
	b.Run("tape", func(b *testing.B) {
		benchRuns(b, tapeRun(b, paperFFN(b, 16, 1024)))
	})
	for _, v := range []struct {
		name    string
		threads int
		factor  bool
	}{{"program", 0, false}, {"program-1thread", 1, false}, {"program-factored", 0, true}} {
		b.Run(v.name, func(b *testing.B) {
			m := paperFFN(b, 16, 1024)
			be := cpu.New(cpu.Options{Threads: v.threads})
			defer be.Close()
			var c Config
			if v.factor {
				c.Groups = []optim.Group{{Rule: optim.RSDMConfig{SubmanifoldSize: 300}}}
			}
			benchRuns(b, m.compile(b, be, c).Run)
		})
	}
}

// tapeRun returns a run of m's forward and backward pass on Gorgonia's
// tape machine, which b's end closes.
func tapeRun(b *testing.B, m *model) func() error {
	vm := G.NewTapeMachine(m.g, G.BindDualValues(param.Nodes(m.params)...))
	b.Cleanup(func() { vm.Close() })
	return func() error {
		defer vm.Reset()
		return vm.RunAll()
	}
}

// benchRuns times b.N calls of run, from here.
func benchRuns(b *testing.B, run func() error) {
	b.ResetTimer()
	for range b.N {
		if err := run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStepAllocs checks that a training step on a compiled program (inputs
// copied in, forward and backward, the finite check, an RSDM and SGD step,
// the loss read out) allocates nothing after the first.
func TestStepAllocs(t *testing.T) {
	m := paperFFN(t, 4, 32)
	be := cpu.New(cpu.Options{Threads: 2, Grain: 64})
	defer be.Close()
	p := m.compile(t, be, Config{})
	s, err := NewSolver(p, groups(optim.Group{LR: 0.1, Schedule: optim.Cosine{Steps: 100}, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Seed: 1}}, optim.Group{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1}), optim.Options{ClipNorm: 1})
	if err != nil {
		t.Fatal(err)
	}
	var x any = m.inputs[0].Value().Data().([]float32)
	var loss any = make([]float32, 1)
	step := func() {
		if err := p.SetInput(m.inputs[0], x); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		if err := p.Read(m.loss, loss); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Errorf("%v allocations per training step, want 0", n)
	}
}

// randLeaf returns a matrix or vector leaf of dt, normal values times
// scale.
func randLeaf(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand, name string, scale float64, shape ...int) *G.Node {
	n := 1
	for _, s := range shape {
		n *= s
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * rng.NormFloat64()
	}
	val := testval.Tensor(dt, shape, v)
	if len(shape) == 1 {
		return G.NewVector(g, dt, G.WithShape(shape...), G.WithName(name), G.WithValue(val))
	}
	return G.NewMatrix(g, dt, G.WithShape(shape...), G.WithName(name), G.WithValue(val))
}

// charRNN builds the graph of Gorgonia's examples/charRNN for one sentence
// of steps characters, written as that example writes it: float32, a
// character's embedding a row sliced from a vocab x 10 matrix, an LSTM of
// width 100 whose every product is a matrix-vector one, SoftMax, and the
// loss the sum over steps of -log(prob) sliced at the next character.
func charRNN(tb testing.TB, steps int) *model {
	const vocab, embed, hidden = 65, 10, 100
	dt := tensor.Float32
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(5, 5))
	w := func(name string, rows, cols int) *G.Node { return randLeaf(g, dt, rng, name, 0.08, rows, cols) }
	emb := randLeaf(g, dt, rng, "embedding", 0.08, vocab, embed)
	type gate struct{ wx, wh, b *G.Node }
	gates := make([]gate, 4) // input, forget, output, cell write
	var params []*G.Node
	for i := range gates {
		gates[i] = gate{w(fmt.Sprintf("w%dx", i), hidden, embed), w(fmt.Sprintf("w%dh", i), hidden, hidden), randLeaf(g, dt, rng, fmt.Sprintf("b%d", i), 0.01, hidden)}
		params = append(params, gates[i].wx, gates[i].wh, gates[i].b)
	}
	whd, bd := w("whd", vocab, hidden), randLeaf(g, dt, rng, "bias_d", 0.01, vocab)
	params = append(params, whd, bd, emb)
	h := G.NewVector(g, dt, G.WithShape(hidden), G.WithName("h0"), G.WithInit(G.Zeroes()))
	c := G.NewVector(g, dt, G.WithShape(hidden), G.WithName("c0"), G.WithInit(G.Zeroes()))
	var cost *G.Node
	for t := range steps {
		x := G.Must(G.Slice(emb, G.S((7*t)%vocab)))
		pre := func(q gate) *G.Node {
			return G.Must(G.Add(G.Must(G.Add(G.Must(G.Mul(q.wx, x)), G.Must(G.Mul(q.wh, h)))), q.b))
		}
		in, forget, out := G.Must(G.Sigmoid(pre(gates[0]))), G.Must(G.Sigmoid(pre(gates[1]))), G.Must(G.Sigmoid(pre(gates[2])))
		write := G.Must(G.Tanh(pre(gates[3])))
		c = G.Must(G.Add(G.Must(G.HadamardProd(forget, c)), G.Must(G.HadamardProd(in, write))))
		h = G.Must(G.HadamardProd(out, G.Must(G.Tanh(c))))
		probs := G.Must(G.SoftMax(G.Must(G.Add(G.Must(G.Mul(whd, h)), bd))))
		loss := G.Must(G.Slice(G.Must(G.Neg(G.Must(G.Log(probs)))), G.S((7*t+3)%vocab)))
		if cost == nil {
			cost = loss
		} else {
			cost = G.Must(G.Add(cost, loss))
		}
	}
	ps := make([]param.Param, len(params))
	for i, p := range params {
		ps[i] = param.Plain(p)
	}
	return &model{g: g, logits: h, loss: cost, params: ps}
}

// logReg builds Gorgonia's examples/logisticregression's model: the mean
// binary cross-entropy of Sigmoid(x w + b) over rows examples of feats
// features (float64).
func logReg(tb testing.TB, rows, feats int) *model {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(6, 6))
	x := randLeaf(g, tensor.Float64, rng, "x", 1, rows, feats)
	yv := make([]float64, rows)
	for i := range yv {
		yv[i] = float64(i % 2)
	}
	y := G.NewVector(g, tensor.Float64, G.WithShape(rows), G.WithName("y"), G.WithValue(testval.Tensor(tensor.Float64, []int{rows}, yv)))
	w := randLeaf(g, tensor.Float64, rng, "w", 0.1, feats)
	b := G.NewScalar(g, tensor.Float64, G.WithName("b"), G.WithValue(0.0))
	p := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(x, w)), b))))
	loss := G.Must(G.Mean(G.Must(G.BinaryXent(p, y))))
	return &model{g: g, inputs: []*G.Node{x, y}, logits: p, loss: loss, params: []param.Param{param.Plain(w), param.Plain(b)}}
}

// smallModels are the graphs of small ops that BenchmarkSmallOps times,
// without their gradients (withGrad adds them).
var smallModels = []struct {
	name  string
	build func(testing.TB) *model
	tol   float64 // of the comparison with the tape machine
}{
	{"charrnn", func(tb testing.TB) *model { return charRNN(tb, 25) }, tolerance(tensor.Float32)},
	{"logreg", func(tb testing.TB) *model { return logReg(tb, 100, 20) }, tolerance(tensor.Float64)},
}

// withGrad adds the gradients of m's loss with respect to its parameters.
func withGrad(tb testing.TB, m *model) *model {
	if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkSmallOps times one forward and backward pass of graphs of small
// ops (Gorgonia's charRNN: matrix-vector products of 100 x 100; logistic
// regression) on the tape machine and as a compiled program (the default
// threads, one thread, and with chained elementwise kernels, which the
// host does without by default), in one run:
//
//	go test -tags openblas ./program -run '^$' -bench SmallOps
func BenchmarkSmallOps(b *testing.B) {
	for _, sm := range smallModels {
		b.Run(sm.name+"/tape", func(b *testing.B) {
			benchRuns(b, tapeRun(b, withGrad(b, sm.build(b))))
		})
		for _, v := range []struct {
			name    string
			threads int
			chained bool
		}{{"/program", 0, false}, {"/program-1thread", 1, false}, {"/program-chained", 0, true}} {
			b.Run(sm.name+v.name, func(b *testing.B) {
				m := withGrad(b, sm.build(b))
				be := cpu.New(cpu.Options{Threads: v.threads})
				defer be.Close()
				benchRuns(b, m.compile(b, be, Config{chainOnHost: v.chained}).Run)
			})
		}
	}
}

// TestSmallModelsAgree checks BenchmarkSmallOps's graphs on every test
// backend: compiled, their loss and gradients agree with the tape
// machine's.
func TestSmallModelsAgree(t *testing.T) {
	for bi, be := range testBackends(t) {
		for _, sm := range smallModels {
			t.Run(fmt.Sprintf("%s/backend%d", sm.name, bi), func(t *testing.T) {
				build := func() (*model, error) { return sm.build(t), nil }
				ref, got := newSides(t, sm.name, build, onTape(sideConfig{}), compiled(be, sideConfig{}))
				agree(t, sm.name, ref, got, 0, sm.tol)
			})
		}
	}
}

// TestAccumulatedGradients checks that the charRNN's weights, each used at
// every one of its 25 steps, have their gradients summed by products that
// accumulate (Beta 1) rather than by additions over the whole weight: no
// elementwise addition of a recurrent weight's size is left, and 24
// accumulating products per recurrent weight are there.
func TestAccumulatedGradients(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	m := withGrad(t, charRNN(t, 25))
	p := m.compile(t, be, Config{})
	const hidden = 100
	adds, acc := 0, 0
	for _, k := range p.kernels {
		switch k := k.(type) {
		case backend.Zip:
			if k.Op == backend.Add && k.N == hidden*hidden {
				adds++
			}
		case backend.Gemm:
			if k.Beta == 1 && k.M*k.N == hidden*hidden {
				acc++
			}
		}
	}
	if adds != 0 || acc != 4*24 {
		t.Errorf("%d additions of %d x %d values, %d accumulating products of that size; want 0 and %d", adds, hidden, hidden, acc, 4*24)
	}
}
