package nn_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// Example builds a small classifier from nn layers on a Gorgonia graph,
// logits = LayerNorm(ReLU(x W1 + b1)) W2 + b2 with W1 column-orthonormal,
// and trains it with paramopt.NewSolver's solver: RSDM moves W1 on the
// Stiefel manifold, Adam moves everything else. The graph and its
// gradients are run by Gorgonia's tape machine.
func Example() {
	const batch, in, hidden, classes = 48, 8, 6, 3
	rng := rand.New(rand.NewPCG(1, 1))

	// Labels from a random linear teacher: y = argmax_c (x T)_c.
	xs := make([]float32, batch*in)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	teacher := make([]float32, in*classes)
	for i := range teacher {
		teacher[i] = float32(rng.NormFloat64())
	}
	scores := make([]float32, batch*classes)
	for b := 0; b < batch; b++ {
		for c := 0; c < classes; c++ {
			for k := 0; k < in; k++ {
				scores[b*classes+c] += xs[b*in+k] * teacher[k*classes+c]
			}
		}
	}
	labels := make([]int, batch)
	for b := range labels {
		for c := 1; c < classes; c++ {
			if scores[b*classes+c] > scores[b*classes+labels[b]] {
				labels[b] = c
			}
		}
	}
	onehot := make([]float32, batch*classes)
	if err := nn.OneHot(onehot, labels, classes); err != nil {
		log.Fatal(err)
	}

	g := G.NewGraph()
	x, err := nn.NewTensor(g, "x", tensor.Float32, []int{batch, in}, func(i int) float64 { return float64(xs[i]) })
	if err != nil {
		log.Fatal(err)
	}
	y, err := nn.NewTensor(g, "y", tensor.Float32, []int{batch, classes}, func(i int) float64 { return float64(onehot[i]) })
	if err != nil {
		log.Fatal(err)
	}
	fc1, err := nn.NewOrthoLinear(g, "fc1", in, hidden, tensor.Float32, true, rng)
	if err != nil {
		log.Fatal(err)
	}
	norm, err := nn.NewLayerNorm(g, "norm", hidden, tensor.Float32)
	if err != nil {
		log.Fatal(err)
	}
	fc2, err := nn.NewLinear(g, "fc2", hidden, classes, tensor.Float32, true, rng)
	if err != nil {
		log.Fatal(err)
	}
	h := G.Must(fc1.ForwardAct(x, fused.ReLU))
	logits := G.Must(fc2.Forward(G.Must(norm.Forward(h))))
	loss := G.Must(nn.CrossEntropy(logits, y))

	params := append(append(fc1.Params(), norm.Params()...), fc2.Params()...)
	if _, err := G.Grad(loss, param.Nodes(params)...); err != nil {
		log.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(param.Nodes(params)...))
	defer vm.Close()
	solver, err := paramopt.NewSolver(params, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.2, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{Rule: optim.AdamConfig{}, LR: 0.02},
	}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}

	var first, last float64
	for step := 0; step < 200; step++ {
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		last = float64(loss.Value().Data().(float32))
		if step == 0 {
			first = last
		}
		if err := solver.Step(); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
	}
	if err := vm.RunAll(); err != nil { // the trained model's logits
		log.Fatal(err)
	}
	acc, err := nn.Accuracy(logits.Value().Data().([]float32), labels, classes)
	if err != nil {
		log.Fatal(err)
	}
	st, _ := manifold.NewStiefel[float32](in, hidden)
	fmt.Println("logits:", logits.Shape())
	fmt.Println("constrained weights:", len(param.Constrained(params)), "of", len(params), "parameters")
	fmt.Println("loss fell below a tenth of its start:", last < first/10)
	fmt.Println("training accuracy above 90%:", acc > 0.9)
	fmt.Println("||W1^T W1 - I||_F < 1e-5:", st.Feasibility(fc1.W.Node.Value().Data().([]float32)) < 1e-5)
	// Output:
	// logits: (48, 3)
	// constrained weights: 1 of 6 parameters
	// loss fell below a tenth of its start: true
	// training accuracy above 90%: true
	// ||W1^T W1 - I||_F < 1e-5: true
}

