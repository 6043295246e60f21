package backend

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Convolutions: gorgonia's im2col and col2im as it computes them, and the
// fused kernels a whole gorgonia.Conv2d (forward, and the gradients with
// respect to its input and its filter) is lowered to, which unfold the
// images a chunk at a time into a workspace that feeds one GEMM per chunk
// and write NCHW directly.
var _ = []defined{Im2col{}, Col2im{}, Conv{}, ConvGradInput{}, ConvGradFilter{}}

// ConvGeom is the geometry of a 2-D convolution of a batch of images in
// NCHW order, as gorgonia v0.9.18's im2col takes it: B images of C channels
// of H x W, a KH x KW kernel whose taps are DilH rows (DilW columns) apart,
// PadH rows (PadW columns) of zeros on each side, and StrideH (StrideW)
// between windows.
type ConvGeom struct {
	B, C, H, W       int
	KH, KW           int
	PadH, PadW       int
	StrideH, StrideW int
	DilH, DilW       int
}

// Out returns the output's height and width, as gorgonia computes them
// (its integer division truncates toward zero). Strides below 1 give 0.
func (g ConvGeom) Out() (oh, ow int) {
	if g.StrideH < 1 || g.StrideW < 1 {
		return 0, 0
	}
	return (g.H+2*g.PadH-(g.DilH*(g.KH-1)+1))/g.StrideH + 1, (g.W+2*g.PadW-(g.DilW*(g.KW-1)+1))/g.StrideW + 1
}

// Patch returns the length of one window's column, C KH KW: the inner
// dimension of the convolution's product.
func (g ConvGeom) Patch() int { return g.C * g.KH * g.KW }

// String describes the geometry briefly, for profiles.
func (g ConvGeom) String() string {
	return fmt.Sprintf("%dx%dx%dx%d kernel %dx%d pad %d,%d stride %d,%d dilation %d,%d",
		g.B, g.C, g.H, g.W, g.KH, g.KW, g.PadH, g.PadW, g.StrideH, g.StrideW, g.DilH, g.DilW)
}

// Check reports an error unless every size, stride and dilation is
// positive, no padding negative, and the output has at least one element.
func (g ConvGeom) Check() error {
	if min(g.B, g.C, g.H, g.W, g.KH, g.KW, g.StrideH, g.StrideW, g.DilH, g.DilW) < 1 || min(g.PadH, g.PadW) < 0 {
		return fmt.Errorf("convolution %v: sizes, strides and dilations must be positive, paddings not negative", g)
	}
	if oh, ow := g.Out(); oh < 1 || ow < 1 {
		return fmt.Errorf("convolution %v: the kernel does not fit the padded image (an output of %d x %d)", g, oh, ow)
	}
	return nil
}

// checkFor is Check, its error naming kernel k.
func (g ConvGeom) checkFor(k Kernel) error {
	if err := g.Check(); err != nil {
		return fmt.Errorf("backend: %s: %w", Name(k), err)
	}
	return nil
}

// check is checkFor, then checks k's operands as checkAll does.
func (g ConvGeom) check(k Kernel, dt DType, ops ...any) error {
	if err := g.checkFor(k); err != nil {
		return err
	}
	return checkAll(k, dt, ops...)
}

// sizes returns the elements of the input, of one output plane and of one
// window's column.
func (g ConvGeom) sizes() (in, p, k int) {
	oh, ow := g.Out()
	return g.B * g.C * g.H * g.W, oh * ow, g.Patch()
}

// checkConv is checkConvGeom, then checks the kernel's operands as
// checkAll does.
func checkConv(k Kernel, g ConvGeom, f, chunk int, dt DType, ops ...any) error {
	if err := checkConvGeom(k, g, f, chunk); err != nil {
		return err
	}
	return checkAll(k, dt, ops...)
}

// checkConvGeom checks a fused convolution kernel's geometry, its f
// filters and its chunks of images.
func checkConvGeom(k Kernel, g ConvGeom, f, chunk int) error {
	if f < 1 || chunk < 0 {
		return fmt.Errorf("backend: %s: %d filters, chunks of %d images", Name(k), f, chunk)
	}
	return g.checkFor(k)
}

// Im2col writes into Dst, a (B, OutH, OutW, C KH KW) array, the windows of
// the images Src (B, C, H, W) as gorgonia's im2colOp does: element
// (b, y, x, (c KH + i) KW + j) is the input at channel c, row
// y StrideH - PadH + i DilH, column x StrideW - PadW + j DilW, or 0 in the
// padding.
type Im2col struct {
	Geom     ConvGeom
	Src, Dst Operand
}

