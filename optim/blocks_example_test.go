package optim_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// nesterov is RGD with Nesterov momentum, written once in
// optim.StepBlocks: the host steps it by this description, and so would a
// device (optim/device), with no code of its own.
type nesterov struct{ beta float64 }

func (nesterov) String() string    { return "nesterov" }
func (nesterov) Constrained() bool { return true }
func (c nesterov) Stepper(p optim.Param, b optim.Binding) (optim.Stepper, error) {
	return optim.BindDescribed(p, b, c)
}

// Describe: rg = P_X(G); mom = rg + beta mom; X <- R_X(-lr (rg + beta
// mom)); the momentum carried to the new point.
func (c nesterov) Describe(b optim.StepBlocks) error {
	rg, dir, next, mom := b.Buffer(""), b.Buffer(""), b.Buffer(""), b.Buffer(optim.StateMomentum)
	b.Proj(rg, optim.X, optim.G)
	b.AddScaled(mom, rg, optim.Coef{Value: c.beta}, mom)
	b.AddScaled(dir, rg, optim.Coef{Value: c.beta}, mom)
	b.Retract(next, optim.X, optim.Coef{Value: -1, TimesLR: true}, dir)
	b.Proj(mom, next, mom)
	b.Move(next)
	return nil
}

// ExampleStepBlocks trains a weight toward a target point of the Stiefel
// manifold by a rule whose step is written once in StepBlocks.
func ExampleStepBlocks() {
	st, _ := manifold.NewStiefel[float64](8, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	w, target, g := make([]float64, 24), make([]float64, 24), make([]float64, 24)
	_ = st.Random(w, rng)
	_ = st.Random(target, rng)
	p := optim.Param{Name: "w", Shape: []int{8, 3}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](w), Grad: optim.Host[float64](g)}
	s, err := optim.NewSolver([]optim.Param{p}, []optim.Group{{Rule: nesterov{beta: 0.5}, LR: 0.2}}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	gap := func() (d float64) { // ||W - T||^2 / 2
		for i := range w {
			d += (w[i] - target[i]) * (w[i] - target[i]) / 2
		}
		return d
	}
	before := gap()
	for range 100 {
		for i := range g {
			g[i] = w[i] - target[i]
		}
		if err := s.Step(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("closer to the target:", gap() < before/100)
	fmt.Println("on the manifold:", st.Feasibility(w) < 1e-12)
	fmt.Println("state:", s.State()[0].Kind, len(s.State()[0].Buffers[optim.StateMomentum].([]float64)))
	// Output:
	// closer to the target: true
	// on the manifold: true
	// state: nesterov 24
}
