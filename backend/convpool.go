package backend

import (
	"fmt"
	"math/bits"

	"github.com/orthonet/orthonet/internal/linalg"
)

// A convolution followed by a channel bias, gorgonia.Rectify, max pooling
// and dropout, in one kernel (ConvPool), and its gradients (ConvPoolGradInput,
// ConvPoolGradFilter, ConvPoolGradBias): the CPU pools a chunk of images
// while their product is in cache, and neither the convolution's output nor
// its gradient is written whole. What the gradients need of the forward
// pass (which element each window took, its rectifier's step, the dropout's
// keep) the forward records in Arg, an int32 per pooled element.
var _ = []defined{ConvPool{}, ConvPoolGradInput{}, ConvPoolGradFilter{}, ConvPoolGradBias{}}

// ConvPool writes into Y (B, F, Pool.OutH, Pool.OutW) the images X
// (B, C, H, W) convolved with the filter W as Conv convolves them, Bias[f]
// added to filter f's output where Bias has a buffer, rectified and max
// pooled as MaxPool with Rectify pools, then, where DropP > 0, dropped out
// as Dropout drops out (probability DropP, Seed, Stream, the step at Step;
// element i of Y is Dropout's element i): MaxPool(Rectify(Conv(X, W) +
// Bias)), and Dropout of it, as the separate kernels compute them.
//
// Where Arg (Int32, one element per element of Y) has a buffer, ConvPool
// records in it what the gradients need: -1 where the window took no
// element, else pos<<2 | step<<1 | keep, with pos the element the window
// took (its index in its OutH x OutW plane of the convolution's output, as
// MaxPoolGrad finds it), step 1 where that element (the bias added) is
// >= 0, keep 1 where the dropout kept the pooled element (always without
// dropout).
type ConvPool struct {
	Geom ConvGeom
	F    int
	// Pool is the pooling of the convolution's output: Pool.B, C, H and W
	// are Geom.B, F and the output's height and width.
	Pool         PoolGeom
	X, W, Bias   Operand
	DropP        float64
	Seed, Stream uint64
	Step         Operand
	Y, Arg       Operand
	// Chunk is how many images are unfolded at a time, as Conv's.
	Chunk int
}

// maxPlaneArg bounds the convolution's output planes that Arg can index.
const maxPlaneArg = 1 << 28

// checkConvPool checks a ConvPool's or its gradients' geometries (the
// pooling's input is the convolution's output) and dropout probability,
// then their operands as checkAll does.
func checkConvPool(k Kernel, g ConvGeom, f, chunk int, pg PoolGeom, dropP float64, dt DType, ops ...any) error {
	if err := checkConvGeom(k, g, f, chunk); err != nil {
		return err
	}
	if err := pg.checkFor(k); err != nil {
		return err
	}
	oh, ow := g.Out()
	if pg.B != g.B || pg.C != f || pg.H != oh || pg.W != ow {
		return fmt.Errorf("backend: %s: pooling %v of a convolution's %d x %d x %d x %d output", Name(k), pg, g.B, f, oh, ow)
	}
	if oh*ow > maxPlaneArg {
		return fmt.Errorf("backend: %s: output planes of %d x %d, more than %d elements", Name(k), oh, ow, maxPlaneArg)
	}
	if !(dropP >= 0 && dropP < 1) {
		return fmt.Errorf("backend: %s: dropout probability %v, want [0, 1)", Name(k), dropP)
	}
	return checkAll(k, dt, ops...)
}

// Check checks the geometries, the probability and the operands.
func (k ConvPool) Check() error {
	in, _, kk := k.Geom.sizes()
	_, out := k.Pool.sizes()
	dt := DTypeOf(k.Y)
	if err := checkConvPool(k, k.Geom, k.F, k.Chunk, k.Pool, k.DropP,
		dt, "X", k.X, in, "W", k.W, k.F*kk, "Y", k.Y, out); err != nil {
		return err
	}
	if k.Bias.Buf != nil {
		if err := checkAll(k, dt, "bias", k.Bias, k.F); err != nil {
			return err
		}
	}
	if k.Arg.Buf != nil {
		if err := checkAll(k, Int32, "arg", k.Arg, out); err != nil {
			return err
		}
	}
	if k.DropP > 0 {
		return checkAll(k, Float64, "step", k.Step, 1)
	}
	return nil
}

