package paramopt_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// Train a small custom Gorgonia model, out = tanh(x W1) W2, whose first
// weight is column-orthonormal, with a Solver of two groups: RSDM-P moves
// W1 on the Stiefel manifold with a cosine schedule, SGD with momentum
// moves W2.
func ExampleNewSolver() {
	const batch, in, hidden = 64, 8, 4
	rng := rand.New(rand.NewPCG(1, 1))
	randn := func(n int) []float64 {
		a := make([]float64, n)
		for i := range a {
			a[i] = rng.NormFloat64()
		}
		return a
	}
	st, _ := manifold.NewStiefel[float64](in, hidden)
	teacher := make([]float64, in*hidden)
	w1 := make([]float64, in*hidden)
	_ = st.Random(teacher, rng)
	_ = st.Random(w1, rng)

	// Targets from a teacher with an orthonormal first layer.
	xs := randn(batch * in)
	h := make([]float64, batch*hidden)
	ys := make([]float64, batch)
	for b := 0; b < batch; b++ {
		for j := 0; j < hidden; j++ {
			var s float64
			for k := 0; k < in; k++ {
				s += xs[b*in+k] * teacher[k*hidden+j]
			}
			h[b*hidden+j] = s
		}
	}
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, in), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(batch, in), tensor.WithBacking(xs))))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, 1), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(batch, 1), tensor.WithBacking(ys))))
	W1 := G.NewMatrix(g, tensor.Float64, G.WithShape(in, hidden), G.WithName("W1"), G.WithValue(tensor.New(tensor.WithShape(in, hidden), tensor.WithBacking(w1))))
	W2 := G.NewMatrix(g, tensor.Float64, G.WithShape(hidden, 1), G.WithName("W2"), G.WithValue(tensor.New(tensor.WithShape(hidden, 1), tensor.WithBacking([]float64{1, -1, 0.5, 0.5}))))
	for b := 0; b < batch; b++ { // y = tanh(x W*) (1, -1, 0.5, 0.5)
		ys[b] = math.Tanh(h[b*hidden]) - math.Tanh(h[b*hidden+1]) + 0.5*math.Tanh(h[b*hidden+2]) + 0.5*math.Tanh(h[b*hidden+3])
	}
	out := G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, W1)))), W2))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(out, y))))))
	if _, err := G.Grad(loss, W1, W2); err != nil {
		panic(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(W1, W2))
	defer vm.Close()

	params := []param.Param{param.OnStiefel(W1), param.Plain(W2)} // W1's marking travels with it
	solver, err := paramopt.NewSolver(params, []optim.Group{
		// The Stiefel weight: RSDM with r = 4, its step size decayed along a cosine.
		{Select: optim.Param.Constrained, LR: 0.5, Schedule: optim.Cosine{Steps: 500, Final: 0.1},
			Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		// The rest: SGD with momentum.
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1},
	}, optim.Options{})
	if err != nil {
		panic(err)
	}
	var first, last float64
	for step := 0; step < 500; step++ {
		if err := vm.RunAll(); err != nil {
			panic(err)
		}
		last = loss.Value().Data().(float64)
		if step == 0 {
			first = last
		}
		if err := solver.Step(); err != nil {
			panic(err)
		}
		vm.Reset()
	}
	fmt.Printf("loss fell below 5%% of its start: %v\n", last < first/20)
	fmt.Printf("||W1^T W1 - I||_F < 1e-12: %v\n", st.Feasibility(W1.Value().Data().([]float64)) < 1e-12)
	// Output:
	// loss fell below 5% of its start: true
	// ||W1^T W1 - I||_F < 1e-12: true
}
