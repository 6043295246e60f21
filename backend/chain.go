package backend

import (
	"fmt"
	"strings"
)

var _ defined = Chain{}

// ChainStep is one function of a Chain: Unary of register A, or Binary of
// registers A and B; exactly one of Unary and Binary is set. Registers 0 to
// MaxChainInputs-1 hold the inputs' elements, and register
// MaxChainInputs+s the result of step s.
type ChainStep struct {
	Unary  UnaryOp
	Binary BinaryOp
	A, B   uint8
}

// String writes the step as a call: add(r0,r8).
func (s ChainStep) String() string {
	if s.Binary != 0 {
		return fmt.Sprintf("%v(r%d,r%d)", s.Binary, s.A, s.B)
	}
	return fmt.Sprintf("%v(r%d)", s.Unary, s.A)
}

// ChainSteps are the steps of a Chain, in order: the first Len of At.
type ChainSteps struct {
	Len int
	At  [MaxChainSteps]ChainStep
}

// String lists the steps.
func (s ChainSteps) String() string {
	parts := make([]string, 0, s.Len)
	for _, st := range s.At[:max(0, min(s.Len, MaxChainSteps))] {
		parts = append(parts, st.String())
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Chain is Dst[i] = the result of the last of Steps, applied in turn to
// element i of the inputs In0 to In7, for N elements: elementwise functions
// fused into one kernel. Each step's result is rounded to the element type,
// as Map's and Zip's are, so a chain computes the bits that its steps
// compute as one kernel each. An input whose bit is set in Scalar is one
// element, used for every i; an input no step reads has no buffer. Dst may
// be an input read at its own offset (in place), not one read as a scalar.
type Chain struct {
	N      int
	Steps  ChainSteps
	Scalar uint8

	In0, In1, In2, In3, In4, In5, In6, In7 Operand
	Dst                                    Operand
}

// Inputs returns In0 to In7.
func (k Chain) Inputs() [MaxChainInputs]Operand {
	return [MaxChainInputs]Operand{k.In0, k.In1, k.In2, k.In3, k.In4, k.In5, k.In6, k.In7}
}

// SetInputs returns k with inputs in.
func (k Chain) SetInputs(in [MaxChainInputs]Operand) Chain {
	k.In0, k.In1, k.In2, k.In3, k.In4, k.In5, k.In6, k.In7 = in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]
	return k
}

// Check checks the steps and the operands.
func (k Chain) Check() error {
	if k.Steps.Len < 1 || k.Steps.Len > MaxChainSteps {
		return fmt.Errorf("backend: chain: %d steps, want 1 to %d", k.Steps.Len, MaxChainSteps)
	}
	in := k.Inputs()
	read, err := k.checkSteps(in)
	if err != nil {
		return err
	}
	dt := DTypeOf(k.Dst)
	if err := checkFloatDst(k, k.Dst); err != nil {
		return err
	}
	if err := CheckOperand("chain destination", k.Dst, dt, k.N); err != nil {
		return err
	}
	for r, op := range in {
		if read&(1<<r) == 0 {
			continue
		}
		scalar := k.Scalar&(1<<r) != 0
		n := k.N
		if scalar {
			n = 1
		}
		if err := CheckOperand(fmt.Sprintf("chain input %d", r), op, dt, n); err != nil {
			return err
		}
		// A device's threads read each input element while others write
		// the destination: an input inside the destination must be read
		// where it is written (in place), and never as a scalar.
		if k.N > 1 && sameBuffer(op.Buf, k.Dst.Buf) && op.Off < k.Dst.Off+k.N && k.Dst.Off < op.Off+n && (scalar || op.Off != k.Dst.Off) {
			return fmt.Errorf("backend: chain: input %d (elements %d to %d) overlaps the destination (%d to %d) other than in place", r, op.Off, op.Off+n, k.Dst.Off, k.Dst.Off+k.N)
		}
	}
	return nil
}

// checkSteps checks that each step has one valid function of registers
// already set, and returns the inputs the steps read, a bit each.
func (k Chain) checkSteps(in [MaxChainInputs]Operand) (read uint, err error) {
	for s, st := range k.Steps.At[:k.Steps.Len] {
		regs := []uint8{st.A}
		switch {
		case st.Binary != 0 && st.Unary == 0 && st.Binary.valid():
			regs = append(regs, st.B)
		case st.Unary != 0 && st.Binary == 0 && st.Unary.valid():
		default:
			return 0, fmt.Errorf("backend: chain: step %d (%v) needs one known function", s, st)
		}
		for _, r := range regs {
			switch {
			case int(r) < MaxChainInputs && in[r].Buf != nil:
				read |= 1 << r
			case int(r) >= MaxChainInputs && int(r) < MaxChainInputs+s:
			default:
				return 0, fmt.Errorf("backend: chain: step %d (%v) reads register %d, which holds nothing yet", s, st, r)
			}
		}
	}
	return read, nil
}

// Host runs the steps on blocks of elements, each step a loop over the
// block as Map's and Zip's are.
func (k Chain) Host(p *Pool) (Func, error) {
	return onFloats(p, k, chainHost[float32], chainHost[float64])
}

// Device launches on_chain, whose steps are unary() and binary() in
// kernels.cu.
func (k Chain) Device(p Planner) {
	a := chainArgs{N: k.N, Steps: k.Steps.Len, Scalars: int(k.Scalar), In: k.Inputs(), Dst: k.Dst}
	for s, st := range k.Steps.At {
		a.Code[s] = chainCode(st)
	}
	elementwise(p, "on_chain", k.N, a)
}

// chainCode packs a step into the int on_chain reads: the binary function
// (0 for a unary step), the unary one, and registers A and B, a byte each
// from the lowest.
func chainCode(s ChainStep) int {
	return int(s.Binary) | int(s.Unary)<<8 | int(s.A)<<16 | int(s.B)<<24
}

// chainBlock is the elements a host chain computes a step of at a time.
const chainBlock = 256

func chainHost[T Float](p *Pool, k Chain) Func {
	var c hostChain[T]
	c.scalar = k.Scalar
	for r, op := range k.Inputs() {
		if op.Buf != nil {
			c.ins[r] = hostData[T](op)
		}
	}
	c.steps = k.Steps.At[:k.Steps.Len]
	cost := 0
	for s, st := range c.steps {
		if st.Binary != 0 {
			c.bin[s], cost = in[func(x, y T) T](binaries[st.Binary]), cost+binaries[st.Binary].cost
		} else {
			c.un[s], cost = in[func(T) T](unaries[st.Unary]), cost+unaries[st.Unary].cost
		}
	}
	dst := hostData[T](k.Dst)[:k.N]
	// Each part of the loop has registers in the pool's workspace: a block
	// per step, and a block of each scalar input's value, filled at every
	// run.
	block := min(k.N, chainBlock)
	size := (len(c.steps) + MaxChainInputs) * block
	reserve[T](p, size)
	var sp *splitter
	sp = p.split(k.N, cost, func(lo, hi int) {
		w := scratch[T](p, part(sp, lo))[:size]
		regs, scal := w[:len(c.steps)*block], w[len(c.steps)*block:]
		fill := min(hi-lo, block)
		for r, v := range c.ins {
			if c.scalar&(1<<r) != 0 {
				b := scal[r*block : r*block+fill]
				for i := range b {
					b[i] = v[0]
				}
			}
		}
		for b := lo; b < hi; b += block {
			c.block(dst[b:min(b+block, hi)], b, block, regs, scal)
		}
	})
	return sp.loop()
}

// hostChain is a Chain's host instance: its inputs, and each step's
// function in the element type.
type hostChain[T Float] struct {
	ins    [MaxChainInputs][]T
	scalar uint8
	steps  []ChainStep
	un     [MaxChainSteps]func(T) T
	bin    [MaxChainSteps]func(x, y T) T
}

// block computes elements off to off+len(d) of the chain into d, its
// steps' results in regs and its scalar inputs' blocks in scal, each
// register stride elements.
func (c *hostChain[T]) block(d []T, off, stride int, regs, scal []T) {
	last := len(c.steps) - 1
	for s, st := range c.steps {
		out := d
		if s < last {
			out = regs[s*stride : s*stride+len(d)]
		}
		a := c.reg(st.A, off, len(d), stride, regs, scal)
		if st.Binary != 0 {
			zipRange(st.Binary, c.bin[s], out, a, c.reg(st.B, off, len(d), stride, regs, scal), false, false)
			continue
		}
		f := c.un[s]
		for i, x := range a {
			out[i] = f(x)
		}
	}
}

// reg returns the n values of register r for the block at off, the
// registers stride apart in regs and scal.
func (c *hostChain[T]) reg(r uint8, off, n, stride int, regs, scal []T) []T {
	switch {
	case int(r) >= MaxChainInputs:
		s := int(r) - MaxChainInputs
		return regs[s*stride : s*stride+n]
	case c.scalar&(1<<r) != 0:
		return scal[int(r)*stride : int(r)*stride+n]
	}
	return c.ins[r][off : off+n]
}
