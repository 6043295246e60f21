package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// chainOps lists every unary and binary function.
func chainOps() (unary []backend.UnaryOp, binary []backend.BinaryOp) {
	return backend.UnaryOps(), backend.BinaryOps()
}

// randomChain returns a chain of steps steps over inputs inputs (those in
// scalar one element), drawn from r: each step reads the last result and,
// half the time for a binary step, an input or an earlier result.
func randomChain(r *rand.Rand, steps, inputs int, scalar uint8) backend.Chain {
	unary, binary := chainOps()
	k := backend.Chain{Scalar: scalar}
	k.Steps.Len = steps
	last := uint8(r.IntN(inputs))
	for s := range steps {
		other := uint8(r.IntN(inputs))
		if s > 0 && r.IntN(2) == 0 {
			other = uint8(backend.MaxChainInputs + r.IntN(s))
		}
		st := backend.ChainStep{Unary: unary[r.IntN(len(unary))], A: last}
		if r.IntN(2) == 0 {
			st = backend.ChainStep{Binary: binary[r.IntN(len(binary))], A: last, B: other}
			if r.IntN(2) == 0 {
				st.A, st.B = st.B, st.A
			}
		}
		k.Steps.At[s] = st
		last = uint8(backend.MaxChainInputs + s)
	}
	return k
}

// TestChainMatchesSteps checks that a Chain computes the bits its steps
// compute as one Map or Zip kernel each, a buffer per result: random
// chains over every function, with scalar inputs, in place, over sizes of
// one element to several blocks and parts of a loop, on one and on several
// threads; and that a run allocates nothing.
func TestChainMatchesSteps(t *testing.T) {
	floats(t, testChainMatchesSteps[float32], testChainMatchesSteps[float64])
}

func testChainMatchesSteps[T num](t *testing.T) {
	r := rng(41)
	for c := range 40 {
		n := []int{1, 7, 256, 300, 1000, 4099}[c%6]
		inputs := 1 + r.IntN(backend.MaxChainInputs)
		scalar := uint8(r.IntN(1 << inputs))
		if n > 1 {
			scalar &^= 1 // input 0 is full-size: the in-place cases write it
		}
		k := randomChain(r, 1+r.IntN(backend.MaxChainSteps), inputs, scalar)
		k.N = n
		data := make([][]T, inputs)
		for i := range data {
			v := elementwiseInput[T](uint64(c*10+i), n) // n values, then NaN, infinities, zeros...
			data[i] = v[len(v)-n:]                      // ...which the last n hold
			r.Shuffle(n, func(a, b int) { data[i][a], data[i][b] = data[i][b], data[i][a] })
		}
		inPlace := c%4 == 3
		t.Run(fmt.Sprintf("%d/n%d/inputs%d/steps%d/in-place%v", c, n, inputs, k.Steps.Len, inPlace), func(t *testing.T) {
			onEach(t, func(t *testing.T, be *cpu.Backend) []T {
				want := chainBySteps(t, be, k, data)
				var in [backend.MaxChainInputs]backend.Operand
				for i, d := range data {
					in[i] = backend.At(load(t, be, d), 0)
				}
				ch := k.SetInputs(in)
				ch.Dst = backend.At(load(t, be, make([]T, n)), 0)
				if inPlace {
					ch.Dst = in[0]
				}
				if err := ch.Check(); err != nil {
					t.Fatal(err)
				}
				run(t, be, ch)
				got := read[T](t, be, ch.Dst.Buf)
				sameBits(t, "the chain (against its steps)", want, got)
				if !inPlace {
					allocFree(t, be, []backend.Kernel{ch})
				}
				return got
			})
		})
	}
}