// Check checks the geometry and the operands.
func (k Im2col) Check() error {
	in, p, kk := k.Geom.sizes()
	return k.Geom.check(k, DTypeOf(k.Dst), "source", k.Src, in, "destination", k.Dst, k.Geom.B*p*kk)
}

// Host unfolds the images, split across the pool's threads.
func (k Im2col) Host(p *Pool) (Func, error) {
	return onFloats(p, k, im2colHost[float32], im2colHost[float64])
}

// Device launches on_unfold in Im2col's layout, a thread per element.
func (k Im2col) Device(p Planner) {
	unfoldDevice(p, k.Geom, k.Geom.B, k.Geom.im2colLayout(), p.Addr(k.Src), p.Addr(k.Dst))
}

func im2colHost[T Float](p *Pool, k Im2col) Func {
	g := k.Geom
	in, pp, kk := g.sizes()
	x, col := hostData[T](k.Src)[:in], hostData[T](k.Dst)[:g.B*pp*kk]
	l := g.im2colLayout()
	return p.split(g.B, pp*kk, func(lo, hi int) { unfold(g, x, lo, hi-lo, col[lo*l.J:], l) }).loop()
}

// convGeomOf returns a geometry as the kernels take it (ConvGeom in
// kernels.cu).
func convGeomOf(g ConvGeom) convGeom {
	oh, ow := g.Out()
	return convGeom{B: g.B, C: g.C, H: g.H, W: g.W, Kh: g.KH, Kw: g.KW, Padh: g.PadH, Padw: g.PadW,
		Strideh: g.StrideH, Stridew: g.StrideW, Dilh: g.DilH, Dilw: g.DilW, Oh: oh, Ow: ow}
}

// unfoldDevice launches on_unfold over n images from x into col.
func unfoldDevice(p Planner, g ConvGeom, n int, l colLayout, x, col uint64) {
	_, pp, kk := g.sizes()
	elementwise(p, "on_unfold", n*kk*pp, unfoldArgs{G: convGeomOf(g), N: n, Sj: l.J, Sk: l.K, Sp: l.P, X: x, Col: col})
}

// Col2im writes into Dst (B, C, H, W) the sum, over every window element of
// Src (Im2col's layout) that Im2col takes from an input element, of those
// elements: gorgonia's col2imOp, the gradient of Im2col.
type Col2im struct {
	Geom     ConvGeom
	Src, Dst Operand
}

// Check checks the geometry and the operands.
func (k Col2im) Check() error {
	in, p, kk := k.Geom.sizes()
	return k.Geom.check(k, DTypeOf(k.Dst), "source", k.Src, k.Geom.B*p*kk, "destination", k.Dst, in)
}

// Host folds image by image, split across the pool's threads.
func (k Col2im) Host(p *Pool) (Func, error) {
	return onFloats(p, k, col2imHost[float32], col2imHost[float64])
}

// Device launches on_fold, a thread per input element that sums its taps.
func (k Col2im) Device(p Planner) {
	foldDevice(p, k.Geom, k.Geom.B, k.Geom.im2colLayout(), p.Addr(k.Src), p.Addr(k.Dst))
}

func col2imHost[T Float](p *Pool, k Col2im) Func {
	g := k.Geom
	in, pp, kk := g.sizes()
	col, dx := hostData[T](k.Src)[:g.B*pp*kk], hostData[T](k.Dst)[:in]
	per, l := in/g.B, g.im2colLayout()
	// fold leaves col as it is: in Im2col's layout only a 1 x 1 kernel
	// without padding takes its shifted path, which then zeroes nothing.
	return p.split(g.B, pp*kk, func(lo, hi int) {
		clear(dx[lo*per : hi*per])
		fold(g, col[lo*l.J:], l, dx, lo, hi-lo)
	}).loop()
}

// foldDevice launches on_fold over n images from col into dx, which it
// writes (not adds to).
func foldDevice(p Planner, g ConvGeom, n int, l colLayout, col, dx uint64) {
	elementwise(p, "on_fold", n*g.C*g.H*g.W, foldArgs{G: convGeomOf(g), N: n, Sj: l.J, Sk: l.K, Sp: l.P, Col: col, Dx: dx})
}

// Conv writes into Y (B, F, OutH, OutW) the convolution of the images X
// (B, C, H, W) with the filter W, F x (C KH KW) (F filters of C x KH x KW):
// gorgonia.Conv2d's im2col, product with the filter and transpose in one
// kernel.
type Conv struct {
	Geom    ConvGeom
	F       int
	X, W, Y Operand
	// Chunk is how many images are unfolded at a time; 0 picks as many as
	// fit a workspace bound (hostChunk, deviceChunk elements).
	Chunk int
}

