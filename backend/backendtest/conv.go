package backendtest

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/backend"
)

// convCases are the convolution and pooling kernels' cases for float type
// dt: asymmetric kernels, paddings, strides and dilations, one channel and
// several, one image and several, the fused kernels in chunks that do not
// divide the batch, and poolings with ties, overlapping windows and windows
// in the padding.
func convCases(dt backend.DType, g gen) []Case {
	var cs []Case
	add := func(name string, kernel backend.Kernel, out []int, bufs ...any) {
		cs = append(cs, Case{Name: name, Bufs: bufs, Float: dt, Kernel: kernel, Out: out})
	}
	geoms := []backend.ConvGeom{
		{B: 2, C: 3, H: 5, W: 7, KH: 3, KW: 2, PadH: 1, PadW: 2, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2},
		{B: 1, C: 1, H: 6, W: 4, KH: 2, KW: 3, StrideH: 1, StrideW: 1, DilH: 2, DilW: 1},
		{B: 5, C: 2, H: 4, W: 9, KH: 1, KW: 3, PadW: 1, StrideH: 1, StrideW: 3, DilH: 1, DilW: 1},
		{B: 3, C: 2, H: 4, W: 4, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{B: 3, C: 2, H: 17, W: 16, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{B: 2, C: 2, H: 2, W: 3, KH: 2, KW: 3, PadH: 3, PadW: 4, StrideH: 1, StrideW: 1, DilH: 6, DilW: 4},
		{B: 2, C: 2, H: 3, W: 3, KH: 1, KW: 2, PadH: 0, PadW: 10, StrideH: 1, StrideW: 1, DilH: 1, DilW: 20},
	}
	for _, geo := range geoms {
		oh, ow := geo.Out()
		in, p, k := geo.B*geo.C*geo.H*geo.W, oh*ow, geo.Patch()
		add(fmt.Sprintf("im2col/%v", geo), backend.Im2col{Geom: geo, Src: at(slot(0)), Dst: at(slot(1))},
			[]int{1}, g.normal(in, 1), g.normal(geo.B*p*k, 1))
		add(fmt.Sprintf("col2im/%v", geo), backend.Col2im{Geom: geo, Src: at(slot(0)), Dst: at(slot(1))},
			[]int{1}, g.normal(geo.B*p*k, 1), g.normal(in, 1))
		for _, chunk := range []int{0, 2} {
			const f = 4
			add(fmt.Sprintf("conv/%v/chunk%d", geo, chunk),
				backend.Conv{Geom: geo, F: f, Chunk: chunk, X: at(slot(0)), W: at(slot(1)), Y: at(slot(2))},
				[]int{2}, g.normal(in, 1), g.normal(f*k, 1), g.normal(geo.B*f*p, 1))
			add(fmt.Sprintf("conv-grad-input/%v/chunk%d", geo, chunk),
				backend.ConvGradInput{Geom: geo, F: f, Chunk: chunk, DY: at(slot(0)), W: at(slot(1)), DX: at(slot(2))},
				[]int{2}, g.normal(geo.B*f*p, 1), g.normal(f*k, 1), g.normal(in, 1))
			add(fmt.Sprintf("conv-grad-filter/%v/chunk%d", geo, chunk),
				backend.ConvGradFilter{Geom: geo, F: f, Chunk: chunk, X: at(slot(0)), DY: at(slot(1)), DW: at(slot(2))},
				[]int{2}, g.normal(in, 1), g.normal(geo.B*f*p, 1), g.normal(f*k, 1))
		}
	}
	pools := []backend.PoolGeom{
		{B: 2, C: 3, H: 5, W: 7, KH: 2, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 2, OutH: 6, OutW: 4},
		{B: 1, C: 2, H: 6, W: 6, KH: 2, KW: 2, StrideH: 2, StrideW: 2, OutH: 3, OutW: 3},
		{B: 2, C: 2, H: 5, W: 7, KH: 2, KW: 2, StrideH: 2, StrideW: 2, OutH: 2, OutW: 3}, // odd sides left out
		// Windows wholly in the padding (rows, then columns of windows),
		// as gorgonia makes them with a padding not below the window.
		{B: 1, C: 1, H: 4, W: 5, KH: 1, KW: 2, PadH: 2, PadW: 0, StrideH: 1, StrideW: 1, OutH: 8, OutW: 4},
		{B: 1, C: 2, H: 3, W: 4, KH: 2, KW: 1, PadH: 0, PadW: 2, StrideH: 1, StrideW: 2, OutH: 2, OutW: 4},
	}
	for _, geo := range pools {
		in, out := geo.B*geo.C*geo.H*geo.W, geo.B*geo.C*geo.OutH*geo.OutW
		// Values on a grid of halves, so that windows meet ties (and,
		// rectified, many zeros).
		for _, rect := range []bool{false, true} {
			add(fmt.Sprintf("max-pool/%v/rectify%v", geo, rect), backend.MaxPool{Geom: geo, Rectify: rect, X: at(slot(0)), Y: at(slot(1))},
				[]int{1}, g.halves(in), g.normal(out, 1))
			x := g.halves(in)
			add(fmt.Sprintf("max-pool-grad/%v/rectify%v", geo, rect), backend.MaxPoolGrad{Geom: geo, Rectify: rect, X: at(slot(0)), Y: at(slot(1)), DY: at(slot(2)), DX: at(slot(3))},
				[]int{3}, x, maxPool(geo, rect, x, dt), g.normal(out, 1), g.normal(in, 1))
		}
		add(fmt.Sprintf("avg-pool/%v", geo), backend.AvgPool{Geom: geo, X: at(slot(0)), Y: at(slot(1))},
			[]int{1}, g.normal(in, 1), g.normal(out, 1))
		add(fmt.Sprintf("avg-pool-grad/%v", geo), backend.AvgPoolGrad{Geom: geo, DY: at(slot(0)), DX: at(slot(1))},
			[]int{1}, g.normal(out, 1), g.normal(in, 1))
	}
	return cs
}

// maxPool returns MaxPool's output for x (rectified first with rect), a
// reference for MaxPoolGrad's Y.
func maxPool(g backend.PoolGeom, rect bool, x []float64, dt backend.DType) []float64 {
	low := -math.MaxFloat64
	if dt == backend.Float32 {
		low = -math.MaxFloat32
	}
	y := make([]float64, g.B*g.C*g.OutH*g.OutW)
	for pl := range g.B * g.C {
		for r := range g.OutH {
			for c := range g.OutW {
				m := low
				for h := max(r*g.StrideH-g.PadH, 0); h < min(r*g.StrideH-g.PadH+g.KH, g.H); h++ {
					for w := max(c*g.StrideW-g.PadW, 0); w < min(c*g.StrideW-g.PadW+g.KW, g.W); w++ {
						v := x[(pl*g.H+h)*g.W+w]
						if rect && !(v >= 0) {
							v *= 0
						}
						if v > m {
							m = v
						}
					}
				}
				y[(pl*g.OutH+r)*g.OutW+c] = m
			}
		}
	}
	return y
}
