package models

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// TestRNN checks the RNN's shapes and markings, that its recurrent weight
// starts orthogonal, and that it refuses an input of the wrong width.
func TestRNN(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	g := G.NewGraph()
	m, err := NewRNN(g, RNNConfig{In: 28, Hidden: 16, Steps: 28, Classes: 10}, tensor.Float32, rng)
	if err != nil {
		t.Fatal(err)
	}
	ps := m.Params()
	if len(ps) != 5 || len(param.Constrained(ps)) != 1 || param.Constrained(ps)[0].Node != m.Recurrent.W.Node {
		t.Fatalf("%d parameters, constrained %v: want 5, the recurrent weight alone", len(ps), param.Constrained(ps))
	}
	if s := m.Recurrent.W.Node.Shape(); !s.Eq(tensor.Shape{16, 16}) {
		t.Errorf("recurrent weight of shape %v, want (16, 16)", s)
	}
	if f, err := m.Recurrent.W.Feasibility(); err != nil || f > 1e-5 {
		t.Errorf("initial ||W^T W - I||_F = %g (%v), want under 1e-5", f, err)
	}
	for _, b := range []int{5, 1} {
		x := G.NewMatrix(g, tensor.Float32, G.WithShape(b, 28*28), G.WithInit(G.Gaussian(0, 1)))
		out, err := m.Forward(x)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Shape().Eq(tensor.Shape{b, 10}) {
			t.Errorf("batch %d: logits of shape %v", b, out.Shape())
		}
	}
	if _, err := m.Forward(G.NewMatrix(g, tensor.Float32, G.WithShape(5, 27*28), G.WithInit(G.Zeroes()))); err == nil || !strings.Contains(err.Error(), "want (batch, 784)") {
		t.Errorf("input of 27 rows: error %v", err)
	}
}

// rnnLogits returns the logits of a float64 RNN of cfg, its weights drawn
// from a generator seeded with seed, for the batch of b examples x (which
// the graph holds, not a copy), computed on the tape machine.
func rnnLogits(t *testing.T, cfg RNNConfig, seed uint64, b int, x []float64) []float64 {
	t.Helper()
	g := G.NewGraph()
	m, err := NewRNN(g, cfg, tensor.Float64, rand.New(rand.NewPCG(seed, seed)))
	if err != nil {
		t.Fatal(err)
	}
	n := len(x) / b
	in := G.NewMatrix(g, tensor.Float64, G.WithShape(b, n), G.WithValue(tensor.New(tensor.WithShape(b, n), tensor.WithBacking(x))))
	out, err := m.Forward(in)
	if err != nil {
		t.Fatal(err)
	}
	runTape(t, g)
	return out.Value().Data().([]float64)
}

// TestRNNChannels checks how channel-major images become steps: an RNN of
// 3 channels given (C, H, W) images computes what one of 1 channel computes
// given the same images as (H, C, W), step t reading row t of every
// channel in turn.
func TestRNNChannels(t *testing.T) {
	const b, c, h, w = 2, 3, 4, 5
	img := make([]float64, b*c*h*w)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range img {
		img[i] = rng.NormFloat64()
	}
	rows := make([]float64, len(img)) // each image's (H, C, W)
	for n := range b {
		for k := range c {
			for y := range h {
				for x := range w {
					rows[((n*h+y)*c+k)*w+x] = img[((n*c+k)*h+y)*w+x]
				}
			}
		}
	}
	logits := func(channels int, in []float64) []float64 {
		return rnnLogits(t, RNNConfig{In: c * w, Hidden: 6, Steps: h, Classes: 3, Channels: channels}, 4, b, in)
	}
	got, want := logits(3, img), logits(1, rows)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("logits %v of (C, H, W) images, %v of their (H, C, W) rows", got, want)
		}
	}
}

// TestRNNLearns trains a small RNN for 100 steps of RSDM-P (and SGD on the
// plain weights) on the tape machine, on a synthetic task only the
// recurrence solves (the class is the row that holds a bright pixel): the
// loss falls and the recurrent weight stays orthogonal.
func TestRNNLearns(t *testing.T) {
	const batch, steps, in, classes = 32, 6, 4, 3
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(5, 5))
	m, err := NewRNN(g, RNNConfig{In: in, Hidden: 16, Steps: steps, Classes: classes}, tensor.Float32, rng)
	if err != nil {
		t.Fatal(err)
	}
	xb, yb := make([]float32, batch*steps*in), make([]float32, batch*classes)
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, steps*in), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(batch, steps*in), tensor.WithBacking(xb))))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(batch, classes), tensor.WithBacking(yb))))
	logits, err := m.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := nn.CrossEntropy(logits, y)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, m.Nodes()...); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(m.Nodes()...))
	defer vm.Close()
	s, err := paramopt.NewSolver(m.Params(), []optim.Group{
		{Select: optim.Param.Constrained, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Seed: 1}, LR: 0.2},
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.05},
	}, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// batchOf fills a batch: small noise, and a bright pixel in row
	// 2*class of each example (the rows before the last).
	batchOf := func() {
		clear(yb)
		for i := range batch {
			k := rng.IntN(classes)
			for j := range steps * in {
				xb[i*steps*in+j] = float32(0.1 * rng.NormFloat64())
			}
			xb[i*steps*in+2*k*in+rng.IntN(in)] = 1
			yb[i*classes+k] = 1
		}
	}
	var first, last float64
	for step := range 100 {
		batchOf()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		l := float64(loss.Value().Data().(float32))
		if step < 10 {
			first += l / 10
		} else if step >= 90 {
			last += l / 10
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		vm.Reset()
	}
	f, err := m.Recurrent.W.Feasibility()
	if err != nil || f > 1e-5 {
		t.Errorf("after 100 steps ||W^T W - I||_F = %g (%v), want under 1e-5", f, err)
	}
	if !(last < first/2) {
		t.Errorf("mean loss %.3f over the first 10 steps, %.3f over the last 10: want it halved", first, last)
	}
	t.Logf("mean loss %.3f over the first 10 steps, %.3f over the last 10; ||W^T W - I||_F = %.2g", first, last, f)
}

// TestRNNBatchIndependent checks that an example's logits do not depend on
// the batch it is in: a batch of 16 images of 28 rows against one of 3
// (16 x 16 = 256 rows in, the step-major rows of a batch of 16 would repeat
// the first step's if steps were told apart by row bounds, see
// (*RNN).steps), and a batch of 1.
func TestRNNBatchIndependent(t *testing.T) {
	const steps, in = 28, 28
	rng := rand.New(rand.NewPCG(6, 6))
	all := make([]float64, 16*steps*in)
	for i := range all {
		all[i] = rng.NormFloat64()
	}
	logits := func(b int) []float64 {
		return rnnLogits(t, RNNConfig{In: in, Hidden: 8, Steps: steps, Classes: 3}, 7, b, append([]float64(nil), all[:b*steps*in]...))
	}
	want := logits(16)
	for _, b := range []int{3, 1} {
		got := logits(b)
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Fatalf("batch of %d: logits %v, in a batch of 16 %v", b, got, want[:len(got)])
			}
		}
	}
}