// A wide orthogonal layer (in < out) has orthonormal rows, a tall one
// (in >= out) orthonormal columns; both weights are marked as points of the
// Stiefel manifold.
func ExampleNewOrthoLinear() {
	rng := rand.New(rand.NewPCG(1, 2))
	g := G.NewGraph()
	for _, size := range [][2]int{{8, 3}, {3, 8}} {
		in, out := size[0], size[1]
		l, err := nn.NewOrthoLinear(g, fmt.Sprintf("fc%dx%d", in, out), in, out, tensor.Float64, true, rng)
		if err != nil {
			log.Fatal(err)
		}
		w := l.W.Node.Value().Data().([]float64)
		// The largest |<column i, column j> - delta_ij| over the shorter
		// side's vectors: columns when in >= out, rows when in < out.
		n, p := max(in, out), min(in, out)
		at := func(k, i int) float64 { return w[k*out+i] } // entry k of column i
		if in < out {
			at = func(k, i int) float64 { return w[i*out+k] } // entry k of row i
		}
		var worst float64
		for i := 0; i < p; i++ {
			for j := 0; j < p; j++ {
				var dot float64
				for k := 0; k < n; k++ {
					dot += at(k, i) * at(k, j)
				}
				if i == j {
					dot--
				}
				worst = max(worst, math.Abs(dot))
			}
		}
		fmt.Printf("%s: W %v, on the Stiefel manifold: %v, bias %v, orthonormal: %v\n",
			l.W.Name(), l.W.Node.Shape(), l.W.Constrained(), l.B.Node.Shape(), worst < 1e-12)
	}
	// Output:
	// fc8x3.W: W (8, 3), on the Stiefel manifold: true, bias (1, 3), orthonormal: true
	// fc3x8.W: W (3, 8), on the Stiefel manifold: true, bias (1, 8), orthonormal: true
}

// A plain layer's weight is unconstrained; Forward is x W + b.
func ExampleLinear_Forward() {
	rng := rand.New(rand.NewPCG(1, 3))
	g := G.NewGraph()
	l, err := nn.NewLinear(g, "fc", 4, 2, tensor.Float64, true, rng)
	if err != nil {
		log.Fatal(err)
	}
	// x = e_2 picks row 2 of W, plus b.
	x, err := nn.NewTensor(g, "x", tensor.Float64, []int{1, 4}, func(i int) float64 { return float64(i / 2 * (1 - i%2)) })
	if err != nil {
		log.Fatal(err)
	}
	y, err := l.Forward(x)
	if err != nil {
		log.Fatal(err)
	}
	runOnce(g)
	w := l.W.Node.Value().Data().([]float64)
	b := l.B.Node.Value().Data().([]float64)
	out := y.Value().Data().([]float64)
	fmt.Println("constrained:", l.W.Constrained(), "y:", y.Shape())
	fmt.Println("y = W[2,:] + b:", math.Abs(out[0]-(w[4]+b[0])) < 1e-15 && math.Abs(out[1]-(w[5]+b[1])) < 1e-15)
	// Output:
	// constrained: false y: (1, 2)
	// y = W[2,:] + b: true
}

// LayerNorm brings each row to zero mean and unit variance; Gamma = 1 and
// Beta = 0 at the start.
func ExampleLayerNorm() {
	g := G.NewGraph()
	ln, err := nn.NewLayerNorm(g, "ln", 4, tensor.Float64)
	if err != nil {
		log.Fatal(err)
	}
	x, err := nn.NewTensor(g, "x", tensor.Float64, []int{2, 4}, func(i int) float64 { return float64((i%4 + 1) * (1 + 9*(i/4))) })
	if err != nil {
		log.Fatal(err)
	}
	y, err := ln.Forward(x)
	if err != nil {
		log.Fatal(err)
	}
	runOnce(g)
	v := y.Value().Data().([]float64)
	fmt.Printf("x: %v\n", x.Value().Data())
	fmt.Printf("row 0: %.3f\nrow 1: %.3f\n", v[:4], v[4:])
	// Output:
	// x: [1 2 3 4 10 20 30 40]
	// row 0: [-1.342 -0.447 0.447 1.342]
	// row 1: [-1.342 -0.447 0.447 1.342]
}

// Multi-head self-attention over a batch of 2 sequences of 3 tokens with 4
// features: the input and output are (batch*tokens, features), and the
// query, key and value projections are the Stiefel-constrained weights.
func ExampleAttention() {
	const batch, tokens, d, heads = 2, 3, 4, 2
	rng := rand.New(rand.NewPCG(1, 4))
	g := G.NewGraph()
	a, err := nn.NewAttention(g, "attn", d, heads, tensor.Float32, rng)
	if err != nil {
		log.Fatal(err)
	}
	x, err := nn.NewTensor(g, "x", tensor.Float32, []int{batch * tokens, d}, func(int) float64 { return rng.NormFloat64() })
	if err != nil {
		log.Fatal(err)
	}
	y, err := a.Forward(x, tokens)
	if err != nil {
		log.Fatal(err)
	}
	runOnce(g)
	finite := true
	for _, v := range y.Value().Data().([]float32) {
		finite = finite && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
	}
	fmt.Println("output:", y.Shape(), "finite:", finite)
	for _, p := range a.Params() {
		fmt.Println(p.Name(), p.Node.Shape(), "constrained:", p.Constrained())
	}
	// Output:
	// output: (6, 4) finite: true
	// attn.Wq.W (4, 4) constrained: true
	// attn.Wk.W (4, 4) constrained: true
	// attn.Wv.W (4, 4) constrained: true
	// attn.out.W (4, 4) constrained: false
	// attn.out.b (1, 4) constrained: false
}

