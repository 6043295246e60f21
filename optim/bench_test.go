package optim

import (
	"fmt"
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// BenchmarkStep times one step of each method on a square float32 weight and
// reports its rate; BenchmarkStep/sgemm gives the machine's rate to compare.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{256, 1024} {
		r := n * 300 / 1024
		rng := newRNG(1)
		st, _ := manifold.NewStiefel[float32](n, n)
		x := make([]float32, n*n)
		_ = st.Random(x, rng)
		g := make([]float32, n*n)
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		b.Run(fmt.Sprintf("sgemm/n=%d", n), func(b *testing.B) {
			c := make([]float32, n*n)
			for b.Loop() {
				linalg.Mul(false, false, n, n, n, x, g, c)
			}
			b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		for _, s := range []Sampler{Permutation, Orthogonal} {
			b.Run(fmt.Sprintf("rsdm-%v/n=%d/r=%d", s, n, r), func(b *testing.B) {
				opt, err := NewRSDM(st, RSDMConfig{LR: 1e-3, SubmanifoldSize: r, Sampling: s, ReorthEvery: -1})
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := opt.Step(x, g); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("rgd-qr/n=%d", n), func(b *testing.B) {
			opt, _ := NewRGD(st, RGDConfig{LR: 1e-3})
			for b.Loop() {
				if err := opt.Step(x, g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
