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
// in the padding (poolCases).
func convCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	geoms := []backend.ConvGeom{
		{B: 2, C: 3, H: 5, W: 7, KH: 3, KW: 2, PadH: 1, PadW: 2, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2},
		{B: 1, C: 1, H: 6, W: 4, KH: 2, KW: 3, StrideH: 1, StrideW: 1, DilH: 2, DilW: 1},
		{B: 5, C: 2, H: 4, W: 9, KH: 1, KW: 3, PadW: 1, StrideH: 1, StrideW: 3, DilH: 1, DilW: 1},
		{B: 3, C: 2, H: 4, W: 4, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{B: 3, C: 2, H: 17, W: 16, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{B: 2, C: 2, H: 2, W: 3, KH: 2, KW: 3, PadH: 3, PadW: 4, StrideH: 1, StrideW: 1, DilH: 6, DilW: 4},
		{B: 2, C: 2, H: 3, W: 3, KH: 1, KW: 2, PadH: 0, PadW: 10, StrideH: 1, StrideW: 1, DilH: 1, DilW: 20},
		// 3 x 3 kernels of stride 1 between many channels, which the CPU
		// runs by Winograd's algorithm: outputs of odd sides, paddings 0
		// to 2.
		{B: 3, C: 16, H: 5, W: 7, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{B: 2, C: 17, H: 6, W: 4, KH: 3, KW: 3, PadH: 0, PadW: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{B: 2, C: 16, H: 4, W: 5, KH: 3, KW: 3, PadH: 2, PadW: 0, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
	}
	for _, geo := range geoms {
		oh, ow := geo.Out()
		in, p, k := geo.B*geo.C*geo.H*geo.W, oh*ow, geo.Patch()
		l.add(fmt.Sprintf("im2col/%v", geo), backend.Im2col{Geom: geo, Src: at(slot(0)), Dst: at(slot(1))},
			[]int{1}, g.normal(in, 1), g.normal(geo.B*p*k, 1))
		l.add(fmt.Sprintf("col2im/%v", geo), backend.Col2im{Geom: geo, Src: at(slot(0)), Dst: at(slot(1))},
			[]int{1}, g.normal(geo.B*p*k, 1), g.normal(in, 1))
		f := 4
		if geo.C >= 16 {
			f = 18
		}
		for _, chunk := range []int{0, 2} {
			l.add(fmt.Sprintf("conv/%v/f%d/chunk%d", geo, f, chunk),
				backend.Conv{Geom: geo, F: f, Chunk: chunk, X: at(slot(0)), W: at(slot(1)), Y: at(slot(2))},
				[]int{2}, g.normal(in, 1), g.normal(f*k, 1), g.normal(geo.B*f*p, 1))
			l.add(fmt.Sprintf("conv-grad-input/%v/chunk%d", geo, chunk),
				backend.ConvGradInput{Geom: geo, F: f, Chunk: chunk, DY: at(slot(0)), W: at(slot(1)), DX: at(slot(2))},
				[]int{2}, g.normal(geo.B*f*p, 1), g.normal(f*k, 1), g.normal(in, 1))
			l.add(fmt.Sprintf("conv-grad-filter/%v/chunk%d", geo, chunk),
				backend.ConvGradFilter{Geom: geo, F: f, Chunk: chunk, X: at(slot(0)), DY: at(slot(1)), DW: at(slot(2))},
				[]int{2}, g.normal(in, 1), g.normal(geo.B*f*p, 1), g.normal(f*k, 1))
		}
	}
	l.cs = append(l.cs, convPoolCases(dt, g)...)
	return append(l.cs, poolCases(dt, g)...)
}

// poolCases are the max and average poolings' and their gradients': ties,
// overlapping windows, odd sides left out and windows in the padding.
func poolCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
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
			l.add(fmt.Sprintf("max-pool/%v/rectify%v", geo, rect), backend.MaxPool{Geom: geo, Rectify: rect, X: at(slot(0)), Y: at(slot(1))},
				[]int{1}, g.halves(in), g.normal(out, 1))
			x := g.halves(in)
			l.add(fmt.Sprintf("max-pool-grad/%v/rectify%v", geo, rect), backend.MaxPoolGrad{Geom: geo, Rectify: rect, X: at(slot(0)), Y: at(slot(1)), DY: at(slot(2)), DX: at(slot(3))},
				[]int{3}, x, maxPool(geo, rect, x, dt), g.normal(out, 1), g.normal(in, 1))
		}
		l.add(fmt.Sprintf("avg-pool/%v", geo), backend.AvgPool{Geom: geo, X: at(slot(0)), Y: at(slot(1))},
			[]int{1}, g.normal(in, 1), g.normal(out, 1))
		l.add(fmt.Sprintf("avg-pool-grad/%v", geo), backend.AvgPoolGrad{Geom: geo, DY: at(slot(0)), DX: at(slot(1))},
			[]int{1}, g.normal(out, 1), g.normal(in, 1))
	}
	return l.cs
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

// convPoolCases are ConvPool's and its gradients' cases: 2 x 2 tiles with an
// odd side left out, overlapping windows in the padding after a strided
// and dilated convolution, images wide enough for the CPU to multiply one
// at a time, and channels enough for Winograd's algorithm; with and without bias, dropout and Arg, in chunks that do
// not divide the batch. Inputs and filters on a grid of halves give the
// windows ties and zeros.
func convPoolCases(dt backend.DType, g gen) []Case {
	var cs []Case
	conv3 := func(b, c, h, w int) backend.ConvGeom {
		return backend.ConvGeom{B: b, C: c, H: h, W: w, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	}
	for _, c := range []struct {
		geo backend.ConvGeom
		f   int
		// The pooling's window, padding, stride and output (its input is
		// the convolution's output).
		kh, kw, padH, padW, strideH, strideW, outH, outW int
	}{
		{conv3(3, 2, 6, 5), 4, 2, 2, 0, 0, 2, 2, 3, 2},
		{backend.ConvGeom{B: 2, C: 3, H: 5, W: 7, KH: 3, KW: 2, PadH: 1, PadW: 2, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2}, 3, 2, 3, 1, 1, 1, 2, 4, 5},
		{conv3(3, 2, 17, 16), 4, 2, 2, 0, 0, 2, 2, 8, 8},
		{conv3(3, 16, 6, 7), 17, 2, 2, 0, 0, 2, 2, 3, 3}, // by Winograd's algorithm on the CPU
	} {
		geo, f := c.geo, c.f
		oh, ow := geo.Out()
		pg := backend.PoolGeom{B: geo.B, C: f, H: oh, W: ow, KH: c.kh, KW: c.kw, PadH: c.padH, PadW: c.padW,
			StrideH: c.strideH, StrideW: c.strideW, OutH: c.outH, OutW: c.outW}
		for _, chunk := range []int{0, 2} {
			cs = append(cs, convPoolChunkCases(dt, g, geo, f, pg, chunk)...)
		}
	}
	return cs
}

// convPoolChunkCases are the cases of ConvPool and its gradients of
// convolution geo with f filters and pooling pg, in chunks of chunk images:
// with and without bias, dropout and Arg, and (unchunked, without Winograd's
// algorithm) with non-finite images.
func convPoolChunkCases(dt backend.DType, g gen, geo backend.ConvGeom, f int, pg backend.PoolGeom, chunk int) []Case {
	var cs []Case
	add := func(name string, kernel backend.Kernel, out, f64 []int, bufs ...any) {
		cs = append(cs, Case{Name: name, Bufs: bufs, Float: dt, Kernel: kernel, Out: out, F64: f64})
	}
	in, k := geo.B*geo.C*geo.H*geo.W, geo.Patch()
	out := geo.B * f * pg.OutH * pg.OutW
	for _, v := range []struct {
		bias, arg bool
		drop      float64
	}{{false, true, 0}, {true, true, 0.3}, {true, false, 0}, {false, false, 0.5}} {
		kern := backend.ConvPool{Geom: geo, F: f, Pool: pg, Chunk: chunk, X: at(slot(0)), W: at(slot(1)), Y: at(slot(2)),
			DropP: v.drop, Seed: 5, Stream: 1<<32 + 9, Step: at(slot(5))}
		if v.bias {
			kern.Bias = at(slot(3))
		}
		outs := []int{2}
		if v.arg {
			kern.Arg, outs = at(slot(4)), []int{2, 4}
		}
		add(fmt.Sprintf("conv-pool/%v/%v/chunk%d/bias%v/arg%v/drop%v", geo, pg, chunk, v.bias, v.arg, v.drop), kern, outs, []int{5},
			g.halves(in), g.halves(f*k), g.normal(out, 1), g.halves(f), make([]int32, out), []float64{3})
	}
	if chunk == 0 && geo.C < 16 { // (Winograd's transforms spread a non-finite value over a tile)
		// NaNs and infinities in the images make windows of NaNs,
		// of -Inf alone and of infinities among finite values.
		// (The filter has no zeros: gonum's GEMM, the CPU's in
		// the build without OpenBLAS, skips them, and a NaN with
		// them.)
		x := g.halves(in)
		x[5], x[in/3], x[in/2], x[2*in/3] = math.NaN(), math.Inf(-1), math.Inf(1), math.Inf(-1)
		add(fmt.Sprintf("conv-pool-special/%v/%v", geo, pg),
			backend.ConvPool{Geom: geo, F: f, Pool: pg, X: at(slot(0)), W: at(slot(1)), Y: at(slot(2)), Arg: at(slot(3))},
			[]int{2, 3}, nil, x, g.uniform(f*k, -1, 1), g.normal(out, 1), make([]int32, out))
	}
	for _, drop := range []float64{0, 0.3} {
		arg := g.poolArg(pg)
		add(fmt.Sprintf("conv-pool-grad-input/%v/%v/chunk%d/drop%v", geo, pg, chunk, drop),
			backend.ConvPoolGradInput{Geom: geo, F: f, Pool: pg, Chunk: chunk, DropP: drop, DY: at(slot(0)), Arg: at(slot(1)), W: at(slot(2)), DX: at(slot(3))},
			[]int{3}, nil, g.normal(out, 1), arg, g.normal(f*k, 1), g.normal(in, 1))
		add(fmt.Sprintf("conv-pool-grad-filter/%v/%v/chunk%d/drop%v", geo, pg, chunk, drop),
			backend.ConvPoolGradFilter{Geom: geo, F: f, Pool: pg, Chunk: chunk, DropP: drop, X: at(slot(0)), DY: at(slot(1)), Arg: at(slot(2)), DW: at(slot(3))},
			[]int{3}, nil, g.normal(in, 1), g.normal(out, 1), arg, g.normal(f*k, 1))
		if chunk == 0 {
			add(fmt.Sprintf("conv-pool-grad-bias/%v/drop%v", pg, drop),
				backend.ConvPoolGradBias{Pool: pg, DropP: drop, DY: at(slot(0)), Arg: at(slot(1)), DB: at(slot(2))},
				[]int{2}, nil, g.normal(out, 1), arg, g.normal(f, 1))
		}
	}
	return cs
}

// poolArg returns an Arg as ConvPool records it for pooling g: for each
// window, -1 (a fifth of them) or an element inside it with random step and
// keep bits; windows that overlap take some elements twice.
func (g gen) poolArg(pg backend.PoolGeom) []int32 {
	var arg []int32
	for range pg.B * pg.C {
		for y := range pg.OutH {
			for x := range pg.OutW {
				h0, w0 := max(y*pg.StrideH-pg.PadH, 0), max(x*pg.StrideW-pg.PadW, 0)
				h1, w1 := min(y*pg.StrideH-pg.PadH+pg.KH, pg.H), min(x*pg.StrideW-pg.PadW+pg.KW, pg.W)
				if h0 >= h1 || w0 >= w1 || g.r.IntN(5) == 0 {
					arg = append(arg, -1)
					continue
				}
				pos := (h0+g.r.IntN(h1-h0))*pg.W + w0 + g.r.IntN(w1-w0)
				arg = append(arg, int32(pos<<2|g.r.IntN(4)))
			}
		}
	}
	return arg
}