// Check checks the geometry and the operands.
func (k Conv) Check() error {
	in, p, kk := k.Geom.sizes()
	return checkConv(k, k.Geom, k.F, k.Chunk, DTypeOf(k.Y), "X", k.X, in, "W", k.W, k.F*kk, "Y", k.Y, k.Geom.B*k.F*p)
}

// Host unfolds a chunk of images at a time into a thread's workspace and
// multiplies it by the filter: one GEMM for the chunk (K x nP), its output
// scattered into place, or for wide images one GEMM per image, in place.
func (k Conv) Host(p *Pool) (Func, error) {
	return onFloats(p, k, convHost[float32], convHost[float64])
}

// Device unfolds a chunk of images at a time (n K x P blocks) and
// multiplies each by the filter in one strided batched GEMM that writes
// the output in place.
func (k Conv) Device(p Planner) {
	g, f := k.Geom, k.F
	_, pp, kk := g.sizes()
	nb := deviceImages(g, k.Chunk)
	col := p.Scratch(DTypeOf(k.Y), kk*nb*pp)
	for b0 := 0; b0 < g.B; b0 += nb {
		n := min(nb, g.B-b0)
		unfoldDevice(p, g, n, colLayout{kk * pp, pp, 1}, p.Addr(At(k.X.Buf, k.X.Off+b0*g.C*g.H*g.W)), col)
		p.Gemm(DeviceGemm{M: f, N: pp, K: kk, Alpha: 1, A: p.Addr(k.W), LDA: kk, B: col, LDB: pp,
			C: p.Addr(At(k.Y.Buf, k.Y.Off+b0*f*pp)), LDC: pp, StrideB: kk * pp, StrideC: f * pp, Batch: n})
	}
}

func convHost[T Float](p *Pool, k Conv) Func {
	return byWinograd[T](p, k, k.Geom, k.F, convWinogradHost[T], convDirectHost[T])
}

// byWinograd returns the instance of k, a convolution (or one of its
// gradients) of geometry g and f filters, that computes it in T: by
// Winograd's F(2x2, 3x3) where winograd chooses it, else direct.
func byWinograd[T Float, K Kernel](p *Pool, k K, g ConvGeom, f int, wino, direct func(*Pool, K) Func) Func {
	if winograd[T](g, f) {
		return wino(p, k)
	}
	return direct(p, k)
}

func convDirectHost[T Float](p *Pool, k Conv) Func {
	g, f := k.Geom, k.F
	s := newConvSplit(p, g, k.Chunk)
	in, pp, kk := g.sizes()
	x, w, y := hostData[T](k.X)[:in], hostData[T](k.W)[:f*kk], hostData[T](k.Y)[:g.B*f*pp]
	col, tmp := workspaces[T](s.parts, kk*s.nb*pp), rowSpace[T](s, f, pp)
	return s.run(p, g.B, func(q, b0, n int) {
		np := n * pp
		unfold(g, x, b0, n, col[q], s.layout(g, n))
		if s.wide || n == 1 {
			for j := range n {
				linalg.Gemm(false, false, f, pp, kk, 1, w, kk, col[q][j*kk*pp:], pp, 0, y[(b0+j)*f*pp:], pp)
			}
			return
		}
		linalg.Gemm(false, false, f, np, kk, 1, w, kk, col[q], np, 0, tmp[q], np)
		scatterRows(tmp[q], y[b0*f*pp:], n, f, pp)
	}, nil)
}

// ConvGradInput writes into DX (B, C, H, W) the gradient of Conv's output
// with respect to its images, from the gradient DY (B, F, OutH, OutW) and
// the filter W.
type ConvGradInput struct {
	Geom      ConvGeom
	F         int
	DY, W, DX Operand
	// Chunk is how many images are unfolded at a time; 0 picks as many as
	// fit a workspace bound (hostChunk, deviceChunk elements).
	Chunk int
}

// Check checks the geometry and the operands.
func (k ConvGradInput) Check() error {
	in, p, kk := k.Geom.sizes()
	return checkConv(k, k.Geom, k.F, k.Chunk, DTypeOf(k.DX), "DY", k.DY, k.Geom.B*k.F*p, "W", k.W, k.F*kk, "DX", k.DX, in)
}