// Host unfolds a chunk of images at a time into a thread's workspace,
// multiplies it by the filter into another (one GEMM for the chunk, or for
// wide images one per image), and pools the products there; or, where
// Winograd's algorithm applies (winograd), transforms the chunk's tiles
// and pools its output planes.
func (k ConvPool) Host(p *Pool) (Func, error) {
	return onFloats(p, k, convPoolHost[float32], convPoolHost[float64])
}

// Device unfolds a chunk of images at a time (n K x P blocks), multiplies
// them by the filter in one strided batched GEMM into a workspace, and
// launches on_conv_pool, a thread per pooled element.
func (k ConvPool) Device(p Planner) {
	g, f := k.Geom, k.F
	_, pp, kk := g.sizes()
	op := k.Pool.OutH * k.Pool.OutW
	dt := DTypeOf(k.Y)
	nb := deviceImages(g, k.Chunk)
	col, cs := p.Scratch(dt, kk*nb*pp), p.Scratch(dt, f*nb*pp)
	for b0 := 0; b0 < g.B; b0 += nb {
		n := min(nb, g.B-b0)
		unfoldDevice(p, g, n, colLayout{kk * pp, pp, 1}, p.Addr(At(k.X.Buf, k.X.Off+b0*g.C*g.H*g.W)), col)
		p.Gemm(DeviceGemm{M: f, N: pp, K: kk, Alpha: 1, A: p.Addr(k.W), LDA: kk, B: col, LDB: pp,
			C: cs, LDC: pp, StrideB: kk * pp, StrideC: f * pp, Batch: n})
		elementwise(p, "on_conv_pool", n*f*op, convPoolArgs{G: poolGeomOf(k.Pool), N: n, Base: b0 * f * op, P: k.DropP, Seed: k.Seed, Stream: k.Stream,
			Step: k.Step, C: cs, Bias: k.Bias, Y: addrAt(p, k.Y, b0*f*op), Arg: addrAt(p, k.Arg, b0*f*op)})
	}
}

func convPoolHost[T Float](p *Pool, k ConvPool) Func {
	g, f := k.Geom, k.F
	_, out := k.Pool.sizes()
	oh, ow := g.Out()
	e := &convPoolEpilogue[T]{pg: k.Pool, f: f, op: k.Pool.OutH * k.Pool.OutW, y: hostData[T](k.Y)[:out],
		drop: k.DropP > 0, keep: T(1 - k.DropP), least: keepThreshold(k.DropP), oh: oh, ow: ow}
	if k.Bias.Buf != nil {
		e.bias = hostData[T](k.Bias)[:f]
	}
	if k.Arg.Buf != nil {
		e.arg = hostData[int32](k.Arg)[:out]
	}
	var step []float64
	if e.drop {
		step = hostData[float64](k.Step)[:1]
	}
	var run Func
	if winograd[T](g, f) {
		run = convPoolWinogradHost(p, k, e)
	} else {
		run = convPoolDirect(p, k, e, newConvSplit(p, g, k.Chunk))
	}
	return func() error {
		if e.drop {
			e.key = streamKey(k.Seed, k.Stream, uint64(step[0]))
		}
		return run()
	}
}

// convPoolDirect is ConvPool's Host by im2col.
func convPoolDirect[T Float](p *Pool, k ConvPool, e *convPoolEpilogue[T], s convSplit) Func {
	g, f := k.Geom, k.F
	in, pp, kk := g.sizes()
	x, w := hostData[T](k.X)[:in], hostData[T](k.W)[:f*kk]
	col, tmp := workspaces[T](s.parts, kk*s.nb*pp), workspaces[T](s.parts, f*s.nb*pp)
	return s.run(p, g.B, func(q, b0, n int) {
		np := n * pp
		unfold(g, x, b0, n, col[q], s.layout(g, n))
		if s.wide || n == 1 {
			for j := range n {
				linalg.Gemm(false, false, f, pp, kk, 1, w, kk, col[q][j*kk*pp:], pp, 0, tmp[q], pp)
				e.image(b0+j, tmp[q], pp)
			}
			return
		}
		linalg.Gemm(false, false, f, np, kk, 1, w, kk, col[q], np, 0, tmp[q], np)
		for j := range n {
			e.image(b0+j, tmp[q][j*pp:], np)
		}
	}, nil)
}

