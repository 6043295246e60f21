package program_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
)

// Example trains a custom Gorgonia model, y = tanh(x W1) W2 with W1 on the
// Stiefel manifold, as a compiled program: the graph and its gradients are
// built with Gorgonia, compiled once, and each step sets the input, runs
// forward and backward, and steps the parameters where they live.
func Example() {
	const batch, in, hidden = 16, 8, 4
	rng := rand.New(rand.NewPCG(1, 2))
	st, _ := manifold.NewStiefel[float64](in, hidden)
	w1 := make([]float64, in*hidden)
	_ = st.Random(w1, rng)
	teacher := make([]float64, in*hidden)
	_ = st.Random(teacher, rng)

	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, in), G.WithName("x"), G.WithInit(G.Zeroes()))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, 1), G.WithName("y"), G.WithInit(G.Zeroes()))
	W1 := G.NewMatrix(g, tensor.Float64, G.WithShape(in, hidden), G.WithName("W1"), G.WithValue(tensor.New(tensor.WithShape(in, hidden), tensor.WithBacking(w1))))
	W2 := G.NewMatrix(g, tensor.Float64, G.WithShape(hidden, 1), G.WithName("W2"), G.WithValue(tensor.New(tensor.WithShape(hidden, 1), tensor.WithBacking([]float64{0.1, 0.1, 0.1, 0.1}))))
	out := G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, W1)))), W2))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(out, y))))))
	params := []param.Param{param.OnStiefel(W1), param.Plain(W2)}
	if _, err := G.Grad(loss, W1, W2); err != nil {
		log.Fatal(err)
	}

	be := cpu.New(cpu.Options{})
	defer be.Close()
	groups := []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.5, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1},
	}
	// Groups lets each rule ask for its gradients in the form it steps best
	// (RSDM: a linear layer's as two factors, where that costs less).
	prog, err := program.Compile(g, program.Config{Backend: be, Outputs: []*G.Node{loss}, Params: params, Inputs: []*G.Node{x, y}, Groups: groups})
	if err != nil {
		log.Fatal(err)
	}
	defer prog.Close()
	solver, err := program.NewSolver(prog, groups, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}

	xs, ys, lv := make([]float64, batch*in), make([]float64, batch), make([]float64, 1)
	var first, last float64
	for step := 0; step < 300; step++ {
		for i := range xs { // a fresh batch from the teacher
			xs[i] = rng.NormFloat64()
		}
		for b := 0; b < batch; b++ {
			var s float64
			for k := 0; k < in; k++ {
				s += xs[b*in+k] * teacher[k*hidden]
			}
			ys[b] = math.Tanh(s)
		}
		if err := prog.SetInput(x, xs); err != nil {
			log.Fatal(err)
		}
		if err := prog.SetInput(y, ys); err != nil {
			log.Fatal(err)
		}
		if err := prog.Run(); err != nil { // forward and backward
			log.Fatal(err)
		}
		if err := prog.Read(loss, lv); err != nil {
			log.Fatal(err)
		}
		if step == 0 {
			first = lv[0]
		}
		last = lv[0]
		if err := solver.Step(); err != nil { // RSDM on W1, SGD on W2
			log.Fatal(err)
		}
	}
	if err := prog.StoreParams(); err != nil { // the nodes get the trained values
		log.Fatal(err)
	}
	fmt.Println("loss fell below a fifth of its start:", last < first/5)
	fmt.Println("W1 on the manifold:", st.Feasibility(W1.Value().Data().([]float64)) < 1e-12)
	// Output:
	// loss fell below a fifth of its start: true
	// W1 on the manifold: true
}