// Host multiplies a chunk of images' output gradients by the filter into a
// thread's workspace, in one GEMM (the gradients gathered side by side,
// F x nP) or for wide images one per image, and folds the result into the
// images' gradients.
func (k ConvGradInput) Host(p *Pool) (Func, error) {
	return onFloats(p, k, convGradInputHost[float32], convGradInputHost[float64])
}

// Device multiplies each image's output gradient by the filter in one
// strided batched GEMM per chunk (n K x P blocks) and folds them.
func (k ConvGradInput) Device(p Planner) {
	_, pp, _ := k.Geom.sizes()
	inputGradDevice(p, k.Geom, k.F, k.Chunk, k.W, k.DX, func(b0, _ int) uint64 {
		return p.Addr(At(k.DY.Buf, k.DY.Off+b0*k.F*pp))
	})
}

// inputGradDevice adds the steps that write into DX the gradient of a
// convolution's images from its filter W (F x K), a chunk of images at a
// time: the n output gradients of images b0 on (F x P each, side by side)
// at the address outGrads returns, times W in one strided batched GEMM,
// folded into the images' gradients.
func inputGradDevice(p Planner, g ConvGeom, f, chunk int, w, dx Operand, outGrads func(b0, n int) uint64) {
	_, pp, kk := g.sizes()
	nb := deviceImages(g, chunk)
	col := p.Scratch(DTypeOf(dx), kk*nb*pp)
	for b0 := 0; b0 < g.B; b0 += nb {
		n := min(nb, g.B-b0)
		rows := outGrads(b0, n)
		p.Gemm(DeviceGemm{TransA: true, M: kk, N: pp, K: f, Alpha: 1, A: p.Addr(w), LDA: kk,
			B: rows, LDB: pp, C: col, LDC: pp, StrideB: f * pp, StrideC: kk * pp, Batch: n})
		foldDevice(p, g, n, colLayout{kk * pp, pp, 1}, col, p.Addr(At(dx.Buf, dx.Off+b0*g.C*g.H*g.W)))
	}
}

func convGradInputHost[T Float](p *Pool, k ConvGradInput) Func {
	return byWinograd[T](p, k, k.Geom, k.F, convGradInputWinogradHost[T], convGradInputDirectHost[T])
}

func convGradInputDirectHost[T Float](p *Pool, k ConvGradInput) Func {
	return gradDirectHost(p, k.Geom, k.F, k.Chunk, k.W, k.DX, dyRows[T](k.Geom, k.F, k.DY), inputGradHost[T])
}

// outRows gives a convolution's gradient kernel the output gradients of
// its images, (F x P) each, for s's parts: an image's, and a chunk's side
// by side (F x nP), either of which may be in part q's workspace.
type outRows[T Float] func(s convSplit) (image func(q, b int) []T, chunk func(q, b0, n int) []T)

// dyRows returns the outRows of the output gradients dy, (B, F, P): an
// image's read in place, a chunk's gathered.
func dyRows[T Float](g ConvGeom, f int, dy Operand) outRows[T] {
	return func(s convSplit) (func(q, b int) []T, func(q, b0, n int) []T) {
		_, pp, _ := g.sizes()
		return gatheredRows(hostData[T](dy)[:g.B*f*pp], rowSpace[T](s, f, pp), f, pp)
	}
}

// gradDirectHost returns the direct (im2col) instance of a convolution's
// gradient, of geometry g, f filters and chunks of chunk images: grad
// (inputGradHost or filterGradHost) on the operands a and b, from the
// output gradients that rows gives.
func gradDirectHost[T Float](p *Pool, g ConvGeom, f, chunk int, a, b Operand, rows outRows[T],
	grad func(*Pool, ConvGeom, int, convSplit, Operand, Operand, func(q, b int) []T, func(q, b0, n int) []T) Func) Func {
	s := newConvSplit(p, g, chunk)
	image, chunks := rows(s)
	return grad(p, g, f, s, a, b, image, chunks)
}

// inputGradHost returns a Func that writes into DX the gradient of a
// convolution's images from its filter W (F x K), s's parts across the
// pool's threads: a chunk of images at a time, W's transpose times their
// output gradients side by side, chunk's (F x nP), in one GEMM (K x nP),
// or for wide images image by image, image's (F x P), in one GEMM each,
// then folded into the images' gradients. Both may write into part q's
// workspace.
func inputGradHost[T Float](p *Pool, g ConvGeom, f int, s convSplit, w, dx Operand, image func(q, b int) []T, chunk func(q, b0, n int) []T) Func {
	in, pp, kk := g.sizes()
	ws, dxs := hostData[T](w)[:f*kk], hostData[T](dx)[:in]
	col := workspaces[T](s.parts, kk*s.nb*pp)
	per := in / g.B
	return s.run(p, g.B, func(q, b0, n int) {
		np := n * pp
		if s.wide || n == 1 {
			for j := range n {
				linalg.Gemm(true, false, kk, pp, f, 1, ws, kk, image(q, b0+j), pp, 0, col[q][j*kk*pp:], pp)
			}
		} else {
			linalg.Gemm(true, false, kk, np, f, 1, ws, kk, chunk(q, b0, n), np, 0, col[q], np)
		}
		clear(dxs[b0*per : (b0+n)*per])
		fold(g, col[q], s.layout(g, n), dxs, b0, n)
	}, nil)
}

