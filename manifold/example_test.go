package manifold_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/manifold"
)

// A Riemannian gradient step by hand: project a Euclidean gradient onto the
// tangent space, then retract.
func ExampleStiefel() {
	st, err := manifold.NewStiefel[float64](6, 3)
	if err != nil {
		panic(err)
	}
	st.Retraction = manifold.Polar
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, 6*3)
	if err := st.Random(x, rng); err != nil {
		panic(err)
	}
	g := make([]float64, len(x))
	for i := range g {
		g[i] = rng.NormFloat64()
	}
	if err := st.Proj(g, x, g); err != nil { // Riemannian gradient
		panic(err)
	}
	for i := range g {
		g[i] *= -0.1
	}
	if err := st.Retract(x, x, g); err != nil {
		panic(err)
	}
	fmt.Printf("%v: ||X^T X - I||_F < 1e-14: %v\n", st, st.Feasibility(x) < 1e-14)

	if _, err := manifold.NewStiefel[float64](3, 6); err != nil {
		fmt.Println(err)
	}
	// Output:
	// Stiefel(6, 3): ||X^T X - I||_F < 1e-14: true
	// manifold: n = 3 < p = 6, want n >= p
}

// Draw the rows that one RSDM-P step will touch.
func ExamplePermutation() {
	s, err := manifold.NewPermutation(1_000_000, 4)
	if err != nil {
		panic(err)
	}
	idx := make([]int, 4)
	if err := s.Sample(idx, rand.New(rand.NewPCG(1, 1))); err != nil {
		panic(err)
	}
	distinct := map[int]bool{}
	for _, i := range idx {
		distinct[i] = true
	}
	fmt.Println(len(distinct), "distinct rows out of 1,000,000")
	// Output:
	// 4 distinct rows out of 1,000,000
}
