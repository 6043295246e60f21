package nn_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// Example builds a small classifier from nn's layers, an orthogonal layer
// with ReLU and a plain output layer under softmax cross-entropy, and trains
// it on Gorgonia's tape machine: RSDM moves the orthogonal weight on the
// Stiefel manifold, SGD the rest.
func Example() {
	const batch, in, hidden, classes = 64, 8, 6, 3
	rng := rand.New(rand.NewPCG(1, 2))
	// A fixed batch: the label is the largest of the first three inputs.
	xs := make([]float64, batch*in)
	labels := make([]int, batch)
	for b := range labels {
		for j := 0; j < in; j++ {
			xs[b*in+j] = rng.NormFloat64()
		}
		for c := 1; c < classes; c++ {
			if xs[b*in+c] > xs[b*in+labels[b]] {
				labels[b] = c
			}
		}
	}
	onehot := make([]float64, batch*classes)
	if err := nn.OneHot(onehot, labels, classes); err != nil {
		log.Fatal(err)
	}

	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, in), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(batch, in), tensor.WithBacking(xs))))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(batch, classes), tensor.WithBacking(onehot))))
	fc1, err := nn.NewOrthoLinear(g, "fc1", in, hidden, tensor.Float64, true, rng) // W on St(8, 6)
	if err != nil {
		log.Fatal(err)
	}
	fc2, err := nn.NewLinear(g, "fc2", hidden, classes, tensor.Float64, true, rng)
	if err != nil {
		log.Fatal(err)
	}
	h, err := fc1.ForwardAct(x, fused.ReLU)
	if err != nil {
		log.Fatal(err)
	}
	logits, err := fc2.Forward(h)
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.CrossEntropy(logits, y)
	if err != nil {
		log.Fatal(err)
	}
	params := append(fc1.Params(), fc2.Params()...)
	if _, err := G.Grad(loss, param.Nodes(params)...); err != nil {
		log.Fatal(err)
	}
	var logitsVal G.Value
	G.Read(logits, &logitsVal)
	vm := G.NewTapeMachine(g, G.BindDualValues(param.Nodes(params)...))
	defer vm.Close()
	solver, err := param.NewSolver(params, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.5, RSDM: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{LR: 0.2, Momentum: 0.9},
	}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var first, last float64
	for step := 0; step < 300; step++ {
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		last = loss.Value().Data().(float64)
		if step == 0 {
			first = last
		}
		if err := solver.Step(); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
	}
	acc, err := nn.Accuracy(logitsVal.Data().([]float64), labels, classes)
	if err != nil {
		log.Fatal(err)
	}
	st, _ := manifold.NewStiefel[float64](in, hidden)
	fmt.Println("constrained weights:", len(param.Constrained(params)))
	fmt.Println("loss fell below a third of its start:", last < first/3)
	fmt.Println("training accuracy above 90%:", acc > 0.9)
	fmt.Println("fc1.W on the manifold:", st.Feasibility(fc1.W.Node.Value().Data().([]float64)) < 1e-12)
	// Output:
	// constrained weights: 1
	// loss fell below a third of its start: true
	// training accuracy above 90%: true
	// fc1.W on the manifold: true
}

// The host-side metrics of a batch of logits: the mean softmax
// cross-entropy and the accuracy against integer labels.
func ExampleCrossEntropyLoss() {
	logits := []float32{
		2, 0, 0, // confident and right
		0, 0, 0, // undecided: log 3
		0, 3, 0, // confident and wrong
	}
	labels := []int{0, 1, 2}
	loss, err := nn.CrossEntropyLoss(logits, labels, 3)
	if err != nil {
		log.Fatal(err)
	}
	acc, err := nn.Accuracy(logits, labels, 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss %.4f, accuracy %.3f\n", loss, acc)
	_, err = nn.CrossEntropyLoss(logits, []int{0, 1, 3}, 3)
	fmt.Println(err)
	// Output:
	// loss 1.4777, accuracy 0.333
	// nn: cross-entropy: label 3 of example 2 is not in [0, 3)
}

// OneHot fills a reusable buffer with a batch's one-hot targets.
func ExampleOneHot() {
	dst := make([]float32, 2*4)
	if err := nn.OneHot(dst, []int{3, 0}, 4); err != nil {
		log.Fatal(err)
	}
	fmt.Println(dst)
	// Output:
	// [0 0 0 1 1 0 0 0]
}