// gatheredRows returns inputGradHost's and filterGradHost's image and chunk
// for the output gradients dy, (B, F, P): an image's read in place, a
// chunk's gathered side by side into part q's tmp.
func gatheredRows[T Float](dy []T, tmp [][]T, f, pp int) (image func(q, b int) []T, chunk func(q, b0, n int) []T) {
	return func(_, b int) []T { return dy[b*f*pp:] },
		func(q, b0, n int) []T {
			gatherRows(dy[b0*f*pp:], tmp[q], n, f, pp)
			return tmp[q]
		}
}

// ConvGradFilter writes into DW, F x (C KH KW), the gradient of Conv's
// output with respect to its filter, from the images X and the gradient DY
// (B, F, OutH, OutW), summed over the batch.
type ConvGradFilter struct {
	Geom      ConvGeom
	F         int
	X, DY, DW Operand
	// Chunk is how many images are unfolded at a time; 0 picks as many as
	// fit a workspace bound (hostChunk, deviceChunk elements).
	Chunk int
}

// Check checks the geometry and the operands.
func (k ConvGradFilter) Check() error {
	in, p, kk := k.Geom.sizes()
	return checkConv(k, k.Geom, k.F, k.Chunk, DTypeOf(k.DW), "X", k.X, in, "DY", k.DY, k.Geom.B*k.F*p, "DW", k.DW, k.F*kk)
}

// Host unfolds a chunk of images at a time into a thread's workspace and
// accumulates the product of their output gradients with it, in one GEMM
// (K x nP, the gradients gathered to F x nP) or for wide images one per
// image, each thread into its own sum; the sums are added at the end.
func (k ConvGradFilter) Host(p *Pool) (Func, error) {
	return onFloats(p, k, convGradFilterHost[float32], convGradFilterHost[float64])
}

// Device unfolds a chunk of images at a time (K x nP), gathers their
// output gradients into F x nP and accumulates their product in one GEMM
// per chunk.
func (k ConvGradFilter) Device(p Planner) {
	f := k.F
	_, pp, _ := k.Geom.sizes()
	filterGradDevice(p, k.Geom, f, k.Chunk, k.X, k.DW, func(b0, n int, rows uint64) {
		elementwise(p, "on_gather_planes", n*f*pp, gatherPlanesArgs{N: n, F: f, P: pp, Src: At(k.DY.Buf, k.DY.Off+b0*f*pp), Dst: rows})
	})
}

// filterGradDevice accumulates into DW (F x C KH KW) the gradient of a
// convolution's filter over the batch of images X, a chunk of images at a
// time: their windows unfolded (K x nP), their output gradients written
// side by side into rows (F x nP) by outGrads, and their product added in
// one GEMM per chunk.
func filterGradDevice(p Planner, g ConvGeom, f, chunk int, x, dw Operand, outGrads func(b0, n int, rows uint64)) {
	_, pp, kk := g.sizes()
	dt := DTypeOf(dw)
	nb := deviceImages(g, chunk)
	col, rows := p.Scratch(dt, kk*nb*pp), p.Scratch(dt, f*nb*pp)
	for b0 := 0; b0 < g.B; b0 += nb {
		n := min(nb, g.B-b0)
		np := n * pp
		unfoldDevice(p, g, n, colLayout{pp, np, 1}, p.Addr(At(x.Buf, x.Off+b0*g.C*g.H*g.W)), col)
		outGrads(b0, n, rows)
		beta := 1.0
		if b0 == 0 {
			beta = 0
		}
		p.Gemm(DeviceGemm{TransB: true, M: f, N: kk, K: np, Alpha: 1, Beta: beta, A: rows, LDA: np, B: col, LDB: np,
			C: p.Addr(dw), LDC: kk})
	}
}

func convGradFilterHost[T Float](p *Pool, k ConvGradFilter) Func {
	return byWinograd[T](p, k, k.Geom, k.F, convGradFilterWinogradHost[T], convGradFilterDirectHost[T])
}