// addrAt returns the device address of element off of op, or 0 where op
// has no buffer.
func addrAt(p Planner, op Operand, off int) uint64 {
	if op.Buf == nil {
		return 0
	}
	return p.Addr(At(op.Buf, op.Off+off))
}

// ConvPoolGradInput writes into DX (B, C, H, W) the gradient of ConvPool's
// output with respect to its images, from the gradient DY of its output Y
// and the Arg that ConvPool recorded, with the filter W: the convolution's
// output gradient at the element pos that a window took is the sum, over
// the windows that took it, of their DY divided by 1 - DropP (in the
// element type, 0 where dropped; DY as it is without dropout), times the
// step, as Dropout's, MaxPoolGrad's and ConvGradInput's gradients compute
// it.
type ConvPoolGradInput struct {
	Geom    ConvGeom
	F       int
	Pool    PoolGeom
	DY, Arg Operand
	W, DX   Operand
	DropP   float64
	Chunk   int
}

// Check checks the geometries and the operands.
func (k ConvPoolGradInput) Check() error {
	in, _, kk := k.Geom.sizes()
	_, out := k.Pool.sizes()
	return checkConvPool(k, k.Geom, k.F, k.Chunk, k.Pool, k.DropP,
		DTypeOf(k.DX), "DY", k.DY, out, "W", k.W, k.F*kk, "DX", k.DX, in, Int32, "arg", k.Arg, out)
}

// Host forms a chunk's output gradients in a thread's workspace (F x nP,
// or for wide images F x P one image at a time), multiplies them by the
// filter and folds the result into the images' gradients; or, where
// Winograd's algorithm applies, convolves them with the turned filter.
func (k ConvPoolGradInput) Host(p *Pool) (Func, error) {
	return onFloats(p, k, convPoolGradInputHost[float32], convPoolGradInputHost[float64])
}

// Device forms a chunk's output gradients (on_pool_route), multiplies each
// image's by the filter in one strided batched GEMM and folds them.
func (k ConvPoolGradInput) Device(p Planner) {
	_, pp, _ := k.Geom.sizes()
	rows := p.Scratch(DTypeOf(k.DX), k.F*deviceImages(k.Geom, k.Chunk)*pp)
	inputGradDevice(p, k.Geom, k.F, k.Chunk, k.W, k.DX, func(b0, n int) uint64 {
		routeDevice(p, k.Pool, k.DropP, k.DY, k.Arg, b0, n, k.F*pp, pp, rows)
		return rows
	})
}

func convPoolGradInputHost[T Float](p *Pool, k ConvPoolGradInput) Func {
	rt := newPoolRouter[T](k.Pool, k.DY, k.Arg, k.DropP)
	return byWinograd[T](p, k, k.Geom, k.F, func(p *Pool, k ConvPoolGradInput) Func {
		return convPoolGradInputWinogradHost(p, k, rt)
	}, func(p *Pool, k ConvPoolGradInput) Func {
		return gradDirectHost(p, k.Geom, k.F, k.Chunk, k.W, k.DX, routedRows(k.Geom, k.F, rt), inputGradHost[T])
	})
}

// routedRows returns the outRows that rt routes from a ConvPool's output
// gradients, into the parts' workspaces.
func routedRows[T Float](g ConvGeom, f int, rt poolRouter[T]) outRows[T] {
	return func(s convSplit) (func(q, b int) []T, func(q, b0, n int) []T) {
		_, pp, _ := g.sizes()
		return rt.rows(workspaces[T](s.parts, f*s.nb*pp), pp)
	}
}

// routeDevice launches on_pool_route: the gradients of n images'
// convolution outputs from image b0's, filter f's plane of image j at
// dst + j sj + f sf, a thread per element.
func routeDevice(p Planner, pg PoolGeom, dropP float64, dy, arg Operand, b0, n, sj, sf int, dst uint64) {
	off := b0 * pg.C * pg.OutH * pg.OutW
	elementwise(p, "on_pool_route", n*pg.C*pg.H*pg.W, poolRouteArgs{G: poolGeomOf(pg), N: n, Sj: sj, Sf: sf, P: dropP,
		Dy: addrAt(p, dy, off), Arg: addrAt(p, arg, off), Dst: dst})
}

