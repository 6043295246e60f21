package program

import (
	"fmt"
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
)

// TestChainedElementwise compiles models with and without chained
// elementwise kernels on every test backend (chained on the host too): their losses, outputs and
// gradients agree to the bit, since a Chain rounds each step as its own
// kernel did, and the chained programs launch no more kernels (the
// charRNN at most three quarters as many, logistic regression 60%).
func TestChainedElementwise(t *testing.T) {
	type build struct {
		name   string
		build  func() (*model, error)
		before float64 // the most kernels chained, as a fraction of those unchained
	}
	var builds []build
	for _, sm := range smallModels {
		before := map[string]float64{"charrnn": 0.75, "logreg": 0.6}[sm.name]
		builds = append(builds, build{sm.name, func() (*model, error) { return sm.build(t), nil }, before})
	}
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			builds = append(builds, build{fmt.Sprintf("%s/%v", mc.name, dt), func() (*model, error) { return mc.build(dt) }, 0})
		}
	}
	for bi, be := range testBackends(t) {
		for _, b := range builds {
			t.Run(fmt.Sprintf("%s/backend%d", b.name, bi), func(t *testing.T) {
				ref, got := newSides(t, b.name, b.build, compiled(be, sideConfig{unchained: true}), compiled(be, sideConfig{chainOnHost: true}))
				agree(t, b.name, ref, got, 0, 0)
				kr, kg := ref.(*programSide).prog, got.(*programSide).prog
				chains := 0
				for _, k := range kg.kernels {
					if _, ok := k.(backend.Chain); ok {
						chains++
					}
				}
				t.Logf("%d kernels unchained, %d chained (%d chains)", kr.Kernels(), kg.Kernels(), chains)
				limit := b.before
				if limit == 0 {
					limit = 1
				}
				if f := float64(kg.Kernels()) / float64(kr.Kernels()); f > limit || b.before > 0 && chains == 0 {
					t.Errorf("%d kernels chained, %d unchained (%d chains): want at most %.2f of them", kg.Kernels(), kr.Kernels(), chains, limit)
				}
			})
		}
	}
}

// TestChainHazards runs the chaining phase on kernel lists of its own:
// Map, Map into a temporary becomes one Chain; not where a kernel between
// them writes the first one's input, where the temporary is read twice or
// kept, where it is read at an offset, or where the sizes differ.
func TestChainHazards(t *testing.T) {
	mk := func(n int) *vbuf { return &vbuf{dt: backend.Float64, n: n, def: -1, last: -1} }
	at := func(vb *vbuf, off int) backend.Operand { return backend.Operand{Buf: vb, Off: off} }
	for _, c := range []struct {
		name   string
		build  func(x, tmp, out *vbuf) []backend.Kernel
		keep   bool // tmp resident
		chains bool
	}{
		{"fused", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)}}
		}, false, true},
		{"input written between", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Fill{N: 8, Dst: at(x, 0), Value: 2},
				backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)}}
		}, false, false},
		{"read twice", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)},
				backend.Map{Op: backend.Neg, N: 8, Src: at(tmp, 0), Dst: at(x, 0)}}
		}, false, false},
		{"kept", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)}}
		}, true, false},
		{"at an offset", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 4, Src: at(tmp, 4), Dst: at(out, 0)}}
		}, false, false},
		{"as a scalar", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)},
				backend.Zip{Op: backend.Add, N: 8, A: at(x, 0), B: at(tmp, 0), BScalar: true, Dst: at(out, 0)}}
		}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, tmp, out := mk(8), mk(8), mk(8)
			x.persistent, out.persistent, tmp.persistent = true, true, c.keep
			comp := &compiler{kernels: c.build(x, tmp, out), vbufs: []*vbuf{x, tmp, out}, cfg: Config{chainOnHost: true}}
			n := len(comp.kernels)
			comp.chainElementwise()
			chains := 0
			for _, k := range comp.kernels {
				if _, ok := k.(backend.Chain); ok {
					chains++
				}
			}
			if c.chains != (chains == 1 && len(comp.kernels) == n-1) || !c.chains && len(comp.kernels) != n {
				t.Errorf("%d kernels became %d with %d chains; want chained %v", n, len(comp.kernels), chains, c.chains)
			}
		})
	}
}
