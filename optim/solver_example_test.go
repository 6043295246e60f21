package optim_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// ExampleSolver steps three parameters held in plain slices, without
// Gorgonia: a 64-row and a 16-row weight on the Stiefel manifold in
// separate groups (RSDM with r = 24 and r = 6, the first with a warmup then a
// cosine schedule) and a bias by AdamW. Each weight is pulled towards a
// target matrix T (the loss ||W - T||^2 / 2, gradient W - T), whose nearest
// point on the manifold is the closest a weight can get.
func ExampleSolver() {
	rng := rand.New(rand.NewPCG(1, 2))
	weight := func(name string, n, p int) (optim.Param, []float64) {
		st, _ := manifold.NewStiefel[float64](n, p)
		w := make([]float64, n*p)
		_ = st.Random(w, rng)
		target := make([]float64, n*p)
		for i := range target {
			target[i] = rng.NormFloat64()
		}
		return optim.Param{Name: name, Shape: []int{n, p}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](w), Grad: optim.Host[float64](make([]float64, n*p))}, target
	}
	big, tBig := weight("big", 64, 8)
	small, tSmall := weight("small", 16, 4)
	bias := optim.Param{Name: "bias", Shape: []int{4}, Value: optim.Host[float64]([]float64{1, 1, 1, 1}), Grad: optim.Host[float64](make([]float64, 4))}
	tBias := []float64{0.5, -0.5, 0.25, 0}

	solver, err := optim.NewSolver([]optim.Param{big, small, bias}, []optim.Group{
		{Select: func(p optim.Param) bool { return p.Rows() >= 64 }, LR: 0.5,
			Schedule: optim.WarmupCosine{Warmup: 20, Steps: 400}, Rule: optim.RSDMConfig{SubmanifoldSize: 24, Seed: 1}},
		{Select: optim.Param.Constrained, LR: 0.5, Rule: optim.RSDMConfig{SubmanifoldSize: 6, Seed: 1}},
		{Rule: optim.AdamWConfig{}, LR: 0.05, WeightDecay: 0.01},
	}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	gap := func(p optim.Param, target []float64) float64 { // ||W - T||^2 / 2
		var s float64
		for i, w := range p.Value.(optim.Host[float64]) {
			s += (w - target[i]) * (w - target[i]) / 2
		}
		return s
	}
	start := []float64{gap(big, tBig), gap(small, tSmall), gap(bias, tBias)}
	for step := 0; step < 400; step++ {
		for _, pt := range []struct {
			p optim.Param
			t []float64
		}{{big, tBig}, {small, tSmall}, {bias, tBias}} {
			g := pt.p.Grad.(optim.Host[float64])
			for i, w := range pt.p.Value.(optim.Host[float64]) {
				g[i] = w - pt.t[i]
			}
		}
		if err := solver.Step(); err != nil {
			log.Fatal(err)
		}
	}
	stBig, _ := manifold.NewStiefel[float64](64, 8)
	stSmall, _ := manifold.NewStiefel[float64](16, 4)
	fmt.Println("every loss fell:", gap(big, tBig) < start[0] && gap(small, tSmall) < start[1] && gap(bias, tBias) < start[2])
	fmt.Println("weights on the manifold:", stBig.Feasibility(big.Value.(optim.Host[float64])) < 1e-12 && stSmall.Feasibility(small.Value.(optim.Host[float64])) < 1e-12)
	fmt.Println("steps:", solver.Steps(), "last step size of the big weight's group:", solver.LR(0))
	// Output:
	// every loss fell: true
	// weights on the manifold: true
	// steps: 400 last step size of the big weight's group: 0
}