// Dropout's masks are drawn from the caller's generator, so a seed gives
// the same masks on every run; kept entries are scaled by 1/(1-P).
func ExampleDropout() {
	g := G.NewGraph()
	drop, err := nn.NewDropout(0.5)
	if err != nil {
		log.Fatal(err)
	}
	x, err := nn.NewTensor(g, "x", tensor.Float64, []int{2, 5}, func(int) float64 { return 1 })
	if err != nil {
		log.Fatal(err)
	}
	y, err := drop.Apply(x)
	if err != nil {
		log.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	for _, seed := range []uint64{7, 7, 8} {
		drop.Fill(rand.New(rand.NewPCG(seed, 1))) // before each step
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("seed %d: %v\n", seed, y.Value().Data())
		vm.Reset()
	}
	fmt.Println("masks:", len(drop.Masks()))
	// Output:
	// seed 7: [0 2 2 2 2 2 0 0 2 2]
	// seed 7: [0 2 2 2 2 2 0 0 2 2]
	// seed 8: [2 0 2 2 0 0 0 2 0 2]
	// masks: 1
}

func ExampleOneHot() {
	dst := make([]float32, 3*4)
	if err := nn.OneHot(dst, []int{2, 0, 3}, 4); err != nil {
		log.Fatal(err)
	}
	fmt.Println(dst[0:4], dst[4:8], dst[8:12])
	fmt.Println(nn.OneHot(dst, []int{2, 0, 4}, 4))
	// Output:
	// [0 0 1 0] [1 0 0 0] [0 0 0 1]
	// nn: one-hot: label 4 of example 2 is not in [0, 4)
}

func ExampleAccuracy() {
	logits := []float64{
		0.1, 2.0, -1, // argmax 1
		3.0, 0.5, 0.2, // argmax 0
		0.0, 0.1, 0.3, // argmax 2
		1.0, 1.5, 0.9, // argmax 1
	}
	acc, err := nn.Accuracy(logits, []int{1, 0, 2, 0}, 3)
	if err != nil {
		log.Fatal(err)
	}
	correct, err := nn.Correct(logits, []int{1, 0, 2, 0}, 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(acc, correct)
	// Output:
	// 0.75 3
}

// CrossEntropyLoss is the host-side value of the CrossEntropy node: equal
// logits give log(classes), and huge logits do not overflow.
func ExampleCrossEntropyLoss() {
	uniform, _ := nn.CrossEntropyLoss([]float64{0, 0, 0, 5, 5, 5}, []int{0, 2}, 3)
	huge, _ := nn.CrossEntropyLoss([]float32{1e4, 0, 0}, []int{1}, 3)
	fmt.Printf("equal logits: %.4f (log 3 = %.4f)\n", uniform, math.Log(3))
	fmt.Printf("logits 1e4, 0, 0, label 1: %.0f\n", huge)
	// Output:
	// equal logits: 1.0986 (log 3 = 1.0986)
	// logits 1e4, 0, 0, label 1: 10000
}

// The CrossEntropy node of a graph agrees with CrossEntropyLoss on the same
// logits, and its gradient is (softmax - onehot) / batch.
func ExampleCrossEntropy() {
	const batch, classes = 2, 3
	raw := []float64{1, 2, 3, 0.5, 0.5, -1}
	labels := []int{2, 0}
	onehot := make([]float64, batch*classes)
	if err := nn.OneHot(onehot, labels, classes); err != nil {
		log.Fatal(err)
	}
	g := G.NewGraph()
	logits, _ := nn.NewTensor(g, "logits", tensor.Float64, []int{batch, classes}, func(i int) float64 { return raw[i] })
	y, _ := nn.NewTensor(g, "y", tensor.Float64, []int{batch, classes}, func(i int) float64 { return onehot[i] })
	loss, err := nn.CrossEntropy(logits, y)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := G.Grad(loss, logits); err != nil {
		log.Fatal(err)
	}
	runOnce(g, G.BindDualValues(logits))
	host, err := nn.CrossEntropyLoss(raw, labels, classes)
	if err != nil {
		log.Fatal(err)
	}
	grad, err := logits.Grad()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("graph %.6f, host %.6f\n", loss.Value().Data(), host)
	fmt.Printf("gradient: %.3f\n", grad.Data())
	// Output:
	// graph 0.603261, host 0.603261
	// gradient: [0.045 0.122 -0.167 -0.275 0.225 0.050]
}

func ExampleGELU() {
	g := G.NewGraph()
	x, _ := nn.NewTensor(g, "x", tensor.Float64, []int{5}, func(i int) float64 { return float64(i - 2) })
	y, err := nn.GELU(x)
	if err != nil {
		log.Fatal(err)
	}
	runOnce(g)
	fmt.Printf("GELU(%v) = %.4f\n", x.Value().Data(), y.Value().Data())
	// Output:
	// GELU([-2 -1 0 1 2]) = [-0.0454 -0.1588 0.0000 0.8412 1.9546]
}

// runOnce runs g once on Gorgonia's tape machine, as the Example above does
// in its loop.
func runOnce(g *G.ExprGraph, opts ...G.VMOpt) {
	vm := G.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
}