func convGradFilterDirectHost[T Float](p *Pool, k ConvGradFilter) Func {
	return gradDirectHost(p, k.Geom, k.F, k.Chunk, k.X, k.DW, dyRows[T](k.Geom, k.F, k.DY), filterGradHost[T])
}

// filterGradHost returns a Func that accumulates into DW (F x K) the
// gradient of a convolution's filter over the images X, s's parts across
// the pool's threads, each into its own sum (the first part's in DW) added
// at the end: a chunk of images at a time, their windows unfolded (K x nP)
// times their output gradients side by side, chunk's (F x nP), in one GEMM,
// or for wide images image by image, image's (F x P), in one GEMM each.
// Both may write into part q's workspace.
func filterGradHost[T Float](p *Pool, g ConvGeom, f int, s convSplit, x, dw Operand, image func(q, b int) []T, chunk func(q, b0, n int) []T) Func {
	in, pp, kk := g.sizes()
	xs, dws := hostData[T](x)[:in], hostData[T](dw)[:f*kk]
	col := workspaces[T](s.parts, kk*s.nb*pp)
	sums := append([][]T{dws}, workspaces[T](s.parts-1, f*kk)...) // each part's sum, the first in DW
	return s.run(p, g.B, func(q, b0, n int) {
		np := n * pp
		unfold(g, xs, b0, n, col[q], s.layout(g, n))
		beta := sumBeta[T](s, q, b0, g.B)
		if s.wide || n == 1 {
			for j := range n {
				linalg.Gemm(false, true, f, kk, pp, 1, image(q, b0+j), pp, col[q][j*kk*pp:], pp, beta, sums[q], kk)
				beta = 1
			}
			return
		}
		linalg.Gemm(false, true, f, kk, np, 1, chunk(q, b0, n), np, col[q], np, beta, sums[q], kk)
	}, func() {
		for _, part := range sums[1:] {
			for i, v := range part {
				dws[i] += v
			}
		}
	})
}

// colLayout says where an unfolded element lives: that of image j (of a
// chunk), window row k (the tap (c, i, j) at (c KH + i) KW + j) and output
// position p is at j J + k K + p P. Im2col's layout is (OutH OutW K, 1, K);
// the fused kernels' chunk of n images is (P, n P, 1) (K x nP, every
// image's positions side by side) or (K P, P, 1) (n K x P blocks).
type colLayout struct{ J, K, P int }

// im2colLayout returns Im2col's layout of g's windows, (OutH OutW K, 1, K).
func (g ConvGeom) im2colLayout() colLayout {
	_, pp, kk := g.sizes()
	return colLayout{pp * kk, 1, kk}
}

// taps returns, for a tap at offset off (from the padding's edge: the tap's
// position in the first window minus the padding) with stride s over an
// axis of n inputs and out outputs, the outputs [lo, hi) whose tap falls
// inside the input.
func taps(off, s, n, out int) (lo, hi int) {
	if off < 0 {
		lo = (-off + s - 1) / s
	}
	if n-off > 0 {
		hi = (n - off + s - 1) / s
	}
	lo = min(lo, out)
	return lo, min(max(hi, lo), out)
}

// unfold writes the windows of images b0 .. b0+n-1 of x into col in layout
// l (image b0 is col's image 0), with zeros for taps in the padding.
func unfold[T Float](g ConvGeom, x []T, b0, n int, col []T, l colLayout) {
	oh, ow := g.Out()
	hw := g.H * g.W
	// With unit strides and as many output columns as input ones, a tap's
	// outputs are its input plane shifted: one copy, then the columns that
	// wrapped around are zeroed.
	shifted := l.P == 1 && g.StrideH == 1 && g.StrideW == 1 && ow == g.W
	for j := range n {
		img := x[(b0+j)*g.C*hw:]
		for c := range g.C {
			plane := img[c*hw : (c+1)*hw]
			for i := range g.KH {
				for jj := range g.KW {
					k := (c*g.KH+i)*g.KW + jj
					base := j*l.J + k*l.K
					off := jj*g.DilW - g.PadW
					if shifted {
						unfoldShifted(plane, col[base:base+oh*ow], i*g.DilH-g.PadH, off, g.H, ow)
						continue
					}
					lo, hi := taps(off, g.StrideW, g.W, ow)
					for y := range oh {
						o := base + y*ow*l.P
						r := y*g.StrideH - g.PadH + i*g.DilH
						if l.P != 1 {
							for x := range ow {
								var v T
								if r >= 0 && r < g.H && x >= lo && x < hi {
									v = plane[r*g.W+off+x*g.StrideW]
								}
								col[o+x*l.P] = v
							}
							continue
						}
						dst := col[o : o+ow]
						if r < 0 || r >= g.H {
							clear(dst)
							continue
						}
						clear(dst[:lo])
						clear(dst[hi:])
						row := plane[r*g.W:]
						if g.StrideW == 1 && lo < hi {
							copy(dst[lo:hi], row[off+lo:off+hi])
							continue
						}
						for x := lo; x < hi; x++ {
							dst[x] = row[off+x*g.StrideW]
						}
					}
				}
			}
		}
	}
}

