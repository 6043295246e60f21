package backend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
)

// hostBuf is a host buffer of float32 or float64 for internal tests.
type hostBuf[T Float] struct{ d []T }

func (b *hostBuf[T]) DType() DType {
	if len(b.d) > 0 {
		if _, ok := any(b.d[0]).(float32); ok {
			return Float32
		}
	}
	return Float64
}
func (b *hostBuf[T]) Len() int  { return len(b.d) }
func (b *hostBuf[T]) Host() any { return b.d }

func randomOp[T Float](r *rand.Rand, n int) Operand {
	v := make([]T, n)
	for i := range v {
		v[i] = T(r.NormFloat64())
	}
	return At(&hostBuf[T]{v}, 0)
}

// winogradCase is a convolution that the CPU runs by Winograd's algorithm.
type winogradCase struct {
	g ConvGeom
	f int
}

var winogradCases = []winogradCase{
	{ConvGeom{B: 3, C: 16, H: 5, W: 7, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 17},
	{ConvGeom{B: 2, C: 17, H: 6, W: 4, KH: 3, KW: 3, PadH: 0, PadW: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 16},
	{ConvGeom{B: 5, C: 16, H: 4, W: 9, KH: 3, KW: 3, PadH: 2, PadW: 0, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 20},
	{ConvGeom{B: 4, C: 32, H: 14, W: 14, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 64},
}

// TestWinogradAgreesWithIm2col checks the CPU's Winograd products of 3 x 3
// convolutions (forward, images' and filter's gradients; odd sides,
// paddings 0 to 2, chunks that do not divide the batch, one thread and
// three) against the im2col ones, float64 within 1e-12 of the largest
// output (and float32, which the kernels run by im2col, within 1e-5).
func TestWinogradAgreesWithIm2col(t *testing.T) {
	for _, threads := range []int{1, 3} {
		p := NewPool(threads, 1)
		defer p.Close()
		for _, c := range winogradCases {
			for _, chunk := range []int{0, 2} {
				t.Run(fmt.Sprintf("%v/f%d/chunk%d/threads%d", c.g, c.f, chunk, threads), func(t *testing.T) {
					if !winograd[float64](c.g, c.f) || winograd[float32](c.g, c.f) {
						t.Fatal("not a Winograd geometry in float64 alone")
					}
					checkWinograd[float64](t, p, c, chunk, 1e-12)
					checkWinograd[float32](t, p, c, chunk, 1e-5)
				})
			}
		}
	}
}

func checkWinograd[T Float](t *testing.T, p *Pool, c winogradCase, chunk int, tol float64) {
	r := rand.New(rand.NewPCG(uint64(c.g.C), uint64(c.f)))
	g, f := c.g, c.f
	in, pp, kk := g.sizes()
	x, w, dy := randomOp[T](r, in), randomOp[T](r, f*kk), randomOp[T](r, g.B*f*pp)
	out := func(n int) [2]Operand { return [2]Operand{randomOp[T](r, n), randomOp[T](r, n)} }
	y, dx, dw := out(g.B*f*pp), out(in), out(f*kk)
	runs := []struct {
		name       string
		wino, im2c Func
		res        [2]Operand
	}{
		{"forward", convWinogradHost[T](p, Conv{Geom: g, F: f, Chunk: chunk, X: x, W: w, Y: y[0]}),
			convDirectHost[T](p, Conv{Geom: g, F: f, Chunk: chunk, X: x, W: w, Y: y[1]}), y},
		{"grad-input", convGradInputWinogradHost[T](p, ConvGradInput{Geom: g, F: f, Chunk: chunk, DY: dy, W: w, DX: dx[0]}),
			convGradInputDirectHost[T](p, ConvGradInput{Geom: g, F: f, Chunk: chunk, DY: dy, W: w, DX: dx[1]}), dx},
		{"grad-filter", convGradFilterWinogradHost[T](p, ConvGradFilter{Geom: g, F: f, Chunk: chunk, X: x, DY: dy, DW: dw[0]}),
			convGradFilterDirectHost[T](p, ConvGradFilter{Geom: g, F: f, Chunk: chunk, X: x, DY: dy, DW: dw[1]}), dw},
	}
	for _, run := range runs {
		for range 2 { // a second run must not accumulate
			if err := run.wino(); err != nil {
				t.Fatal(err)
			}
		}
		if err := run.im2c(); err != nil {
			t.Fatal(err)
		}
		a, b := hostData[T](run.res[0]), hostData[T](run.res[1])
		var d, s float64
		for i := range b {
			d = max(d, math.Abs(float64(a[i]-b[i])))
			s = max(s, math.Abs(float64(b[i])))
		}
		if !(d <= tol*s) {
			t.Errorf("%T %s: Winograd's products differ from im2col's by %.3g of the largest output %.3g", T(0), run.name, d/s, s)
		}
	}
}

// BenchmarkWinograd times the CPU's Winograd products beside its im2col
// ones at the sizes of gorgonia's examples/convnet's second and third
// layers (batch 32, float32 and float64, two threads), with the process's
// CPU time per run, which a shared machine disturbs less than the time.
func BenchmarkWinograd(b *testing.B) {
	benchWinograd[float32](b, "float32")
	benchWinograd[float64](b, "float64")
}

func benchWinograd[T Float](b *testing.B, dt string) {
	p := NewPool(2, 0)
	defer p.Close()
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range []struct{ c, h, f int }{{32, 14, 64}, {64, 7, 128}} {
		g := ConvGeom{B: 32, C: l.c, H: l.h, W: l.h, KH: 3, KW: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
		in, pp, kk := g.sizes()
		x, w, y, dy, dx, dw := randomOp[T](r, in), randomOp[T](r, l.f*kk), randomOp[T](r, 32*l.f*pp),
			randomOp[T](r, 32*l.f*pp), randomOp[T](r, in), randomOp[T](r, l.f*kk)
		fw := Conv{Geom: g, F: l.f, X: x, W: w, Y: y}
		gi := ConvGradInput{Geom: g, F: l.f, DY: dy, W: w, DX: dx}
		gf := ConvGradFilter{Geom: g, F: l.f, X: x, DY: dy, DW: dw}
		for _, k := range []struct {
			name string
			fn   Func
		}{
			{"forward/winograd", convWinogradHost[T](p, fw)}, {"forward/im2col", convDirectHost[T](p, fw)},
			{"grad-input/winograd", convGradInputWinogradHost[T](p, gi)}, {"grad-input/im2col", convGradInputDirectHost[T](p, gi)},
			{"grad-filter/winograd", convGradFilterWinogradHost[T](p, gf)}, {"grad-filter/im2col", convGradFilterDirectHost[T](p, gf)},
		} {
			b.Run(fmt.Sprintf("%s/c%d/%s", dt, l.c, k.name), func(b *testing.B) {
				c0 := cpuTime()
				for range b.N {
					if err := k.fn(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e3, "cpu-us/op")
			})
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
