package cpu_test

import (
	"fmt"
	"math"
	"slices"
	"syscall"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// directConv returns the convolution of images x with filters w (F x C KH KW)
// computed tap by tap in float64, the reference of the convolution
// kernels.
func directConv(g backend.ConvGeom, f int, x, w []float64) []float64 {
	oh, ow := g.Out()
	y := make([]float64, g.B*f*oh*ow)
	for b := range g.B {
		for o := range f {
			for r := range oh {
				for s := range ow {
					var sum float64
					for c := range g.C {
						for i := range g.KH {
							for j := range g.KW {
								h, v := r*g.StrideH-g.PadH+i*g.DilH, s*g.StrideW-g.PadW+j*g.DilW
								if h >= 0 && h < g.H && v >= 0 && v < g.W {
									sum += x[((b*g.C+c)*g.H+h)*g.W+v] * w[((o*g.C+c)*g.KH+i)*g.KW+j]
								}
							}
						}
					}
					y[((b*f+o)*oh+r)*ow+s] = sum
				}
			}
		}
	}
	return y
}

// convGeoms are geometries with asymmetric kernels, paddings, strides and
// dilations, one channel and several, one image and more.
var convGeoms = []backend.ConvGeom{
	{B: 3, C: 2, H: 6, W: 7, KH: 3, KW: 2, PadH: 1, PadW: 2, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2},
	{B: 1, C: 1, H: 9, W: 5, KH: 2, KW: 3, PadH: 0, PadW: 1, StrideH: 1, StrideW: 2, DilH: 3, DilW: 1},
	{B: 5, C: 3, H: 4, W: 4, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
	// Images of at least wideImage (256) outputs, multiplied one by one.
	{B: 3, C: 2, H: 17, W: 16, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
	{B: 2, C: 1, H: 20, W: 30, KH: 2, KW: 3, PadH: 0, PadW: 2, StrideH: 1, StrideW: 2, DilH: 2, DilW: 1},
	// Taps further from the window's edge than the image is wide or high.
	{B: 2, C: 2, H: 2, W: 3, KH: 2, KW: 3, PadH: 3, PadW: 4, StrideH: 1, StrideW: 1, DilH: 6, DilW: 4},
	{B: 2, C: 2, H: 3, W: 3, KH: 1, KW: 2, PadH: 0, PadW: 10, StrideH: 1, StrideW: 1, DilH: 1, DilW: 20},
}

// TestConvKernels checks the fused convolution kernels against the direct
// convolution: Conv is it; ConvGradInput and ConvGradFilter are its
// adjoints (<dy, conv(x, w)> = <gradInput(dy, w), x> = <gradFilter(x, dy), w>
// for every x, w, dy), on one thread and three, with chunks of every size.
func TestConvKernels(t *testing.T) {
	for _, g := range convGeoms {
		oh, ow := g.Out()
		const f = 4
		in, out, fk := g.B*g.C*g.H*g.W, g.B*f*oh*ow, f*g.Patch()
		r := rng(11)
		x, w, dy := uniform[float64](r, in, -1, 1), uniform[float64](r, fk, -1, 1), uniform[float64](r, out, -1, 1)
		want := directConv(g, f, x, w)
		dot := func(a, b []float64) float64 {
			var s float64
			for i := range a {
				s += a[i] * b[i]
			}
			return s
		}
		ydy := dot(want, dy)
		for bi, be := range backends(t) {
			for _, chunk := range []int{0, 1, 2, g.B} {
				name := fmt.Sprintf("%v/%s/chunk%d", g, backendNames[bi], chunk)
				run := func(k backend.Kernel, dst backend.Buffer) []float64 {
					fn, err := be.Prepare(k)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if err := fn(); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					return read[float64](t, be, dst)
				}
				xb, wb, dyb := load(t, be, x), load(t, be, w), load(t, be, dy)
				yb, dxb, dwb := load(t, be, make([]float64, out)), load(t, be, make([]float64, in)), load(t, be, make([]float64, fk))
				y := run(backend.Conv{Geom: g, F: f, Chunk: chunk, X: backend.At(xb, 0), W: backend.At(wb, 0), Y: backend.At(yb, 0)}, yb)
				if d := maxDiff(y, want); d > 1e-13 {
					t.Errorf("%s: conv differs from the direct convolution by %g", name, d)
				}
				dx := run(backend.ConvGradInput{Geom: g, F: f, Chunk: chunk, DY: backend.At(dyb, 0), W: backend.At(wb, 0), DX: backend.At(dxb, 0)}, dxb)
				dw := run(backend.ConvGradFilter{Geom: g, F: f, Chunk: chunk, X: backend.At(xb, 0), DY: backend.At(dyb, 0), DW: backend.At(dwb, 0)}, dwb)
				if a, b := dot(dx, x), dot(dw, w); math.Abs(a-ydy) > 1e-12*max(1, math.Abs(ydy)) || math.Abs(b-ydy) > 1e-12*max(1, math.Abs(ydy)) {
					t.Errorf("%s: <dy, conv(x, w)> = %v, <gradInput, x> = %v, <gradFilter, w> = %v", name, ydy, a, b)
				}
			}
		}
	}
}

// TestIm2colKernels checks Im2col against the direct convolution (its
// columns times the filter) and Col2im as its adjoint.
func TestIm2colKernels(t *testing.T) {
	for _, g := range convGeoms {
		oh, ow := g.Out()
		const f = 3
		in, cols := g.B*g.C*g.H*g.W, g.B*oh*ow*g.Patch()
		r := rng(12)
		x, w, c := uniform[float64](r, in, -1, 1), uniform[float64](r, f*g.Patch(), -1, 1), uniform[float64](r, cols, -1, 1)
		want := directConv(g, f, x, w)
		for bi, be := range backends(t) {
			xb, colb, cb, dxb := load(t, be, x), load(t, be, make([]float64, cols)), load(t, be, c), load(t, be, make([]float64, in))
			for _, k := range []backend.Kernel{backend.Im2col{Geom: g, Src: backend.At(xb, 0), Dst: backend.At(colb, 0)}, backend.Col2im{Geom: g, Src: backend.At(cb, 0), Dst: backend.At(dxb, 0)}} {
				fn, err := be.Prepare(k)
				if err != nil {
					t.Fatal(err)
				}
				if err := fn(); err != nil {
					t.Fatal(err)
				}
			}
			col, dx := read[float64](t, be, colb), read[float64](t, be, dxb)
			kk := g.Patch()
			var worst, dcx, dxx float64
			for b := range g.B {
				for p := range oh * ow {
					for o := range f {
						var s float64
						for k := range kk {
							s += col[(b*oh*ow+p)*kk+k] * w[o*kk+k]
						}
						worst = max(worst, math.Abs(s-want[(b*f+o)*oh*ow+p]))
					}
				}
			}
			for i := range col {
				dcx += col[i] * c[i]
			}
			for i := range x {
				dxx += dx[i] * x[i]
			}
			if worst > 1e-13 || math.Abs(dcx-dxx) > 1e-12*max(1, math.Abs(dcx)) {
				t.Errorf("%v/%s: im2col times the filter differs from the direct convolution by %g; <col2im(c), x> = %v, <c, im2col(x)> = %v", g, backendNames[bi], worst, dxx, dcx)
			}
		}
	}
}

func maxDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// TestConvAllocs checks that running a prepared convolution or pooling
// kernel allocates nothing.
func TestConvAllocs(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 3, Grain: 1})
	defer b.Close()
	r := rng(5)
	f32 := func(n int) backend.Operand { return backend.At(load(t, b, uniform[float32](r, n, -1, 1)), 0) }
	g := convGeoms[0]
	oh, ow := g.Out()
	in, out, cols := g.B*g.C*g.H*g.W, g.B*4*oh*ow, g.B*oh*ow*g.Patch()
	pg := backend.PoolGeom{B: 2, C: 3, H: 5, W: 7, KH: 2, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 2, OutH: 6, OutW: 4}
	pin, pout := 2*3*5*7, 2*3*6*4
	allocFree(t, b, []backend.Kernel{
		backend.Im2col{Geom: g, Src: f32(in), Dst: f32(cols)},
		backend.Col2im{Geom: g, Src: f32(cols), Dst: f32(in)},
		backend.Conv{Geom: g, F: 4, Chunk: 1, X: f32(in), W: f32(4 * g.Patch()), Y: f32(out)},
		backend.ConvGradInput{Geom: g, F: 4, DY: f32(out), W: f32(4 * g.Patch()), DX: f32(in)},
		backend.ConvGradFilter{Geom: g, F: 4, X: f32(in), DY: f32(out), DW: f32(4 * g.Patch())},
		backend.MaxPool{Geom: pg, X: f32(pin), Y: f32(pout)},
		backend.MaxPoolGrad{Geom: pg, X: f32(pin), Y: f32(pout), DY: f32(pout), DX: f32(pin)},
		backend.AvgPool{Geom: pg, X: f32(pin), Y: f32(pout)},
		backend.AvgPoolGrad{Geom: pg, DY: f32(pout), DX: f32(pin)},
	})
}

// BenchmarkConv times the fused convolution kernels at the sizes of
// gorgonia's examples/convnet (batch 32, float32 and float64) on the default
// CPU backend, beside a plain GEMM of the same sizes (F x B OutH OutW x
// C KH KW).
func BenchmarkConv(b *testing.B) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	r := rng(3)
	for _, dt := range []string{"float32", "float64"} {
		op := func(n int) backend.Operand { return uniformOp(b, be, r, dt, n) }
		for _, l := range []struct {
			name string
			g    backend.ConvGeom
			f    int
		}{
			{"conv0", backend.ConvGeom{B: 32, C: 1, H: 28, W: 28, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 32},
			{"conv1", backend.ConvGeom{B: 32, C: 32, H: 14, W: 14, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 64},
			{"conv2", backend.ConvGeom{B: 32, C: 64, H: 7, W: 7, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 128},
		} {
			g, f := l.g, l.f
			oh, ow := g.Out()
			in, out, kk := g.B*g.C*g.H*g.W, g.B*f*oh*ow, g.Patch()
			x, dy, w, dx, dw, y := op(in), op(out), op(f*kk), op(in), op(f*kk), op(out)
			flops := 2 * float64(f*g.B*oh*ow*kk)
			for _, k := range []struct {
				name string
				k    backend.Kernel
			}{
				{"forward", backend.Conv{Geom: g, F: f, X: x, W: w, Y: y}},
				{"grad-input", backend.ConvGradInput{Geom: g, F: f, DY: dy, W: w, DX: dx}},
				{"grad-filter", backend.ConvGradFilter{Geom: g, F: f, X: x, DY: dy, DW: dw}},
				{"gemm", backend.Gemm{M: f, N: g.B * oh * ow, K: kk, Alpha: 1, A: w, B: op(g.B * oh * ow * kk), C: op(out), LDA: kk, LDB: g.B * oh * ow, LDC: g.B * oh * ow}},
			} {
				b.Run(dt+"/"+l.name+"/"+k.name, func(b *testing.B) {
					fn, err := be.Prepare(k.k)
					if err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					for range b.N {
						if err := fn(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkConvPool times a convolution block of gorgonia's examples/convnet
// (3 x 3 convolution, ReLU, 2 x 2 max pooling and dropout 0.2, batch 32)
// forward and backward on the default CPU backend: fused (ConvPool and its
// gradients) beside the separate kernels it replaces (Conv, MaxPool with
// Rectify, Dropout; Dropout, MaxPoolGrad, ConvGradInput, ConvGradFilter),
// float32 and float64, with the process's CPU time per run, which a shared
// machine disturbs less than the time.
func BenchmarkConvPool(b *testing.B) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	r := rng(5)
	for _, dt := range []string{"float32", "float64"} {
		op := func(n int) backend.Operand { return uniformOp(b, be, r, dt, n) }
		for _, l := range []struct {
			name string
			c, h int
			f    int
		}{{"conv0", 1, 28, 32}, {"conv1", 32, 14, 64}, {"conv2", 64, 7, 128}} {
			g := backend.ConvGeom{B: 32, C: l.c, H: l.h, W: l.h, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
			pg := backend.PoolGeom{B: 32, C: l.f, H: l.h, W: l.h, KH: 2, KW: 2, StrideH: 2, StrideW: 2, OutH: l.h / 2, OutW: l.h / 2}
			in, kk := 32*l.c*l.h*l.h, g.Patch()
			conv, pooled := 32*l.f*l.h*l.h, 32*l.f*(l.h/2)*(l.h/2)
			x, w, dx, dw, y, c, dc := op(in), op(l.f*kk), op(in), op(l.f*kk), op(pooled), op(conv), op(conv)
			p, dp, dl := op(pooled), op(pooled), op(pooled)
			arg := backend.At(load(b, be, make([]int32, pooled)), 0)
			step := backend.At(load(b, be, []float64{3}), 0)
			fused := []backend.Kernel{
				backend.ConvPool{Geom: g, F: l.f, Pool: pg, X: x, W: w, Y: y, Arg: arg, DropP: 0.2, Seed: 1, Stream: 2, Step: step},
				backend.ConvPoolGradInput{Geom: g, F: l.f, Pool: pg, DY: dl, Arg: arg, W: w, DX: dx, DropP: 0.2},
				backend.ConvPoolGradFilter{Geom: g, F: l.f, Pool: pg, X: x, DY: dl, Arg: arg, DW: dw, DropP: 0.2},
			}
			separate := []backend.Kernel{
				backend.Conv{Geom: g, F: l.f, X: x, W: w, Y: c},
				backend.MaxPool{Geom: pg, Rectify: true, X: c, Y: p},
				backend.Dropout{N: pooled, P: 0.2, Seed: 1, Stream: 2, X: p, Y: y, Step: step},
				backend.Dropout{N: pooled, P: 0.2, Seed: 1, Stream: 2, X: dl, Y: dp, Step: step},
				backend.MaxPoolGrad{Geom: pg, Rectify: true, X: c, Y: p, DY: dp, DX: dc},
				backend.ConvGradInput{Geom: g, F: l.f, DY: dc, W: w, DX: dx},
				backend.ConvGradFilter{Geom: g, F: l.f, X: x, DY: dc, DW: dw},
			}
			for _, k := range []struct {
				name    string
				kernels []backend.Kernel
			}{{"fused", fused}, {"separate", separate}} {
				if l.c == 1 { // the first layer's images are data: no gradient
					k.kernels = slices.DeleteFunc(slices.Clone(k.kernels), func(k backend.Kernel) bool {
						_, a := k.(backend.ConvPoolGradInput)
						_, b := k.(backend.ConvGradInput)
						return a || b
					})
				}
				b.Run(dt+"/"+l.name+"/"+k.name, func(b *testing.B) {
					var fns []backend.Func
					for _, kern := range k.kernels {
						fn, err := be.Prepare(kern)
						if err != nil {
							b.Fatal(err)
						}
						fns = append(fns, fn)
					}
					b.ResetTimer()
					c0 := cpuTime()
					for range b.N {
						for _, fn := range fns {
							if err := fn(); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e3, "cpu-us/op")
				})
			}
		}
	}
}

// cpuTime returns the process's CPU time (user and system) in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