// chainBySteps runs k's steps on data as Map and Zip kernels, a buffer
// each, and returns the last one's values.
func chainBySteps[T num](t *testing.T, be *cpu.Backend, k backend.Chain, data [][]T) []T {
	regs := make([]backend.Buffer, backend.MaxChainInputs+k.Steps.Len)
	for i, d := range data {
		regs[i] = load(t, be, d)
	}
	scalar := func(r uint8) bool { return int(r) < backend.MaxChainInputs && k.Scalar&(1<<r) != 0 }
	for s, st := range k.Steps.At[:k.Steps.Len] {
		out := load(t, be, make([]T, k.N))
		regs[backend.MaxChainInputs+s] = out
		a, b := backend.At(regs[st.A], 0), backend.At(regs[st.B], 0)
		if st.Binary != 0 {
			run(t, be, backend.Zip{Op: st.Binary, N: k.N, A: a, B: b, Dst: backend.At(out, 0), AScalar: scalar(st.A), BScalar: scalar(st.B)})
			continue
		}
		if scalar(st.A) { // Map has no scalar operand: a Zip adding -0 is x itself
			z := load(t, be, []T{T(negZero())})
			run(t, be, backend.Zip{Op: backend.Add, N: k.N, A: a, B: backend.At(z, 0), Dst: backend.At(out, 0), AScalar: true, BScalar: true})
			a = backend.At(out, 0)
		}
		run(t, be, backend.Map{Op: st.Unary, N: k.N, Src: a, Dst: backend.At(out, 0)})
	}
	return read[T](t, be, regs[backend.MaxChainInputs+k.Steps.Len-1])
}

func negZero() float64 { z := 0.0; return -z }

// TestChainRefuses checks that Check refuses chains a kernel cannot run:
// no steps, a step of no function or two, a register read before it is
// set or of an input without a buffer, sizes that do not fit, and a
// destination that overlaps an input other than in place.
func TestChainRefuses(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	buf := func(n int) backend.Operand { return backend.At(load(t, be, make([]float64, n)), 0) }
	a, b, d := buf(10), buf(10), buf(10)
	one := func(st ...backend.ChainStep) backend.Chain {
		k := backend.Chain{N: 10, In0: a, In1: b, Dst: d}
		k.Steps.Len = copy(k.Steps.At[:], st)
		return k
	}
	add := backend.ChainStep{Binary: backend.Add, A: 0, B: 1}
	shifted := one(add)
	shifted.Dst = backend.At(a.Buf, 1)
	shifted.In0 = backend.At(load(t, be, make([]float64, 11)), 0)
	shifted.Dst = backend.At(shifted.In0.Buf, 1)
	scalarInDst := one(add)
	scalarInDst.Scalar, scalarInDst.In1 = 2, backend.At(d.Buf, 4)
	short := one(add)
	short.In1 = backend.At(load(t, be, make([]float64, 9)), 0)
	f32 := one(add)
	f32.In1 = backend.At(load(t, be, make([]float32, 10)), 0)
	for _, c := range []struct {
		k    backend.Chain
		want string
	}{
		{one(), "0 steps"},
		{one(backend.ChainStep{A: 0}), "one known function"},
		{one(backend.ChainStep{Unary: backend.Exp, Binary: backend.Add}), "one known function"},
		{one(backend.ChainStep{Unary: 250}), "one known function"},
		{one(backend.ChainStep{Unary: backend.Exp, A: backend.MaxChainInputs}), "holds nothing yet"},
		{one(backend.ChainStep{Unary: backend.Exp, A: 2}), "holds nothing yet"},
		{one(backend.ChainStep{Unary: backend.Exp}, backend.ChainStep{Unary: backend.Exp, A: backend.MaxChainInputs + 1}), "holds nothing yet"},
		{short, "chain input 1"},
		{f32, "chain input 1"},
		{shifted, "overlaps the destination"},
		{scalarInDst, "overlaps the destination"},
	} {
		err := c.k.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error saying %q", c.k.Steps, err, c.want)
		}
	}
	inPlace := one(add)
	inPlace.Dst = a
	if err := inPlace.Check(); err != nil {
		t.Errorf("in place: %v", err)
	}
}
