package backend

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Pooling as gorgonia v0.9.18 computes it (maxPoolOp, maxPoolDiffOp,
// avgPoolOp, avgPoolDiffOp), quirks included: a compiled program agrees with
// the tape machine.
var _ = []defined{MaxPool{}, MaxPoolGrad{}, AvgPool{}, AvgPoolGrad{}}

// PoolGeom is the geometry of a pooling over a batch of images in NCHW
// order: B images of C channels of H x W, KH x KW windows StrideH rows
// (StrideW columns) apart, the first starting PadH rows above (PadW columns
// left of) the image, OutH x OutW windows. A window covers only the input
// elements inside it: the padding holds nothing. (gorgonia counts OutH from
// both paddings, north and south, but starts the first window at the north
// one, or with four paddings given at the south one.)
type PoolGeom struct {
	B, C, H, W       int
	KH, KW           int
	PadH, PadW       int
	StrideH, StrideW int
	OutH, OutW       int
}

// String describes the geometry briefly, for profiles.
func (g PoolGeom) String() string {
	return fmt.Sprintf("%dx%dx%dx%d window %dx%d pad %d,%d stride %d,%d out %dx%d",
		g.B, g.C, g.H, g.W, g.KH, g.KW, g.PadH, g.PadW, g.StrideH, g.StrideW, g.OutH, g.OutW)
}

// Check reports an error unless every size and stride is positive and no
// padding negative.
func (g PoolGeom) Check() error {
	if min(g.B, g.C, g.H, g.W, g.KH, g.KW, g.StrideH, g.StrideW, g.OutH, g.OutW) < 1 || min(g.PadH, g.PadW) < 0 {
		return fmt.Errorf("pooling %v: sizes and strides must be positive, paddings not negative", g)
	}
	return nil
}

// checkFor is Check, its error naming kernel k.
func (g PoolGeom) checkFor(k Kernel) error {
	if err := g.Check(); err != nil {
		return fmt.Errorf("backend: %s: %w", Name(k), err)
	}
	return nil
}

// check is checkFor, then checks k's operands as checkAll does.
func (g PoolGeom) check(k Kernel, dt DType, ops ...any) error {
	if err := g.checkFor(k); err != nil {
		return err
	}
	return checkAll(k, dt, ops...)
}

// window returns the input rows [h0, h1) and columns [w0, w1) of output
// (y, x)'s window; empty when the window lies in the padding.
func (g PoolGeom) window(y, x int) (h0, h1, w0, w1 int) {
	h0, w0 = y*g.StrideH-g.PadH, x*g.StrideW-g.PadW
	h1, w1 = min(h0+g.KH, g.H), min(w0+g.KW, g.W)
	return max(h0, 0), h1, max(w0, 0), w1
}

func (g PoolGeom) sizes() (in, out int) { return g.B * g.C * g.H * g.W, g.B * g.C * g.OutH * g.OutW }

// poolGeomOf returns a geometry as the kernels take it (PoolGeom in
// kernels.cu).
func poolGeomOf(g PoolGeom) poolGeom {
	return poolGeom{B: g.B, C: g.C, H: g.H, W: g.W, Kh: g.KH, Kw: g.KW, Padh: g.PadH, Padw: g.PadW,
		Strideh: g.StrideH, Stridew: g.StrideW, Oh: g.OutH, Ow: g.OutW}
}

// MaxPool writes into Y (B, C, OutH, OutW) the largest element of each
// window of X (B, C, H, W): the first of equal ones, NaNs never; a window
// with none above the type's lowest finite value, or none at all, gives
// that value. With Rectify, X is first rectified as gorgonia.Rectify
// computes it, x times (x >= 0): x, or -0 (NaN for NaN and -Inf), so that
// MaxPool(Rectify(x)) runs without the rectified tensor.
type MaxPool struct {
	Geom    PoolGeom
	Rectify bool
	X, Y    Operand
}

// Check checks the geometry and the operands.
func (k MaxPool) Check() error {
	in, out := k.Geom.sizes()
	return k.Geom.check(k, DTypeOf(k.Y), "X", k.X, in, "Y", k.Y, out)
}

// Host pools plane by plane, split across the pool's threads.
func (k MaxPool) Host(p *Pool) (Func, error) {
	return onFloats(p, k, maxPoolHost[float32], maxPoolHost[float64])
}

// Device launches on_max_pool, a thread per output element.
func (k MaxPool) Device(p Planner) {
	_, out := k.Geom.sizes()
	elementwise(p, "on_max_pool", out, maxPoolArgs{G: poolGeomOf(k.Geom), Rect: k.Rectify, X: k.X, Y: k.Y})
}

func maxPoolHost[T Float](p *Pool, k MaxPool) Func {
	g := k.Geom
	in, out := g.sizes()
	x, y := hostData[T](k.X)[:in], hostData[T](k.Y)[:out]
	return perPlane(p, g, g.OutH*g.OutW, func(i, o plane) { maxPlane(g, k.Rectify, x[i.lo:i.hi], y[o.lo:o.hi]) })
}

// plane is the elements [lo, hi) of a (B, C, rows, columns) array that
// one image and channel hold.
type plane struct{ lo, hi int }

// perPlane returns a Func that runs f on every image and channel of g (its
// input plane i, H x W, and output plane o, OutH x OutW), split across the
// pool's threads, at a cost of cost times a window's size each.
func perPlane(p *Pool, g PoolGeom, cost int, f func(i, o plane)) Func {
	hw, ohw := g.H*g.W, g.OutH*g.OutW
	return p.split(g.B*g.C, cost*g.KH*g.KW, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			f(plane{pl * hw, (pl + 1) * hw}, plane{pl * ohw, (pl + 1) * ohw})
		}
	}).loop()
}