// unfoldShifted writes into dst (oh x w) the plane (h x w) shifted by dh
// rows and dw columns: dst[y][x] = plane[y+dh][x+dw], 0 outside the plane.
func unfoldShifted[T Float](plane, dst []T, dh, dw, h, w int) {
	oh := len(dst) / w
	y0, y1 := min(max(0, -dh), oh), max(min(oh, h-dh), 0)
	if y0 >= y1 {
		clear(dst)
		return
	}
	d0, d1, shift := y0*w, y1*w, dh*w+dw
	a := min(max(d0, -shift), d1)
	b := max(min(d1, len(plane)-shift), a)
	clear(dst[:a])
	if a < b {
		copy(dst[a:b], plane[a+shift:b+shift])
	}
	clear(dst[b:])
	clearWrapped(dst, y0, y1, dw, w)
}

// clearWrapped zeroes, in rows y0 to y1 of the w-wide matrix m, the dw
// columns that a shift by dw columns wraps around: the first -dw where dw
// is negative, else the last dw. (A loop of stores: a clear per row would
// call the runtime for a column or two.)
func clearWrapped[T Float](m []T, y0, y1, dw, w int) {
	if dw == 0 {
		return
	}
	lo, hi := 0, min(-dw, w)
	if dw > 0 {
		lo, hi = max(w-dw, 0), w
	}
	for y := y0; y < y1; y++ {
		row := m[y*w : (y+1)*w]
		for x := lo; x < hi; x++ {
			row[x] = 0
		}
	}
}

// foldShifted adds src (oh x w), a tap's outputs as unfoldShifted writes
// them, into the plane (h x w) shifted by dh rows and dw columns. It zeroes
// the columns of src that wrap around, so that the rest is one addition
// over a range.
func foldShifted[T Float](src, plane []T, dh, dw, h, w int) {
	oh := len(src) / w
	y0, y1 := min(max(0, -dh), oh), max(min(oh, h-dh), 0)
	if y0 >= y1 {
		return
	}
	clearWrapped(src, y0, y1, dw, w)
	shift := dh*w + dw
	a := min(max(y0*w, -shift), y1*w)
	b := max(min(y1*w, len(plane)-shift), a)
	if a == b {
		return
	}
	s, d := src[a:b], plane[a+shift:b+shift]
	for i, v := range s {
		d[i] += v
	}
}

// fold adds the unfolded windows of images b0 .. b0+n-1 in col (layout l;
// image b0 is col's image 0) into dx at the input elements they were taken
// from. It may zero elements of col that stand for taps in the padding.
func fold[T Float](g ConvGeom, col []T, l colLayout, dx []T, b0, n int) {
	oh, ow := g.Out()
	hw := g.H * g.W
	shifted := l.P == 1 && g.StrideH == 1 && g.StrideW == 1 && ow == g.W // as in unfold
	for j := range n {
		img := dx[(b0+j)*g.C*hw:]
		for c := range g.C {
			plane := img[c*hw : (c+1)*hw]
			for i := range g.KH {
				for jj := range g.KW {
					k := (c*g.KH+i)*g.KW + jj
					base := j*l.J + k*l.K
					off := jj*g.DilW - g.PadW
					if shifted {
						foldShifted(col[base:base+oh*ow], plane, i*g.DilH-g.PadH, off, g.H, ow)
						continue
					}
					lo, hi := taps(off, g.StrideW, g.W, ow)
					for y := range oh {
						r := y*g.StrideH - g.PadH + i*g.DilH
						if r < 0 || r >= g.H {
							continue
						}
						o := base + y*ow*l.P
						row := plane[r*g.W:]
						if l.P == 1 && g.StrideW == 1 && lo < hi {
							src, dst := col[o+lo:o+hi], row[off+lo:off+hi]
							for x, v := range src {
								dst[x] += v
							}
							continue
						}
						for x := lo; x < hi; x++ {
							row[off+x*g.StrideW] += col[o+x*l.P]
						}
					}
				}
			}
		}
	}
}

