package checkpoint_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
)

// compiled is a user's model compiled into a program: y = tanh(x W) v,
// with W on the Stiefel manifold, fitted to a fixed target.
type compiled struct {
	x, y   *G.Node
	prog   *program.Program
	solver *optim.Solver
}

func compileModel(be *cpu.Backend) *compiled {
	rng := rand.New(rand.NewPCG(3, 4))
	st, _ := manifold.NewStiefel[float64](5, 3)
	w0 := make([]float64, 15)
	_ = st.Random(w0, rng)
	g := G.NewGraph()
	m := &compiled{}
	m.x = G.NewMatrix(g, tensor.Float64, G.WithShape(8, 5), G.WithName("x"), G.WithInit(G.Zeroes()))
	m.y = G.NewMatrix(g, tensor.Float64, G.WithShape(8, 1), G.WithName("y"), G.WithInit(G.Zeroes()))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 3), G.WithName("W"), G.WithValue(tensor.New(tensor.WithShape(5, 3), tensor.WithBacking(w0))))
	v := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 1), G.WithName("v"), G.WithValue(tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{0.1, 0.1, 0.1}))))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(m.x, w)))), v)), m.y))))))
	params := []param.Param{param.OnStiefel(w), param.Plain(v)}
	if _, err := G.Grad(loss, w, v); err != nil {
		log.Fatal(err)
	}
	var err error
	if m.prog, err = program.Compile(g, program.Config{Backend: be, Outputs: []*G.Node{loss}, Params: params, Inputs: []*G.Node{m.x, m.y}}); err != nil {
		log.Fatal(err)
	}
	m.solver, err = program.NewSolver(m.prog, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.2, Rule: optim.RSDMConfig{SubmanifoldSize: 3, Seed: 1}},
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1},
	}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return m
}

// train takes the steps from..to-1, the batch of step k drawn from seed k.
func (m *compiled) train(from, to int) {
	xs, ys := make([]float64, 40), make([]float64, 8)
	for step := from; step < to; step++ {
		rng := rand.New(rand.NewPCG(uint64(step), 0))
		for i := range xs {
			xs[i] = rng.NormFloat64()
		}
		for i := range ys {
			ys[i] = math.Tanh(xs[5*i] - xs[5*i+1])
		}
		_ = m.prog.SetInput(m.x, xs)
		_ = m.prog.SetInput(m.y, ys)
		if err := m.prog.Run(); err != nil {
			log.Fatal(err)
		}
		if err := m.solver.Step(); err != nil {
			log.Fatal(err)
		}
	}
}

// ExampleFile_LoadProgram saves a compiled program and its solver after 10
// steps (PutProgram), loads both into a fresh program in one call
// (LoadProgram: the parameters' nodes, the program's buffers and the
// solver) and shows that 10 more steps end where 20 steps straight do.
func ExampleFile_LoadProgram() {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "step-10.safetensors")

	m := compileModel(be)
	m.train(0, 10)
	f := checkpoint.New()
	if err := f.PutProgram("model.", "optim.", m.prog, m.solver); err != nil {
		log.Fatal(err)
	}
	if err := checkpoint.Write(path, f); err != nil {
		log.Fatal(err)
	}
	m.train(10, 20)

	saved, err := checkpoint.Read(path)
	if err != nil {
		log.Fatal(err)
	}
	r := compileModel(be)
	if err := saved.LoadProgram("model.", "optim.", r.prog, r.solver); err != nil {
		log.Fatal(err)
	}
	r.train(10, 20)

	same := true
	for i, n := range m.prog.ParamNodes() {
		a, b := make([]float64, n.Shape().TotalSize()), make([]float64, n.Shape().TotalSize())
		_ = m.prog.Read(n, a)
		_ = r.prog.Read(r.prog.ParamNodes()[i], b)
		for k := range a {
			same = same && a[k] == b[k]
		}
	}
	fmt.Println("solver steps:", r.solver.Steps())
	fmt.Println("same weights as 20 steps straight:", same)
	// Output:
	// solver steps: 20
	// same weights as 20 steps straight: true
}
