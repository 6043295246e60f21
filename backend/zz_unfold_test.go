package backend

import (
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
)

func BenchmarkZZUnfold(b *testing.B) {
	g := ConvGeom{B: 32, C: 32, H: 14, W: 14, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	_, pp, kk := g.sizes()
	x := make([]float32, 32*32*14*14)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	n := 2
	col := make([]float32, kk*n*pp)
	w := make([]float32, 64*kk)
	y := make([]float32, 64*n*pp)
	b.Run("unfold", func(b *testing.B) {
		for range b.N {
			unfold(g, x, 0, n, col, colLayout{pp, n * pp, 1})
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(col)), "ns/elem")
	})
	b.Run("fold", func(b *testing.B) {
		for range b.N {
			fold(g, col, colLayout{pp, n * pp, 1}, x, 0, n)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(col)), "ns/elem")
	})
	b.Run("gemm", func(b *testing.B) {
		for range b.N {
			linalg.Gemm(false, false, 64, n*pp, kk, 1, w, kk, col, n*pp, 0, y, n*pp)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(col)), "ns/elem")
	})
}
