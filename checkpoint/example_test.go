package checkpoint_test

import (
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// model is a user's own Gorgonia model: an orthonormal 6 x 3 frame W pulled
// towards a target, plus a plain bias.
type model struct {
	vm     G.VM
	params []param.Param
}

func build() *model {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(1, 2))
	st, _ := manifold.NewStiefel[float64](6, 3)
	w0 := make([]float64, 18)
	_ = st.Random(w0, rng)
	target := make([]float64, 18)
	for i := range target {
		target[i] = rng.NormFloat64()
	}
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 3), G.WithName("W"), G.WithValue(tensor.New(tensor.WithShape(6, 3), tensor.WithBacking(w0))))
	b := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("b"), G.WithValue(tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{0, 0, 0}))))
	t := G.NewConstant(tensor.New(tensor.WithShape(6, 3), tensor.WithBacking(target)))
	loss := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(G.Must(G.BroadcastAdd(w, b, nil, []byte{0})), t))))))
	params := []param.Param{param.OnStiefel(w), param.Plain(b)}
	if _, err := G.Grad(loss, param.Nodes(params)...); err != nil {
		log.Fatal(err)
	}
	return &model{vm: G.NewTapeMachine(g, G.BindDualValues(param.Nodes(params)...)), params: params}
}

func (m *model) train(s *optim.Solver, steps int) {
	for i := 0; i < steps; i++ {
		if err := m.vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := s.Step(); err != nil {
			log.Fatal(err)
		}
		m.vm.Reset()
	}
}

// Example saves a custom model and its solver after 10 steps, loads both
// into a fresh copy and shows that 10 more steps from there end where 20
// steps straight do.
func Example() {
	// Two groups, each with a schedule: RSDM on W, Adam with a warmup on b.
	groups := []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.1, Schedule: optim.Cosine{Steps: 20, Final: 0.2},
			Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{Rule: optim.AdamConfig{}, LR: 0.05, Schedule: optim.WarmupCosine{Warmup: 5, Steps: 20}},
	}
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "step-10.safetensors")

	// Train 10 steps and save.
	m := build()
	s, _ := paramopt.NewSolver(m.params, groups, optim.Options{})
	m.train(s, 10)
	f := checkpoint.New()
	if err := f.PutNodes("model.", param.Nodes(m.params)); err != nil {
		log.Fatal(err)
	}
	if err := f.PutSolver("optim.", s); err != nil {
		log.Fatal(err)
	}
	_ = f.SetJSON("step", 10)
	if err := checkpoint.Write(path, f); err != nil {
		log.Fatal(err)
	}
	m.train(s, 10) // the original goes on to step 20

	// Load into a fresh model and solver, then train 10 more steps.
	g, err := checkpoint.Read(path)
	if err != nil {
		log.Fatal(err)
	}
	var step int
	_ = g.JSON("step", &step)
	r := build()
	rs, _ := paramopt.NewSolver(r.params, groups, optim.Options{})
	if err := g.LoadNodes("model.", param.Nodes(r.params)); err != nil {
		log.Fatal(err)
	}
	if err := g.LoadSolver("optim.", rs); err != nil {
		log.Fatal(err)
	}
	r.train(rs, 20-step)

	a := param.Nodes(m.params)[0].Value().Data().([]float64)
	b := param.Nodes(r.params)[0].Value().Data().([]float64)
	same := true
	for i := range a {
		same = same && a[i] == b[i]
	}
	st, _ := manifold.NewStiefel[float64](6, 3)
	fmt.Println("resumed from step", step)
	fmt.Println("same weights as 20 steps straight:", same)
	fmt.Println("on the manifold:", st.Feasibility(b) < 1e-12)
	// Output:
	// resumed from step 10
	// same weights as 20 steps straight: true
	// on the manifold: true
}