// MaxPoolGrad writes into DX (B, C, H, W) the gradient of MaxPool: each
// element of DY (B, C, OutH, OutW) added at the element MaxPool took from X
// for its window (none for a window MaxPool took nothing from), found from
// Y, MaxPool's output: the window's first element equal to it. With
// Rectify, the elements are X's rectified as MaxPool's are, and the
// gradient is then multiplied by x >= 0 (0 or 1), as gorgonia.Rectify's
// gradient is.
type MaxPoolGrad struct {
	Geom         PoolGeom
	Rectify      bool
	X, Y, DY, DX Operand
}

// Check checks the geometry and the operands.
func (k MaxPoolGrad) Check() error {
	in, out := k.Geom.sizes()
	return k.Geom.check(k, DTypeOf(k.DX), "X", k.X, in, "Y", k.Y, out, "DY", k.DY, out, "DX", k.DX, in)
}

// Host adds each output gradient at its window's largest element, plane
// by plane, split across the pool's threads.
func (k MaxPoolGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, maxPoolGradHost[float32], maxPoolGradHost[float64])
}

// Device launches on_max_pool_grad, a thread per input element that sums
// the gradients of the windows that took it, in the order of the windows,
// as the CPU adds them.
func (k MaxPoolGrad) Device(p Planner) {
	in, _ := k.Geom.sizes()
	elementwise(p, "on_max_pool_grad", in, maxPoolGradArgs{G: poolGeomOf(k.Geom), Rect: k.Rectify, X: k.X, Y: k.Y, Dy: k.DY, Dx: k.DX})
}

func maxPoolGradHost[T Float](p *Pool, k MaxPoolGrad) Func {
	g := k.Geom
	in, out := g.sizes()
	x, y, dy, dx := hostData[T](k.X)[:in], hostData[T](k.Y)[:out], hostData[T](k.DY)[:out], hostData[T](k.DX)[:in]
	return perPlane(p, g, g.OutH*g.OutW, func(i, o plane) {
		maxPlaneGrad(g, k.Rectify, x[i.lo:i.hi], y[o.lo:o.hi], dy[o.lo:o.hi], dx[i.lo:i.hi])
	})
}

// AvgPool writes into Y (B, C, OutH, OutW) gorgonia's average pooling: the
// sum of each window's elements (in row-major order, in the element type)
// divided by W, the input's width, not by the window's size.
type AvgPool struct {
	Geom PoolGeom
	X, Y Operand
}

// Check checks the geometry and the operands.
func (k AvgPool) Check() error {
	in, out := k.Geom.sizes()
	return k.Geom.check(k, DTypeOf(k.Y), "X", k.X, in, "Y", k.Y, out)
}

// Host averages plane by plane, split across the pool's threads.
func (k AvgPool) Host(p *Pool) (Func, error) {
	return onFloats(p, k, avgPoolHost[float32], avgPoolHost[float64])
}

// Device launches on_avg_pool, a thread per output element.
func (k AvgPool) Device(p Planner) {
	_, out := k.Geom.sizes()
	elementwise(p, "on_avg_pool", out, poolArgs{G: poolGeomOf(k.Geom), X: k.X, Y: k.Y})
}

func avgPoolHost[T Float](p *Pool, k AvgPool) Func {
	g := k.Geom
	in, out := g.sizes()
	x, y := hostData[T](k.X)[:in], hostData[T](k.Y)[:out]
	return perPlane(p, g, g.OutH*g.OutW, func(i, o plane) {
		src, dst := x[i.lo:i.hi], y[o.lo:o.hi]
		for yy := range g.OutH {
			for xx := range g.OutW {
				dst[yy*g.OutW+xx] = windowSum(g, src, yy, xx) / T(g.W)
			}
		}
	})
}