// ConvPoolGradFilter writes into DW, F x (C KH KW), the gradient of
// ConvPool's output with respect to its filter, from the images X, the
// gradient DY of its output and its Arg (see ConvPoolGradInput).
type ConvPoolGradFilter struct {
	Geom       ConvGeom
	F          int
	Pool       PoolGeom
	X, DY, Arg Operand
	DW         Operand
	DropP      float64
	Chunk      int
}

// Check checks the geometries and the operands.
func (k ConvPoolGradFilter) Check() error {
	in, _, kk := k.Geom.sizes()
	_, out := k.Pool.sizes()
	return checkConvPool(k, k.Geom, k.F, k.Chunk, k.Pool, k.DropP,
		DTypeOf(k.DW), "X", k.X, in, "DY", k.DY, out, "DW", k.DW, k.F*kk, Int32, "arg", k.Arg, out)
}

// Host unfolds a chunk of images at a time, forms their output gradients
// (as ConvPoolGradInput's Host) and accumulates their product with the
// unfolded windows (or, by Winograd's algorithm, of their transformed
// tiles), each thread into its own sum; the sums are added at the end.
func (k ConvPoolGradFilter) Host(p *Pool) (Func, error) {
	return onFloats(p, k, convPoolGradFilterHost[float32], convPoolGradFilterHost[float64])
}

// Device unfolds a chunk of images at a time (K x nP), forms their output
// gradients side by side (F x nP, on_pool_route) and accumulates their
// product in one GEMM per chunk.
func (k ConvPoolGradFilter) Device(p Planner) {
	_, pp, _ := k.Geom.sizes()
	filterGradDevice(p, k.Geom, k.F, k.Chunk, k.X, k.DW, func(b0, n int, rows uint64) {
		routeDevice(p, k.Pool, k.DropP, k.DY, k.Arg, b0, n, pp, n*pp, rows)
	})
}

func convPoolGradFilterHost[T Float](p *Pool, k ConvPoolGradFilter) Func {
	rt := newPoolRouter[T](k.Pool, k.DY, k.Arg, k.DropP)
	return byWinograd[T](p, k, k.Geom, k.F, func(p *Pool, k ConvPoolGradFilter) Func {
		return convPoolGradFilterWinogradHost(p, k, rt)
	}, func(p *Pool, k ConvPoolGradFilter) Func {
		return gradDirectHost(p, k.Geom, k.F, k.Chunk, k.X, k.DW, routedRows(k.Geom, k.F, rt), filterGradHost[T])
	})
}

// ConvPoolGradBias writes into DB (Pool.C elements) the gradient of
// ConvPool's output with respect to its bias: for each filter, the sum over
// the images and their pooled elements, in order, of what the gradients
// route to the convolution's output (see ConvPoolGradInput).
type ConvPoolGradBias struct {
	Pool        PoolGeom
	DY, Arg, DB Operand
	DropP       float64
}

// Check checks the geometry and the operands.
func (k ConvPoolGradBias) Check() error {
	if err := k.Pool.checkFor(k); err != nil {
		return err
	}
	if !(k.DropP >= 0 && k.DropP < 1) {
		return fmt.Errorf("backend: %s: dropout probability %v, want [0, 1)", Name(k), k.DropP)
	}
	_, out := k.Pool.sizes()
	return checkAll(k, DTypeOf(k.DB), "DY", k.DY, out, "DB", k.DB, k.Pool.C, Int32, "arg", k.Arg, out)
}

// Host sums filter by filter, the filters split across the pool's threads.
func (k ConvPoolGradBias) Host(p *Pool) (Func, error) {
	return onFloats(p, k, convPoolGradBiasHost[float32], convPoolGradBiasHost[float64])
}

// Device launches on_pool_bias_grad, a thread per filter that sums in the
// CPU's order.
func (k ConvPoolGradBias) Device(p Planner) {
	elementwise(p, "on_pool_bias_grad", k.Pool.C, poolBiasGradArgs{G: poolGeomOf(k.Pool), P: k.DropP, Dy: k.DY, Arg: k.Arg, Db: k.DB})
}

