package backend_test

import (
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
)

// TestConvChecks checks the convolution and pooling kernels' Check: exact
// operands pass; an operand one element short fails naming it; a geometry
// whose kernel does not fit, a stride of 0 or a negative chunk fails.
func TestConvChecks(t *testing.T) {
	f := func(n int) backend.Operand { return backend.At(backendtest.Extent(backend.Float32, n), 0) }
	g := backend.ConvGeom{B: 2, C: 3, H: 5, W: 4, KH: 3, KW: 2, PadH: 1, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2}
	oh, ow := g.Out() // 3 x 2
	in, cols, out, w := 2*3*5*4, 2*oh*ow*g.Patch(), 2*7*oh*ow, 7*g.Patch()
	pg := backend.PoolGeom{B: 2, C: 3, H: 5, W: 4, KH: 2, KW: 2, StrideH: 2, StrideW: 2, OutH: 2, OutW: 2}
	pin, pout := 2*3*5*4, 2*3*2*2
	for _, k := range []backend.Kernel{
		backend.Im2col{Geom: g, Src: f(in), Dst: f(cols)},
		backend.Col2im{Geom: g, Src: f(cols), Dst: f(in)},
		backend.Conv{Geom: g, F: 7, X: f(in), W: f(w), Y: f(out)},
		backend.ConvGradInput{Geom: g, F: 7, DY: f(out), W: f(w), DX: f(in)},
		backend.ConvGradFilter{Geom: g, F: 7, X: f(in), DY: f(out), DW: f(w)},
		backend.MaxPool{Geom: pg, X: f(pin), Y: f(pout)},
		backend.MaxPoolGrad{Geom: pg, X: f(pin), Y: f(pout), DY: f(pout), DX: f(pin)},
		backend.AvgPool{Geom: pg, X: f(pin), Y: f(pout)},
		backend.AvgPoolGrad{Geom: pg, DY: f(pout), DX: f(pin)},
	} {
		if err := k.Check(); err != nil {
			t.Errorf("%s: %v", backend.Name(k), err)
		}
		for j := range backend.Operands(k) {
			i := 0
			short := backend.MapOperands(k, func(op backend.Operand) backend.Operand {
				if i++; i-1 == j {
					op.Buf = backendtest.Extent(backend.Float32, op.Buf.Len()-1)
				}
				return op
			})
			if err := short.Check(); err == nil || !strings.Contains(err.Error(), backend.Name(k)+" ") {
				t.Errorf("%s with operand %d one short: %v, want an error naming the kernel and the operand", backend.Name(k), j, err)
			}
		}
	}
	bad := []backend.Kernel{
		backend.Im2col{Geom: backend.ConvGeom{B: 1, C: 1, H: 2, W: 2, KH: 5, KW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, Src: f(4), Dst: f(100)},
		backend.Conv{Geom: backend.ConvGeom{B: 1, C: 1, H: 2, W: 2, KH: 1, KW: 1, StrideW: 1, DilH: 1, DilW: 1}, F: 1, X: f(4), W: f(1), Y: f(4)},
		backend.Conv{Geom: g, F: 7, Chunk: -1, X: f(in), W: f(w), Y: f(out)},
		backend.MaxPool{Geom: backend.PoolGeom{B: 1, C: 1, H: 2, W: 2, KH: 1, KW: 1, StrideH: 1, StrideW: 1, PadH: -1, OutH: 2, OutW: 2}, X: f(4), Y: f(4)},
	}
	for _, k := range bad {
		if err := k.Check(); err == nil {
			t.Errorf("%+v: no error", k)
		}
	}
}