// windowSum returns the sum of window (y, x) of plane in row-major order,
// in T (as gorgonia adds).
func windowSum[T Float](g PoolGeom, plane []T, y, x int) T {
	h0, h1, w0, w1 := g.window(y, x)
	var s T
	if w0 >= w1 {
		return s
	}
	for h := h0; h < h1; h++ {
		for _, v := range plane[h*g.W+w0 : h*g.W+w1] {
			s += v
		}
	}
	return s
}

// AvgPoolGrad writes into DX (B, C, H, W) what gorgonia's avgPoolDiffOp
// computes from DY (B, C, OutH, OutW), which is not AvgPool's gradient: per
// image and channel, DX is zeroed, each element of DY is added at the last
// input element of its window, and then, for every input position (h, w)
// in row-major order, DX at (h, w) becomes the sum over the window that
// output (h, w) would have, read from DX as it stands (positions before it
// already rewritten), divided by W.
type AvgPoolGrad struct {
	Geom   PoolGeom
	DY, DX Operand
}

// Check checks the geometry and the operands.
func (k AvgPoolGrad) Check() error {
	in, out := k.Geom.sizes()
	return k.Geom.check(k, DTypeOf(k.DX), "DY", k.DY, out, "DX", k.DX, in)
}

// Host runs gorgonia's two passes plane by plane, the planes split across
// the pool's threads.
func (k AvgPoolGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, avgPoolGradHost[float32], avgPoolGradHost[float64])
}

// Device launches on_avg_pool_grad, a thread per plane: the second pass
// reads what it has written.
func (k AvgPoolGrad) Device(p Planner) {
	elementwise(p, "on_avg_pool_grad", k.Geom.B*k.Geom.C, avgPoolGradArgs{G: poolGeomOf(k.Geom), Dy: k.DY, Dx: k.DX})
}

func avgPoolGradHost[T Float](p *Pool, k AvgPoolGrad) Func {
	g := k.Geom
	in, out := g.sizes()
	dy, dx := hostData[T](k.DY)[:out], hostData[T](k.DX)[:in]
	return perPlane(p, g, g.H*g.W, func(i, o plane) {
		src, dst := dy[o.lo:o.hi], dx[i.lo:i.hi]
		clear(dst)
		for yy := range g.OutH {
			for xx := range g.OutW {
				if h0, h1, w0, w1 := g.window(yy, xx); h0 < h1 && w0 < w1 {
					dst[(h1-1)*g.W+w1-1] += src[yy*g.OutW+xx]
				}
			}
		}
		for h := range g.H {
			for w := range g.W {
				dst[h*g.W+w] = windowSum(g, dst, h, w) / T(g.W)
			}
		}
	})
}

// lowest returns the lowest finite value of T.
func lowest[T Float]() T {
	low := -math.MaxFloat64
	if linalg.Is32[T]() {
		low = -math.MaxFloat32
	}
	return T(low)
}

// rectify returns x times (x >= 0), as gorgonia.Rectify computes it.
func rectify[T Float](x T) T {
	z := x * 0
	if !(x >= 0) {
		x = z
	}
	return x
}

// step returns 1 where x >= 0, else 0: gorgonia.Rectify's mask.
func step[T Float](x T) T {
	var s T
	if x >= 0 {
		s = 1
	}
	return s
}

// tiles2 reports whether g's windows are 2 x 2, side by side without
// padding: the common case, which the CPU runs by a loop of its own.
func (g PoolGeom) tiles2() bool {
	return g.KH == 2 && g.KW == 2 && g.StrideH == 2 && g.StrideW == 2 && g.PadH == 0 && g.PadW == 0 &&
		2*g.OutH <= g.H && 2*g.OutW <= g.W
}

// maxPlane writes into y the largest element of each window of plane (one
// image's channel), rectified first with rect, as MaxPool picks it.
func maxPlane[T Float](g PoolGeom, rect bool, plane, y []T) {
	if g.tiles2() {
		maxTiles2(g, rect, plane, y)
		return
	}
	low := lowest[T]()
	for r := range g.OutH {
		h0 := r*g.StrideH - g.PadH
		h1 := min(h0+g.KH, g.H)
		yr := y[r*g.OutW : (r+1)*g.OutW]
		for c := range yr {
			yr[c] = low
		}
		for h := max(h0, 0); h < h1; h++ {
			row := plane[h*g.W : (h+1)*g.W]
			for c := range yr {
				w0 := c*g.StrideW - g.PadW
				w1 := min(w0+g.KW, g.W)
				m := yr[c]
				for w := max(w0, 0); w < w1; w++ {
					v := row[w]
					if rect {
						v = rectify(v)
					}
					if v > m {
						m = v
					}
				}
				yr[c] = m
			}
		}
	}
}