func convPoolGradBiasHost[T Float](p *Pool, k ConvPoolGradBias) Func {
	rt := newPoolRouter[T](k.Pool, k.DY, k.Arg, k.DropP)
	db := hostData[T](k.DB)[:k.Pool.C]
	return p.split(rt.f, k.Pool.B*rt.op, func(lo, hi int) {
		for f := lo; f < hi; f++ {
			var s T
			for b := range k.Pool.B {
				o := (b*rt.f + f) * rt.op
				for i, a := range rt.arg[o : o+rt.op] {
					if a >= 0 {
						s += rt.routed(o+i, a)
					}
				}
			}
			db[f] = s
		}
	}).loop()
}

// poolOut records the pooling of one convolution output plane: the
// rectified window maxima into y, and where arg is not nil, Arg's
// pos<<2 | step<<1 | 1 (keep set) or -1.
func poolOut[T Float](g PoolGeom, plane, y []T, arg []int32) {
	if g.tiles2() {
		poolTiles2(g, plane, y, arg)
		return
	}
	maxPlane(g, true, plane, y)
	if arg == nil {
		return
	}
	low := lowest[T]()
	for r := range g.OutH {
		for c := range g.OutW {
			o := r*g.OutW + c
			arg[o] = -1
			m := y[o]
			if m == low {
				continue
			}
			h0, h1, w0, w1 := g.window(r, c)
		window:
			for h := h0; h < h1; h++ {
				for w := w0; w < w1; w++ {
					if x := plane[h*g.W+w]; rectify(x) == m {
						arg[o] = argOf(h*g.W+w, x)
						break window
					}
				}
			}
		}
	}
}

// argOf returns Arg's record of element pos of value x, kept.
func argOf[T Float](pos int, x T) int32 {
	return int32(pos<<2|1) | int32(flag(x >= 0))<<1
}

// poolTiles2 is poolOut for 2 x 2 windows side by side, in one pass:
// maxTiles2's maxima and the elements maxTiles2Grad finds, the rare
// windows with NaNs or only -Inf aside. (Selecting the element without a
// branch on the largest one's sign, from masks of the four, ran 1.7 times
// slower.)
func poolTiles2[T Float](g PoolGeom, plane, y []T, arg []int32) {
	low := lowest[T]()
	for r := range g.OutH {
		i0, i1 := 2*r*g.W, (2*r+1)*g.W
		r0, r1 := plane[i0:i0+g.W], plane[i1:i1+g.W]
		yr := y[r*g.OutW : (r+1)*g.OutW]
		var ar []int32
		if arg != nil {
			ar = arg[r*g.OutW : (r+1)*g.OutW]
		}
		for c := range yr {
			j := 2 * c
			a, b, e, f := r0[j], r0[j+1], r1[j], r1[j+1]
			m := max(a, b, e, f) // NaN where one is
			var k int
			var step int32 = 1 // of the element taken: 1 where m > 0
			switch {
			case m > 0:
				k = bits.TrailingZeros64(flag(a == m) | flag(b == m)<<1 | flag(e == m)<<2 | flag(f == m)<<3)
			case m >= low:
				k = firstNonPositive(low, a, b, e, f)
				step = int32(flag([4]T{a, b, e, f}[k&3] == 0))
				m = 0
			default: // NaNs, or -Inf alone: as maxTiles2 and maxTiles2Grad
				m, k = window4(low, a, b, e, f)
				if k < 4 {
					step = int32(flag([4]T{a, b, e, f}[k] >= 0))
				}
			}
			yr[c] = m
			if ar == nil {
				continue
			}
			if k == 4 {
				ar[c] = -1
				continue
			}
			ar[c] = int32((i0+(k>>1)*g.W+j+k&1)<<2|1) | step<<1
		}
	}
}

