package backend

import (
	"unsafe"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Winograd's minimal filtering F(2 x 2, 3 x 3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016), by which the CPU
// runs the 3 x 3 convolutions of stride 1 between many channels (and their
// gradients): each 2 x 2 tile of the output is
//
//	Y = A^T [(G g G^T) ⊙ (B^T d B)] A
//
// for the 4 x 4 tile d of the input under it, so that a convolution of C
// channels into F becomes 16 products of F x C by C x tiles, 16 multiplies
// per tile and pair of channels where im2col's product has 36. The gradient
// of the filter is Σ_tiles G^T [(A dY A^T) ⊙ (B^T d B)] G, 16 products of
// the same sizes; that of the images the convolution of the output's
// gradient with the filter turned by 180 degrees. The transforms add and
// halve; their rounding differs from the direct products' by a few units
// in the last place of the terms. A non-finite input spreads further than
// in the direct products: an infinity in a tile makes the whole 2 x 2
// output tile infinite or NaN (and the gradients then fail the program's
// finiteness check as they would anyway).
//
//	B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//	G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//	A^T = [1 1 1 0; 0 1 -1 -1]

// wgMinChannels is the fewest input and output channels for which the CPU
// convolves by Winograd's algorithm: with fewer, its 16 products are too
// thin to run near the GEMM rate (gorgonia's examples/convnet's first
// layer, one channel, keeps im2col).
const wgMinChannels = 16

// wgChunk bounds the transformed elements (inputs and products, or inputs
// and output gradients) of one thread's chunk of images: a core's L2 cache
// of float64s. (examples/convnet's second and third layers, batch 32, two
// threads, fused with their pooling, CPU time per run at 2^17 against
// 2^19: forward 4.8 and 4.6 ms against 4.8 and 5.7, the filter's gradient
// 5.1 and 5.3 against 5.6 and 6.6; im2col 6.7 and 6.0, 6.7 and 5.3.)
const wgChunk = 1 << 17

// winograd reports whether the CPU runs a convolution of geometry g by f
// filters (and its gradients) in T by Winograd's algorithm: in float64, a
// 3 x 3 kernel of stride and dilation 1, padding at most 2, and at least
// wgMinChannels channels in and out. Not in float32: there the transforms'
// rounding, a few units in the last place of the terms, is near the size
// of the gradients that Adam's steps divide by their own magnitude, and
// such weights then move apart from the tape machine's within a few steps
// (gorgonia's examples/convnet: 0.02 relative after 3 steps, 2e-5 with
// im2col; in float64 2e-11).
func winograd[T Float](g ConvGeom, f int) bool {
	return !linalg.Is32[T]() && g.KH == 3 && g.KW == 3 && g.StrideH == 1 && g.StrideW == 1 && g.DilH == 1 && g.DilW == 1 &&
		g.PadH <= 2 && g.PadW <= 2 && min(g.C, f) >= wgMinChannels
}

// wgGeom is the tiling of a 3 x 3 convolution of stride 1 of h x w planes
// padded by ph rows and pw columns: its oh x ow output in th x tw tiles of
// 2 x 2 (the last row and column of tiles cut where oh or ow is odd).
type wgGeom struct {
	h, w, ph, pw   int
	oh, ow, th, tw int
}

func newWgGeom(h, w, ph, pw int) wgGeom {
	oh, ow := h+2*ph-2, w+2*pw-2
	return wgGeom{h: h, w: w, ph: ph, pw: pw, oh: oh, ow: ow, th: (oh + 1) / 2, tw: (ow + 1) / 2}
}

func (g wgGeom) tiles() int { return g.th * g.tw }

// wgStride returns the elements between the 16 matrices of n elements
// each of a transformed chunk: n rounded up to whole cache lines, and to an
// odd number of them, so that the 16 elements of a tile, one in each
// matrix, do not all fall in the same sets of the cache (as they do where
// the matrices are a multiple of 4 KiB apart, and then evict each other).
func wgStride[T Float](n int) int {
	line := 64 / int(unsafe.Sizeof(T(0)))
	lines := (n + line - 1) / line
	return (lines | 1) * line
}

// forward and backward return the tilings of a convolution of geometry g
// and of the convolution that gives its images' gradient (the output's
// gradient padded by 2 - pad).
func wgForward(g ConvGeom) wgGeom { return newWgGeom(g.H, g.W, g.PadH, g.PadW) }

func wgBackward(g ConvGeom) wgGeom {
	oh, ow := g.Out()
	return newWgGeom(oh, ow, 2-g.PadH, 2-g.PadW)
}

// wgImages returns how many images a thread transforms at a time, per
// image per channel tiles transformed elements each (chunk, where above 0,
// bounding it as Conv's Chunk does).
func wgImages(s convSplit, b, perImage, chunk int) int {
	per := (b + s.parts - 1) / s.parts
	n := wgChunk / max(perImage, 1)
	if chunk > 0 {
		n = chunk
	}
	return max(1, min(per, n))
}

// wgFilter writes into u (16 matrices co x ci, wgStride apart) the
// transformed filter G g G^T of
// every pair of channels: of w (f x c x 3 x 3) as it is (co = f, ci = c),
// or with turned, for the images' gradient, turned by 180 degrees with its
// channels swapped (co = c, ci = f).
func wgFilter[T Float](w []T, f, c int, turned bool, u []T) {
	co, ci := f, c
	if turned {
		co, ci = c, f
	}
	us := wgStride[T](co * ci)
	for o := range co {
		for i := range ci {
			var g [9]T
			if turned {
				src := w[(i*c+o)*9:][:9]
				for k := range 9 {
					g[k] = src[8-k]
				}
			} else {
				copy(g[:], w[(o*c+i)*9:][:9])
			}
			// G g: rows g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2.
			var gg [12]T
			for j := range 3 {
				a, b, e := g[j], g[3+j], g[6+j]
				gg[j], gg[3+j], gg[6+j], gg[9+j] = a, (a+b+e)/2, (a-b+e)/2, e
			}
			// (G g) G^T.
			for r := range 4 {
				a, b, e := gg[3*r], gg[3*r+1], gg[3*r+2]
				base := 4*r*us + o*ci + i
				u[base] = a
				u[base+us] = (a + b + e) / 2
				u[base+2*us] = (a - b + e) / 2
				u[base+3*us] = e
			}
		}
	}
}

// wgFilterGrad writes into dw (f x c x 3 x 3) G^T du G for the gradients du
// (16 matrices f x c, wgStride apart) of the transformed filter.
func wgFilterGrad[T Float](du []T, f, c int, dw []T) {
	n := f * c
	ds := wgStride[T](n)
	for p := range n {
		var d [16]T
		for xi := range 16 {
			d[xi] = du[xi*ds+p]
		}
		// G^T d: rows d0 + (d1+d2)/2, (d1-d2)/2, (d1+d2)/2 + d3.
		var r [12]T
		for j := range 4 {
			a, b, e, h := d[j], d[4+j], d[8+j], d[12+j]
			r[j], r[4+j], r[8+j] = a+(b+e)/2, (b-e)/2, (b+e)/2+h
		}
		out := dw[p*9:][:9]
		for i := range 3 {
			a, b, e, h := r[4*i], r[4*i+1], r[4*i+2], r[4*i+3]
			out[3*i], out[3*i+1], out[3*i+2] = a+(b+e)/2, (b-e)/2, (b+e)/2+h
		}
	}
}

// padSize returns the elements of a plane padded for wgInput: the rows
// and columns that the tiles read, 2 th + 2 by 2 tw + 2.
func (g wgGeom) padSize() int { return (2*g.th + 2) * (2*g.tw + 2) }

// wgInput writes into v (16 matrices ci x n tiles, wgStride apart) the
// transformed input tiles B^T d B of n images of ci channels, plane (j, c)
// at src[j sj + c sc:] (g.h x g.w); tile t of image j is column
// j tiles + t. Each plane is first copied into pad (padSize elements), with
// the zeros around it that the tiles read.
func wgInput[T Float](g wgGeom, src []T, n, ci, sj, sc int, v, pad []T) {
	tt := n * g.tiles()
	vs := wgStride[T](ci * tt)
	pw := 2*g.tw + 2
	pad = pad[:g.padSize()]
	clear(pad)
	rows := min(g.h, 2*g.th+2-g.ph) // the plane's rows and columns inside the padded one
	cols := min(g.w, pw-g.pw)
	var vx [16][]T
	for j := range n {
		for c := range ci {
			plane := src[j*sj+c*sc:][:g.h*g.w]
			for r := range rows {
				copy(pad[(r+g.ph)*pw+g.pw:][:cols], plane[r*g.w:][:cols])
			}
			col := c*tt + j*g.tiles()
			for xi := range vx {
				vx[xi] = v[xi*vs+col:][:g.tiles()]
			}
			for ty := range g.th {
				r0 := pad[2*ty*pw:][:pw]
				r1 := pad[(2*ty+1)*pw:][:pw]
				r2 := pad[(2*ty+2)*pw:][:pw]
				r3 := pad[(2*ty+3)*pw:][:pw]
				o := ty * g.tw
				for tx := range g.tw {
					x := 2 * tx
					// The rows of B^T d: d0 - d2, d1 + d2, d2 - d1, d1 - d3,
					// each then times B: (a, b, e, h) to a - e, b + e, e - b,
					// b - h.
					a0, a1, a2, a3 := r0[x]-r2[x], r0[x+1]-r2[x+1], r0[x+2]-r2[x+2], r0[x+3]-r2[x+3]
					b0, b1, b2, b3 := r1[x]+r2[x], r1[x+1]+r2[x+1], r1[x+2]+r2[x+2], r1[x+3]+r2[x+3]
					e0, e1, e2, e3 := r2[x]-r1[x], r2[x+1]-r1[x+1], r2[x+2]-r1[x+2], r2[x+3]-r1[x+3]
					h0, h1, h2, h3 := r1[x]-r3[x], r1[x+1]-r3[x+1], r1[x+2]-r3[x+2], r1[x+3]-r3[x+3]
					t := o + tx
					vx[0][t], vx[1][t], vx[2][t], vx[3][t] = a0-a2, a1+a2, a2-a1, a1-a3
					vx[4][t], vx[5][t], vx[6][t], vx[7][t] = b0-b2, b1+b2, b2-b1, b1-b3
					vx[8][t], vx[9][t], vx[10][t], vx[11][t] = e0-e2, e1+e2, e2-e1, e1-e3
					vx[12][t], vx[13][t], vx[14][t], vx[15][t] = h0-h2, h1+h2, h2-h1, h1-h3
				}
			}
		}
	}
}

// wgOutput writes the output tiles A^T m A of the products m (16 matrices
// co x n tiles, wgStride apart) into n images of co channels, plane (j, o)
// at dst[j dj + o do:] (g.oh x g.ow).
func wgOutput[T Float](g wgGeom, m []T, n, co int, dst []T, dj, do int) {
	tt := n * g.tiles()
	ms := wgStride[T](co * tt)
	var mx [16][]T
	for j := range n {
		for o := range co {
			plane := dst[j*dj+o*do:][:g.oh*g.ow]
			col := o*tt + j*g.tiles()
			for xi := range mx {
				mx[xi] = m[xi*ms+col:][:g.tiles()]
			}
			for ty := range g.th {
				for tx := range g.tw {
					p := ty*g.tw + tx
					// A^T x: rows x0 + x1 + x2, x1 - x2 - x3; each then times
					// A: (a, b, e, h) to a + b + e, b - e - h.
					s0 := mx[0][p] + mx[4][p] + mx[8][p]
					s1 := mx[1][p] + mx[5][p] + mx[9][p]
					s2 := mx[2][p] + mx[6][p] + mx[10][p]
					s3 := mx[3][p] + mx[7][p] + mx[11][p]
					s4 := mx[4][p] - mx[8][p] - mx[12][p]
					s5 := mx[5][p] - mx[9][p] - mx[13][p]
					s6 := mx[6][p] - mx[10][p] - mx[14][p]
					s7 := mx[7][p] - mx[11][p] - mx[15][p]
					y00, y01 := s0+s1+s2, s1-s2-s3
					y10, y11 := s4+s5+s6, s5-s6-s7
					r, c := 2*ty, 2*tx
					i := r*g.ow + c
					if r+1 < g.oh && c+1 < g.ow {
						plane[i], plane[i+1], plane[i+g.ow], plane[i+g.ow+1] = y00, y01, y10, y11
						continue
					}
					plane[i] = y00
					if c+1 < g.ow {
						plane[i+1] = y01
					}
					if r+1 < g.oh {
						plane[i+g.ow] = y10
					}
				}
			}
		}
	}
}

// wgGradOutput writes into m (16 matrices co x n tiles, wgStride apart)
// the transformed output gradients A dY A^T of n images of co channels,
// plane (j, o) at dy[j dj + o do:] (g.oh x g.ow; zeros past its last row
// and column).
func wgGradOutput[T Float](g wgGeom, dy []T, n, co, dj, do int, m []T) {
	tt := n * g.tiles()
	ms := wgStride[T](co * tt)
	var mx [16][]T
	for j := range n {
		for o := range co {
			plane := dy[j*dj+o*do:][:g.oh*g.ow]
			col := o*tt + j*g.tiles()
			for xi := range mx {
				mx[xi] = m[xi*ms+col:][:g.tiles()]
			}
			for ty := range g.th {
				r := 2 * ty
				for tx := range g.tw {
					c := 2 * tx
					i := r*g.ow + c
					var y00, y01, y10, y11 T
					if r+1 < g.oh && c+1 < g.ow {
						y00, y01, y10, y11 = plane[i], plane[i+1], plane[i+g.ow], plane[i+g.ow+1]
					} else {
						y00 = plane[i]
						if c+1 < g.ow {
							y01 = plane[i+1]
						}
						if r+1 < g.oh {
							y10 = plane[i+g.ow]
						}
					}
					// A dY: rows y0, y0 + y1, y0 - y1, -y1; each then times
					// A^T: (a, b) to a, a + b, a - b, -b.
					a1, b1 := y00+y10, y01+y11
					a2, b2 := y00-y10, y01-y11
					p := ty*g.tw + tx
					mx[0][p], mx[1][p], mx[2][p], mx[3][p] = y00, y00+y01, y00-y01, -y01
					mx[4][p], mx[5][p], mx[6][p], mx[7][p] = a1, a1+b1, a1-b1, -b1
					mx[8][p], mx[9][p], mx[10][p], mx[11][p] = a2, a2+b2, a2-b2, -b2
					mx[12][p], mx[13][p], mx[14][p], mx[15][p] = -y10, -y10-y11, y11-y10, y11
				}
			}
		}
	}
}

// wgConv convolves n images (ci channels, plane (j, c) at src[j sj + c
// sc:]) with the transformed filter u (wgFilter's) into dst (plane
// (j, o) at dst[j dj + o do:]), through the workspaces v, m and pad.
func wgConv[T Float](g wgGeom, u []T, co, ci int, src []T, n, sj, sc int, dst []T, dj, do int, v, m, pad []T) {
	tt := n * g.tiles()
	vs, ms, us := wgStride[T](ci*tt), wgStride[T](co*tt), wgStride[T](co*ci)
	wgInput(g, src, n, ci, sj, sc, v, pad)
	for xi := range 16 {
		linalg.Gemm(false, false, co, tt, ci, 1, u[xi*us:], ci, v[xi*vs:], tt, 0, m[xi*ms:], tt)
	}
	wgOutput(g, m, n, co, dst, dj, do)
}

// wgFilterProducts accumulates into du (16 matrices f x c, wgStride apart;
// or sets where beta is 0) the products of n images' transformed output
// gradients m (16 x f x n tiles) with their transformed input tiles v
// (16 x c x n tiles).
func wgFilterProducts[T Float](g wgGeom, m, v []T, n, f, c int, beta T, du []T) {
	tt := n * g.tiles()
	vs, ms, ds := wgStride[T](c*tt), wgStride[T](f*tt), wgStride[T](f*c)
	for xi := range 16 {
		linalg.Gemm(false, true, f, c, tt, 1, m[xi*ms:], tt, v[xi*vs:], tt, beta, du[xi*ds:], c)
	}
}

// wgSetup is what the Winograd paths of a convolution's kernels share: the
// split over threads with chunks of nb images, and each thread's
// workspaces for the transformed tiles (v, of the inputs; m, of the
// products or output gradients) and, where tmp > 0, for a chunk's output
// or output gradient planes, image by image; and pad, for a padded plane.
type wgSetup[T Float] struct {
	s             convSplit
	v, m, tp, pad [][]T
}

func newWgSetup[T Float](p *Pool, g ConvGeom, f, chunk int, wg wgGeom, ci, co, tmp int) wgSetup[T] {
	s := newConvSplit(p, g, chunk)
	s.nb = wgImages(s, g.B, 16*(ci+co)*wg.tiles(), chunk)
	tt := s.nb * wg.tiles()
	t := wgSetup[T]{s: s, v: workspaces[T](s.parts, 16*wgStride[T](ci*tt)), m: workspaces[T](s.parts, 16*wgStride[T](co*tt))}
	if tmp > 0 {
		t.tp = workspaces[T](s.parts, tmp*s.nb)
	}
	t.pad = workspaces[T](s.parts, wg.padSize())
	return t
}

// wgFilterSums returns each thread's sum of the transformed filter's
// gradient, and a Func that adds them and transforms the total into dw.
func wgFilterSums[T Float](parts, f, c int, dw []T) ([][]T, func()) {
	sums := workspaces[T](parts, 16*wgStride[T](f*c))
	return sums, func() {
		for _, part := range sums[1:] {
			for i, v := range part {
				sums[0][i] += v
			}
		}
		wgFilterGrad(sums[0], f, c, dw)
	}
}

func convWinogradHost[T Float](p *Pool, k Conv) Func {
	g, f := k.Geom, k.F
	in, pp, _ := g.sizes()
	x, w, y := hostData[T](k.X)[:in], hostData[T](k.W)[:f*g.Patch()], hostData[T](k.Y)[:g.B*f*pp]
	wg, hw := wgForward(g), g.H*g.W
	t := newWgSetup[T](p, g, f, k.Chunk, wg, g.C, f, 0)
	u := make([]T, 16*wgStride[T](f*g.C))
	run := t.s.run(p, g.B, func(q, b0, n int) {
		wgConv(wg, u, f, g.C, x[b0*g.C*hw:], n, g.C*hw, hw, y[b0*f*pp:], f*pp, pp, t.v[q], t.m[q], t.pad[q])
	}, nil)
	return func() error {
		wgFilter(w, f, g.C, false, u)
		return run()
	}
}

func convGradInputWinogradHost[T Float](p *Pool, k ConvGradInput) Func {
	g, f := k.Geom, k.F
	in, pp, _ := g.sizes()
	dy, w, dx := hostData[T](k.DY)[:g.B*f*pp], hostData[T](k.W)[:f*g.Patch()], hostData[T](k.DX)[:in]
	wg, hw := wgBackward(g), g.H*g.W
	t := newWgSetup[T](p, g, f, k.Chunk, wg, f, g.C, 0)
	u := make([]T, 16*wgStride[T](f*g.C))
	run := t.s.run(p, g.B, func(q, b0, n int) {
		wgConv(wg, u, g.C, f, dy[b0*f*pp:], n, f*pp, pp, dx[b0*g.C*hw:], g.C*hw, hw, t.v[q], t.m[q], t.pad[q])
	}, nil)
	return func() error {
		wgFilter(w, f, g.C, true, u)
		return run()
	}
}

func convGradFilterWinogradHost[T Float](p *Pool, k ConvGradFilter) Func {
	g, f := k.Geom, k.F
	in, pp, _ := g.sizes()
	x, dy, dw := hostData[T](k.X)[:in], hostData[T](k.DY)[:g.B*f*pp], hostData[T](k.DW)[:f*g.Patch()]
	wg, hw := wgForward(g), g.H*g.W
	t := newWgSetup[T](p, g, f, k.Chunk, wg, g.C, f, 0)
	sums, after := wgFilterSums(t.s.parts, f, g.C, dw)
	return t.s.run(p, g.B, func(q, b0, n int) {
		wgInput(wg, x[b0*g.C*hw:], n, g.C, g.C*hw, hw, t.v[q], t.pad[q])
		wgGradOutput(wg, dy[b0*f*pp:], n, f, f*pp, pp, t.m[q])
		wgFilterProducts(wg, t.m[q], t.v[q], n, f, g.C, sumBeta[T](t.s, q, b0, g.B), sums[q])
	}, after)
}

func convPoolWinogradHost[T Float](p *Pool, k ConvPool, e *convPoolEpilogue[T]) Func {
	g, f := k.Geom, k.F
	in, pp, _ := g.sizes()
	x, w := hostData[T](k.X)[:in], hostData[T](k.W)[:f*g.Patch()]
	wg, hw := wgForward(g), g.H*g.W
	t := newWgSetup[T](p, g, f, k.Chunk, wg, g.C, f, f*pp)
	u := make([]T, 16*wgStride[T](f*g.C))
	run := t.s.run(p, g.B, func(q, b0, n int) {
		wgConv(wg, u, f, g.C, x[b0*g.C*hw:], n, g.C*hw, hw, t.tp[q], f*pp, pp, t.v[q], t.m[q], t.pad[q])
		for j := range n {
			e.image(b0+j, t.tp[q][j*f*pp:], pp)
		}
	}, nil)
	return func() error {
		wgFilter(w, f, g.C, false, u)
		return run()
	}
}

func convPoolGradInputWinogradHost[T Float](p *Pool, k ConvPoolGradInput, rt poolRouter[T]) Func {
	g, f := k.Geom, k.F
	in, pp, _ := g.sizes()
	w, dx := hostData[T](k.W)[:f*g.Patch()], hostData[T](k.DX)[:in]
	wg, hw := wgBackward(g), g.H*g.W
	t := newWgSetup[T](p, g, f, k.Chunk, wg, f, g.C, f*pp)
	u := make([]T, 16*wgStride[T](f*g.C))
	run := t.s.run(p, g.B, func(q, b0, n int) {
		for j := range n {
			rt.image(b0+j, t.tp[q], pp, j*f*pp)
		}
		wgConv(wg, u, g.C, f, t.tp[q], n, f*pp, pp, dx[b0*g.C*hw:], g.C*hw, hw, t.v[q], t.m[q], t.pad[q])
	}, nil)
	return func() error {
		wgFilter(w, f, g.C, true, u)
		return run()
	}
}

func convPoolGradFilterWinogradHost[T Float](p *Pool, k ConvPoolGradFilter, rt poolRouter[T]) Func {
	g, f := k.Geom, k.F
	in, pp, _ := g.sizes()
	x, dw := hostData[T](k.X)[:in], hostData[T](k.DW)[:f*g.Patch()]
	wg, hw := wgForward(g), g.H*g.W
	t := newWgSetup[T](p, g, f, k.Chunk, wg, g.C, f, f*pp)
	sums, after := wgFilterSums(t.s.parts, f, g.C, dw)
	return t.s.run(p, g.B, func(q, b0, n int) {
		for j := range n {
			rt.image(b0+j, t.tp[q], pp, j*f*pp)
		}
		wgInput(wg, x[b0*g.C*hw:], n, g.C, g.C*hw, hw, t.v[q], t.pad[q])
		wgGradOutput(wg, t.tp[q], n, f, f*pp, pp, t.m[q])
		wgFilterProducts(wg, t.m[q], t.v[q], n, f, g.C, sumBeta[T](t.s, q, b0, g.B), sums[q])
	}, after)
}