// maxTiles2 is maxPlane for 2 x 2 windows side by side, without a branch
// on the data: a window's largest element, NaNs left out, is max over its
// elements with NaNs taken as the lowest value, and the largest rectified
// one is that or 0 (windows of nothing above the lowest value aside). A
// zero may come out +0 where gorgonia's is -0.
func maxTiles2[T Float](g PoolGeom, rect bool, plane, y []T) {
	low := lowest[T]()
	for r := range g.OutH {
		r0, r1 := plane[2*r*g.W:(2*r+1)*g.W], plane[(2*r+1)*g.W:(2*r+2)*g.W]
		yr := y[r*g.OutW : (r+1)*g.OutW]
		for c := range yr {
			m := low
			for _, v := range [4]T{r0[2*c], r0[2*c+1], r1[2*c], r1[2*c+1]} {
				if v != v {
					v = low
				}
				m = max(m, v)
			}
			if rect {
				if m == low { // rare: rectify each element
					for _, v := range [4]T{r0[2*c], r0[2*c+1], r1[2*c], r1[2*c+1]} {
						if v = rectify(v); v > m {
							m = v
						}
					}
				} else {
					m = max(m, 0)
				}
			}
			yr[c] = m
		}
	}
}

// maxTiles2Grad is maxPlaneGrad for 2 x 2 windows side by side: every input
// element in one window at most, written once. The element a window took
// is found without a branch on the data (ties and windows of zeros aside).
func maxTiles2Grad[T Float](g PoolGeom, rect bool, plane, y, dy, dx []T) {
	low := lowest[T]()
	clear(dx[2*g.OutH*g.W:])
	for r := range g.OutH {
		i0, i1 := 2*r*g.W, (2*r+1)*g.W
		clear(dx[i0+2*g.OutW : i1])
		clear(dx[i1+2*g.OutW : i1+g.W])
		r0, r1 := plane[i0:i0+g.W], plane[i1:i1+g.W]
		for c := range g.OutW {
			o, j := r*g.OutW+c, 2*c
			dx[i0+j], dx[i0+j+1], dx[i1+j], dx[i1+j+1] = 0, 0, 0, 0
			m := y[o]
			if m == low {
				continue // the window took nothing
			}
			a, b, e, f := r0[j], r0[j+1], r1[j], r1[j+1]
			// k: the first element equal to the window's (rectified)
			// largest one; where that is 0, the first from the lowest
			// value to 0.
			var k int
			if rect && m == 0 {
				k = firstNonPositive(low, a, b, e, f)
			} else {
				k = bits.TrailingZeros64(flag(a == m) | flag(b == m)<<1 | flag(e == m)<<2 | flag(f == m)<<3 | 16)
			}
			if k == 4 {
				continue // not one of them: Y is not this X's pooling
			}
			at := i0 + (k>>1)*g.W + j + k&1
			v := dy[o]
			if rect {
				v *= step(plane[at])
			}
			dx[at] = v
		}
	}
}

// flag returns 1 for true, 0 for false, without a branch.
func flag(b bool) uint64 {
	var u uint64
	if b {
		u = 1
	}
	return u
}

// firstNonPositive returns the index of the first of a, b, e, f from low
// to 0, or 4.
func firstNonPositive[T Float](low, a, b, e, f T) int {
	for i, v := range [4]T{a, b, e, f} {
		if v <= 0 && v >= low {
			return i
		}
	}
	return 4
}

// maxPlaneGrad writes into dx the gradient of maxPlane: each element of dy
// added at the element of plane that MaxPool took for its window, the first
// equal to y, the window's largest (none where y is the lowest finite
// value: MaxPool took nothing), times step(x) with rect.
func maxPlaneGrad[T Float](g PoolGeom, rect bool, plane, y, dy, dx []T) {
	if g.tiles2() {
		maxTiles2Grad(g, rect, plane, y, dy, dx)
		return
	}
	low := lowest[T]()
	clear(dx)
	for r := range g.OutH {
		h0 := r*g.StrideH - g.PadH
		h1 := min(h0+g.KH, g.H)
		h0 = max(h0, 0)
		for c := range g.OutW {
			o := r*g.OutW + c
			m := y[o]
			if m == low {
				continue
			}
			w0 := c*g.StrideW - g.PadW
			w1 := min(w0+g.KW, g.W)
			w0 = max(w0, 0)
		window:
			for h := h0; h < h1; h++ {
				for w := w0; w < w1; w++ {
					x := plane[h*g.W+w]
					if rect {
						x = rectify(x)
					}
					if x == m {
						dx[h*g.W+w] += dy[o]
						break window
					}
				}
			}
		}
	}
	if rect {
		for i, x := range plane {
			dx[i] *= step(x)
		}
	}
}