// window4 returns the largest rectified element of a 2 x 2 window a, b, e,
// f as maxTiles2 finds it, and the index of the element maxTiles2Grad
// takes (4: none).
func window4[T Float](low, a, b, e, f T) (T, int) {
	m := low
	for _, v := range [4]T{a, b, e, f} {
		if v != v {
			v = low
		}
		m = max(m, v)
	}
	if m == low {
		for _, v := range [4]T{a, b, e, f} {
			if v = rectify(v); v > m {
				m = v
			}
		}
	} else {
		m = max(m, 0)
	}
	switch {
	case m == low:
		return m, 4
	case m == 0:
		return m, firstNonPositive(low, a, b, e, f)
	}
	return m, bits.TrailingZeros64(flag(a == m) | flag(b == m)<<1 | flag(e == m)<<2 | flag(f == m)<<3 | 16)
}

// convPoolEpilogue pools, and drops out, the planes of the convolution's
// output that a chunk's product leaves in a workspace.
type convPoolEpilogue[T Float] struct {
	pg     PoolGeom
	f, op  int // filters; elements of a pooled plane
	bias   []T
	y      []T
	arg    []int32
	drop   bool
	keep   T
	least  uint64 // keepThreshold(DropP)
	key    uint64 // the dropout stream's key at this run's step
	oh, ow int
}

// image pools the f output planes of image b, plane r at planes[r ld:],
// adding the bias in place first.
func (e *convPoolEpilogue[T]) image(b int, planes []T, ld int) {
	p := e.oh * e.ow
	for r := range e.f {
		plane := planes[r*ld : r*ld+p]
		if e.bias != nil {
			v := e.bias[r]
			for i := range plane {
				plane[i] += v
			}
		}
		o := (b*e.f + r) * e.op
		y := e.y[o : o+e.op]
		var arg []int32
		if e.arg != nil {
			arg = e.arg[o : o+e.op]
		}
		poolOut(e.pg, plane, y, arg)
		if !e.drop {
			continue
		}
		for i := range y {
			kept := unitBits(e.key, uint64(o+i)) >= e.least
			y[i] = keepBits(y[i]/e.keep, kept)
			if arg != nil { // clear keep where dropped, leaving -1 as it is, without a branch
				arg[i] &^= int32(flag(!kept)) &^ (arg[i] >> 31)
			}
		}
	}
}

// poolRouter forms the gradient of a ConvPool's convolution output from
// the gradient of its pooled output and its Arg.
type poolRouter[T Float] struct {
	f, op, p int
	dy       []T
	arg      []int32
	drop     bool
	keep     T
}

func newPoolRouter[T Float](pg PoolGeom, dy, arg Operand, dropP float64) poolRouter[T] {
	_, out := pg.sizes()
	return poolRouter[T]{f: pg.C, op: pg.OutH * pg.OutW, p: pg.H * pg.W, dy: hostData[T](dy)[:out],
		arg: hostData[int32](arg)[:out], drop: dropP > 0, keep: T(1 - dropP)}
}

// routed returns what pooled element o's gradient adds at the element its
// Arg a records (a >= 0).
func (r poolRouter[T]) routed(o int, a int32) T {
	v := r.dy[o]
	if r.drop {
		v = keepBits(v/r.keep, a&1 != 0)
	}
	return v * T(a>>1&1)
}

// image writes the gradient of image b's convolution output, filter f's
// plane at dst[f ld + off:], adding in the order of the pooled elements.
func (r poolRouter[T]) image(b int, dst []T, ld, off int) {
	for f := range r.f {
		plane := dst[f*ld+off:][:r.p]
		clear(plane)
		o := (b*r.f + f) * r.op
		dy, arg := r.dy[o:o+r.op], r.arg[o:o+r.op]
		for i, a := range arg {
			if a < 0 {
				continue
			}
			v := dy[i]
			if r.drop {
				v = keepBits(v/r.keep, a&1 != 0)
			}
			plane[a>>2] += v * T(a>>1&1)
		}
	}
}

// rows returns inputGradHost's and filterGradHost's image and chunk for
// the routed output gradients, each written into part q's tmp: an image's
// (F x P), a chunk's side by side (F x nP).
func (r poolRouter[T]) rows(tmp [][]T, pp int) (image func(q, b int) []T, chunk func(q, b0, n int) []T) {
	return func(q, b int) []T {
			r.image(b, tmp[q], pp, 0)
			return tmp[q]
		},
		func(q, b0, n int) []T {
			for j := range n {
				r.image(b0+j, tmp[q], n*pp, j*pp)
			}
			return tmp[q]
		}
}
