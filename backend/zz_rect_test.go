package backend

import (
	"runtime"
	"syscall"
	"fmt"
	"math"
	"testing"
)

func stepBits32(x float32) float32 {
	u := math.Float32bits(x)
	var s uint32
	if u <= 0x7f800000 || u == 0x80000000 {
		s = 1
	}
	return float32(s)
}

func BenchmarkZZRect(b *testing.B) {
	n := 1 << 20
	x := make([]float32, n)
	y := make([]float32, n)
	s := uint32(1)
	for i := range x {
		s = s*1664525 + 1013904223
		x[i] = float32(int32(s>>8)%1000) / 100
	}
	b.Run("branch", func(b *testing.B) {
		for range b.N {
			for i, v := range x {
				y[i] = rectify(v)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
	})
	b.Run("mulstep", func(b *testing.B) {
		for range b.N {
			for i, v := range x {
				y[i] = v * step(v)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
	})
	b.Run("bits", func(b *testing.B) {
		for range b.N {
			for i, v := range x {
				y[i] = v * stepBits32(v)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
	})
}

type hbuf struct{ d []float32 }

func (h hbuf) DType() DType { return Float32 }
func (h hbuf) Len() int     { return len(h.d) }
func (h hbuf) Host() any    { return h.d }

func BenchmarkZZPool(b *testing.B) {
	p := NewPool(1, 0)
	g := PoolGeom{B: 32, C: 32, H: 28, W: 28, KH: 2, KW: 2, StrideH: 2, StrideW: 2, OutH: 14, OutW: 14}
	in, out := g.sizes()
	x, y, dx := make([]float32, in), make([]float32, out), make([]float32, in)
	s := uint32(1)
	for i := range x {
		s = s*1664525 + 1013904223
		x[i] = float32(int32(s>>8)%1000) / 100
	}
	for _, rect := range []bool{false, true} {
		fw, _ := MaxPool{Geom: g, Rectify: rect, X: At(hbuf{x}, 0), Y: At(hbuf{y}, 0)}.Host(p)
		bw, _ := MaxPoolGrad{Geom: g, Rectify: rect, X: At(hbuf{x}, 0), Y: At(hbuf{y}, 0), DY: At(hbuf{y}, 0), DX: At(hbuf{dx}, 0)}.Host(p)
		b.Run(fmt.Sprint("fw", rect), func(b *testing.B) {
			c := threadCPU(b, func() { fw() })
			b.ReportMetric(c/float64(in), "cpu-ns/in")
		})
		b.Run(fmt.Sprint("bw", rect), func(b *testing.B) {
			c := threadCPU(b, func() { bw() })
			b.ReportMetric(c/float64(in), "cpu-ns/in")
		})
	}
}


func threadCPU(b *testing.B, f func()) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 syscall.Rusage
	syscall.Getrusage(1, &r0)
	for range b.N {
		f()
	}
	syscall.Getrusage(1, &r1)
	return float64(r1.Utime.Nano()-r0.Utime.Nano()+r1.Stime.Nano()-r0.Stime.Nano()) / float64(b.N)
}
