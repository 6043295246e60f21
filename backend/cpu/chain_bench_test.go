package cpu_test

import (
	"fmt"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// BenchmarkChain times an LSTM cell's gate, sigmoid(a + b + bias) * tanh(c),
// as one Chain and as its four Map and Zip kernels, at a recurrent cell's
// width and at a large layer's:
//
//	go test ./backend/cpu -run '^$' -bench Chain
func BenchmarkChain(b *testing.B) {
	for _, n := range []int{100, 1 << 20} {
		be := cpu.New(cpu.Options{})
		defer be.Close()
		buf := func() backend.Operand { return backend.At(load(b, be, make([]float32, n)), 0) }
		x, y, bias, c, t1, t2, t3, t4, out := buf(), buf(), buf(), buf(), buf(), buf(), buf(), buf(), buf()
		ch := backend.Chain{N: n, In0: x, In1: y, In2: bias, In3: c, Dst: out}
		ch.Steps.Len = 5
		ch.Steps.At[0] = backend.ChainStep{Binary: backend.Add, A: 0, B: 1}
		ch.Steps.At[1] = backend.ChainStep{Binary: backend.Add, A: backend.MaxChainInputs, B: 2}
		ch.Steps.At[2] = backend.ChainStep{Unary: backend.Sigmoid, A: backend.MaxChainInputs + 1}
		ch.Steps.At[3] = backend.ChainStep{Unary: backend.Tanh, A: 3}
		ch.Steps.At[4] = backend.ChainStep{Binary: backend.Mul, A: backend.MaxChainInputs + 2, B: backend.MaxChainInputs + 3}
		apart := []backend.Kernel{
			backend.Zip{Op: backend.Add, N: n, A: x, B: y, Dst: t1},
			backend.Zip{Op: backend.Add, N: n, A: t1, B: bias, Dst: t2},
			backend.Map{Op: backend.Sigmoid, N: n, Src: t2, Dst: t3},
			backend.Map{Op: backend.Tanh, N: n, Src: c, Dst: t4},
			backend.Zip{Op: backend.Mul, N: n, A: t3, B: t4, Dst: out},
		}
		for _, v := range []struct {
			name string
			ks   []backend.Kernel
		}{{"chain", []backend.Kernel{ch}}, {"apart", apart}} {
			fs := make([]backend.Func, len(v.ks))
			for i, k := range v.ks {
				f, err := be.Prepare(k)
				if err != nil {
					b.Fatal(err)
				}
				fs[i] = f
			}
			b.Run(fmt.Sprintf("n%d/%s", n, v.name), func(b *testing.B) {
				for range b.N {
					for _, f := range fs {
						if err := f(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