// hostChunk bounds the unfolded elements (K x n P) one thread of the CPU
// backend holds at a time: a chunk of images whose windows fit in a core's
// L2 cache, which feeds its GEMM as fast as a larger one does.
const hostChunk = 1 << 17

// deviceChunk bounds the unfolded elements a device kernel's workspace
// holds (64 MiB of float32).
const deviceChunk = 1 << 24

// wideImage is the fewest output positions an image has for the CPU to
// multiply it alone: its GEMM is then wide enough, and a chunk's images
// need not be gathered side by side and their outputs scattered back
// (gorgonia's examples/convnet's first layer, 784 positions, forward:
// 0.30 ms with them, 0.23 ms without; BenchmarkConv in backend/cpu, two
// threads).
const wideImage = 256

// convSplit is how the CPU runs a fused convolution: the batch split into
// parts, one a thread, each part in chunks of at most nb images, one GEMM
// per chunk, or, for wide images, per image.
type convSplit struct {
	parts, nb int
	wide      bool
}

// layout returns the layout of a chunk of n images' unfolded windows:
// side by side (K x nP) for one GEMM, or one K x P block after the other.
func (s convSplit) layout(g ConvGeom, n int) colLayout {
	_, pp, kk := g.sizes()
	if s.wide {
		return colLayout{kk * pp, pp, 1}
	}
	return colLayout{pp, n * pp, 1}
}

// newConvSplit returns the split of a convolution of geometry g over the
// pool's threads in chunks of chunk images (0: as many as hostChunk allows).
func newConvSplit(pool *Pool, g ConvGeom, chunk int) convSplit {
	_, pp, kk := g.sizes()
	parts := min(pool.threads, g.B)
	per := (g.B + parts - 1) / parts
	if chunk <= 0 {
		chunk = hostChunk / (kk * pp)
	}
	return convSplit{parts: parts, nb: max(1, min(per, chunk)), wide: pp >= wideImage}
}

// deviceImages returns how many images a device kernel unfolds at a time.
func deviceImages(g ConvGeom, chunk int) int {
	_, pp, kk := g.sizes()
	if chunk <= 0 {
		chunk = deviceChunk / (kk * pp)
	}
	return max(1, min(g.B, chunk))
}

// run returns a Func that calls chunk(q, b0, n) for every chunk of n
// images from b0 of every part q, the parts on the pool's threads (each
// with OpenBLAS on one thread when there are several), then after.
func (s convSplit) run(pool *Pool, b int, chunk func(q, b0, n int), after func()) Func {
	sp := pool.split(s.parts, 1, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			b0, b1 := s.start(q, b), s.start(q+1, b)
			for c := b0; c < b1; c += s.nb {
				chunk(q, c, min(s.nb, b1-c))
			}
		}
	})
	sp.parts = s.parts
	f := oneBLASThread(sp)
	if after == nil {
		return f
	}
	return func() error {
		if err := f(); err != nil {
			return err
		}
		after()
		return nil
	}
}

// start returns the first image of part q of a batch of b images.
func (s convSplit) start(q, b int) int { return q * b / s.parts }

// sumBeta returns the GEMM beta for part q's chunk from image b0 of b: 0
// for the part's first chunk, which starts the part's sum, else 1.
func sumBeta[T Float](s convSplit, q, b0, b int) T {
	if b0 == s.start(q, b) {
		return 0
	}
	return 1
}

// rowSpace returns each part's workspace for a chunk's outputs (or output
// gradients) side by side, F x nP; none for wide images.
func rowSpace[T Float](s convSplit, f, p int) [][]T {
	if s.wide {
		return make([][]T, s.parts)
	}
	return workspaces[T](s.parts, f*s.nb*p)
}

// workspaces returns parts slices of n elements each.
func workspaces[T Float](parts, n int) [][]T {
	ws := make([][]T, parts)
	for i := range ws {
		ws[i] = make([]T, n)
	}
	return ws
}

// gatherRows copies the (n, F, P) array src into the F x nP matrix dst:
// every image's positions side by side in each filter's row.
func gatherRows[T Float](src, dst []T, n, f, p int) {
	for j := range n {
		for r := range f {
			copy(dst[r*n*p+j*p:][:p], src[(j*f+r)*p:][:p])
		}
	}
}

// scatterRows is the inverse of gatherRows.
func scatterRows[T Float](src, dst []T, n, f, p int) {
	for j := range n {
		for r := range f {
			copy(dst[(j*f+r)*p:][:p], src[r*n*p+j*p:][:p])
		}
	}
}
