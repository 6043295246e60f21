package backendtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/backend"
)

// normCases are the cases of batch normalization, gorgonia's dropout and
// its random draws for float type dt, from a stream of their own.
func normCases(dt backend.DType) []Case {
	g := gen{rand.New(rand.NewPCG(31, uint64(dt)))}
	var cs []Case
	add := func(name string, kernel backend.Kernel, out []int, bufs ...any) {
		cs = append(cs, Case{Name: name, Bufs: bufs, Float: dt, Kernel: kernel, Out: out})
	}
	f64 := func(bufs ...int) { cs[len(cs)-1].F64 = bufs }

	// Batch normalization: matrices (spatial 1), images, channels of more
	// values than a block's threads, more channels than a grid's blocks
	// under a grid cap; training (the running statistics are outputs too)
	// and inference.
	for _, s := range [][3]int{{7, 5, 1}, {3, 4, 9}, {2, 3, 300}, {33, 300, 1}} {
		b, c, sp := s[0], s[1], s[2]
		n := b * c * sp
		x := g.normal(n, 2)
		for i := range x {
			x[i] += 1.5 // channels away from zero mean
		}
		for _, training := range []bool{true, false} {
			add(fmt.Sprintf("batch-norm/training%v/%v", training, s),
				backend.BatchNorm{Batch: b, C: c, Spatial: sp, Momentum: 0.1, Eps: 1e-5, Training: training,
					X: at(slot(0)), Y: at(slot(1)), Mean: at(slot(2)), Var: at(slot(3))},
				[]int{1, 2, 3}, x, g.normal(n, 1), g.normal(c, 1), g.uniform(c, 0.5, 2))
			add(fmt.Sprintf("batch-norm-grad/training%v/%v", training, s),
				backend.BatchNormGrad{Batch: b, C: c, Spatial: sp, Eps: 1e-5, Training: training,
					X: at(slot(0)), DY: at(slot(1)), Var: at(slot(2)), DX: at(slot(3))},
				[]int{3}, x, g.normal(n, 1), g.uniform(c, 0.5, 2), g.normal(n, 1))
		}
	}

	// Dropout, in place and not; random draws of each distribution.
	for _, c := range []struct {
		p       float64
		step    float64
		inPlace bool
	}{{0.1, 0, false}, {0.5, 7, true}, {0, 3, false}} {
		y := 1
		if c.inPlace {
			y = 0
		}
		add(fmt.Sprintf("dropout/p%v/step%v/in-place%v", c.p, c.step, c.inPlace),
			backend.Dropout{N: 5000, P: c.p, Seed: 42, Stream: 1<<32 + 5, X: at(slot(0)), Y: at(slot(y)), Step: at(slot(2))},
			[]int{0, 1}, g.normal(5000, 1), g.normal(5000, 1), []float64{c.step})
		f64(2)
	}
	for _, c := range []struct {
		dist backend.RandomDist
		a, b float64
	}{{backend.DrawUniform, -1, 3}, {backend.DrawGaussian, 0.5, 2}, {backend.DrawBinomial, 5, 0.3}, {backend.DrawBinomial, 1, 1}, {backend.DrawBinomial, 0, 0.5}} {
		add(fmt.Sprintf("random/%v/%v-%v", c.dist, c.a, c.b),
			backend.Random{Dist: c.dist, N: 3000, A: c.a, B: c.b, Seed: 9, Stream: 1<<32 + 2, Dst: backend.At(slot(0), 1), Step: at(slot(1))},
			[]int{0}, g.normal(3001, 1), []float64{11})
		f64(1)
	}
	return cs
}
