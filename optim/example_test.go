package optim_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// nearestFrame is F(X) = ||X - C||^2 / 2 for a fixed C; its minimizer over the
// Stiefel manifold is the orthonormal polar factor of C.
type nearestFrame struct{ c []float64 }

func (f nearestFrame) value(x []float64) float64 {
	var s float64
	for i := range x {
		d := x[i] - f.c[i]
		s += d * d
	}
	return s / 2
}

func (f nearestFrame) grad(dst, x []float64) {
	for i := range x {
		dst[i] = x[i] - f.c[i]
	}
}

// Train a 50 x 10 orthonormal weight with RSDM-P: each step rotates 12
// random rows inside O(12).
func ExampleRSDM() {
	const n, p = 50, 10
	rng := rand.New(rand.NewPCG(1, 2))
	st, err := manifold.NewStiefel[float64](n, p)
	if err != nil {
		panic(err)
	}
	c := make([]float64, n*p)
	for i := range c {
		c[i] = rng.NormFloat64()
	}
	f := nearestFrame{c}
	w := make([]float64, n*p)
	if err := st.Random(w, rng); err != nil {
		panic(err)
	}

	opt, err := optim.NewRSDM(st, optim.RSDMConfig{LR: 0.5, SubmanifoldSize: 12, Sampling: optim.Permutation, Seed: 7})
	if err != nil {
		panic(err)
	}
	g := make([]float64, n*p)
	start := f.value(w)
	for step := 0; step < 3000; step++ {
		f.grad(g, w)
		if err := opt.Step(w, g); err != nil {
			panic(err)
		}
	}
	f.grad(g, w)
	if err := st.Proj(g, w, g); err != nil {
		panic(err)
	}
	var gnorm float64
	for _, v := range g {
		gnorm += v * v
	}
	fmt.Printf("loss fell: %v\n", f.value(w) < start)
	fmt.Printf("||grad F(W)|| < 1e-6: %v\n", gnorm < 1e-12)
	fmt.Printf("||W^T W - I||_F < 1e-12: %v\n", st.Feasibility(w) < 1e-12)
	// Output:
	// loss fell: true
	// ||grad F(W)|| < 1e-6: true
	// ||W^T W - I||_F < 1e-12: true
}

// RGD with momentum and the Cayley retraction, in float32.
func ExampleRGD() {
	const n, p = 30, 5
	rng := rand.New(rand.NewPCG(3, 4))
	st, err := manifold.NewStiefel[float32](n, p)
	if err != nil {
		panic(err)
	}
	st.Retraction = manifold.Cayley
	w := make([]float32, n*p)
	if err := st.Random(w, rng); err != nil {
		panic(err)
	}
	target := make([]float32, n*p)
	if err := st.Random(target, rng); err != nil {
		panic(err)
	}
	opt, err := optim.NewRGD(st, optim.RGDConfig{LR: 0.2, Momentum: 0.5})
	if err != nil {
		panic(err)
	}
	// F(W) = -<W, target>: maximize alignment with another frame.
	g := make([]float32, n*p)
	for i := range g {
		g[i] = -target[i]
	}
	for step := 0; step < 200; step++ {
		if err := opt.Step(w, g); err != nil {
			panic(err)
		}
	}
	var align float64
	for i := range w {
		align += float64(w[i] * target[i])
	}
	fmt.Printf("<W, target> = %.3f (the maximum is %d)\n", align, p)
	fmt.Printf("||W^T W - I||_F < 1e-5: %v\n", st.Feasibility(w) < 1e-5)
	// Output:
	// <W, target> = 5.000 (the maximum is 5)
	// ||W^T W - I||_F < 1e-5: true
}
