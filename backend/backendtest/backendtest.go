// Package backendtest checks a backend's kernels against the CPU backend:
// every kernel type of package backend, in float32 and float64, over odd
// shapes, from the same inputs on both.
package backendtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// Tolerance is how far an output may stray from the CPU backend's, relative
// to the largest magnitude of the CPU backend's output (or 1 if that is
// smaller), by element type.
var Tolerance = map[backend.DType]float64{backend.Float32: 1e-5, backend.Float64: 1e-11}

// Compare runs every case on b and on a CPU backend and fails where an
// output differs beyond Tolerance, where an integer output (a flag)
// differs at all, or where a run that fails on one fails not on the other.
func Compare(t *testing.T, b backend.Backend) {
	ref := cpu.New(cpu.Options{Threads: 1})
	t.Cleanup(func() { _ = ref.Close() })
	for _, c := range allCases() {
		t.Run(c.Float.String()+"/"+c.Name, func(t *testing.T) {
			want, werr := run(ref, c)
			got, gerr := run(b, c)
			if c.Fails {
				if werr == nil || gerr == nil {
					t.Fatalf("want both runs to fail: cpu %v, %s %v", werr, b.Name(), gerr)
				}
				return
			}
			if werr != nil {
				t.Fatalf("cpu: %v", werr)
			}
			if gerr != nil {
				t.Fatalf("%s: %v", b.Name(), gerr)
			}
			for i := range want {
				if err := agree(got[i], want[i], Tolerance[c.Float]); err != nil {
					t.Errorf("output %d (buffer %d): %v", i, c.Out[i], err)
				}
			}
		})
	}
}

// Case is one kernel on buffers filled with fixed data.
type Case struct {
	Name string
	// Bufs are the buffers' initial contents: []float64 (stored in the
	// case's float type) or []int32.
	Bufs []any
	// Float is the float type of the float buffers.
	Float backend.DType
	// Kernel is the kernel, its operands on the buffers slot(i) that stand
	// for the case's buffers.
	Kernel backend.Kernel
	// Out are the buffers compared after the run.
	Out []int
	// F64 are the buffers of Float64 whatever Float is (step sizes).
	F64 []int
	// Fails says the run must fail (a bad row index).
	Fails bool
}

// run allocates c's buffers on b, runs its kernel and returns its outputs
// in float64 (int32 outputs converted).
func run(b backend.Backend, c Case) (out [][]float64, err error) {
	bufs := make([]backend.Buffer, len(c.Bufs))
	defer func() {
		for _, buf := range bufs {
			if buf != nil {
				err = errors.Join(err, b.Free(buf))
			}
		}
	}()
	for i, v := range c.Bufs {
		dt, n := backend.Int32, 0
		if f, ok := v.([]float64); ok {
			dt, n = c.Float, len(f)
			if slices.Contains(c.F64, i) {
				dt = backend.Float64
			} else if dt == backend.Float32 {
				v = convert[float32](f)
			}
		} else {
			n = len(v.([]int32))
		}
		if bufs[i], err = b.Alloc(dt, n); err != nil {
			return nil, err
		}
		if err = b.CopyIn(bufs[i], 0, v); err != nil {
			return nil, err
		}
	}
	f, err := b.Prepare(backend.MapOperands(c.Kernel, func(op backend.Operand) backend.Operand {
		if i, ok := op.Buf.(slot); ok {
			op.Buf = bufs[i]
		}
		return op
	}))
	if err != nil {
		return nil, err
	}
	if err := f(); err != nil {
		return nil, err
	}
	if err := b.Sync(); err != nil {
		return nil, err
	}
	for _, i := range c.Out {
		var o []float64
		switch bufs[i].DType() {
		case backend.Float64:
			o, err = copyOut[float64](b, bufs[i])
		case backend.Float32:
			o, err = copyOut[float32](b, bufs[i])
		default:
			o, err = copyOut[int32](b, bufs[i])
		}
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// convert returns v's elements converted to E.
func convert[E float32 | float64 | int32, F float32 | float64 | int32 | int](v []F) []E {
	out := make([]E, len(v))
	for i, x := range v {
		out[i] = E(x)
	}
	return out
}

// copyOut returns the elements of buf, of element type E, in float64.
func copyOut[E float32 | float64 | int32](b backend.Backend, buf backend.Buffer) ([]float64, error) {
	v := make([]E, buf.Len())
	err := b.CopyOut(v, buf, 0)
	return convert[float64](v), err
}

// agree reports the worst element where got strays from want.
func agree(got, want []float64, tol float64) error {
	scale := 1.0
	for _, w := range want {
		if !math.IsInf(w, 0) && !math.IsNaN(w) {
			scale = max(scale, math.Abs(w))
		}
	}
	worst, at := 0.0, -1
	for i, w := range want {
		g := got[i]
		if math.IsNaN(w) || math.IsInf(w, 0) || math.IsNaN(g) || math.IsInf(g, 0) {
			if !(math.IsNaN(w) && math.IsNaN(g)) && g != w {
				return fmt.Errorf("element %d: got %v, want %v", i, g, w)
			}
			continue
		}
		if d := math.Abs(g - w); d > worst {
			worst, at = d, i
		}
	}
	if worst > tol*scale {
		return fmt.Errorf("element %d: got %v, want %v (|difference| %.3g > %.3g)", at, got[at], want[at], worst, tol*scale)
	}
	return nil
}

// gen fills the cases' buffers from one seeded stream.
type gen struct{ r *rand.Rand }

// fill returns n values of f, in order.
func fill(n int, f func() float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = f()
	}
	return v
}

func (g gen) normal(n int, scale float64) []float64 {
	return fill(n, func() float64 { return scale * g.r.NormFloat64() })
}

func (g gen) uniform(n int, lo, hi float64) []float64 {
	return fill(n, func() float64 { return lo + (hi-lo)*g.r.Float64() })
}

// halves returns values on a grid of 1/2, so that comparisons meet ties.
func (g gen) halves(n int) []float64 {
	return fill(n, func() float64 { return float64(g.r.IntN(9)-4) / 2 })
}

func (g gen) perm(n, of int) []int32 { return convert[int32](g.r.Perm(of)[:n]) }

func at(b backend.Buffer) backend.Operand { return backend.At(b, 0) }

// slot stands for buffer i of a case in its kernel.
type slot int

func (slot) DType() backend.DType { return 0 }
func (slot) Len() int             { return 0 }

// Cases returns the cases for float type dt, family by family, all drawn
// in order from one seeded stream.
func Cases(dt backend.DType) []Case {
	g := gen{rand.New(rand.NewPCG(7, uint64(dt)))}
	var cs []Case
	for _, family := range []func(backend.DType, gen) []Case{
		productCases, mapCases, zipCases, reductionCases, softmaxCases, copyCases,
		fillCases, checkProductCases, countCorrectCases, rowCases, qfCases, optimizerCases,
		crossEntropyCases, layerNormCases, attentionCases, biasActCases,
		func(dt backend.DType, _ gen) []Case { return normCases(dt) }, convCases,
		badRowCases, opCases,
	} {
		cs = append(cs, family(dt, g)...)
	}
	for i := range cs {
		cs[i].Name = strings.ReplaceAll(cs[i].Name, " ", "x")
	}
	return cs
}

// caseList collects the cases of one float type.
type caseList struct {
	dt backend.DType
	cs []Case
}

// add appends a case of kernel on buffers bufs, comparing buffers out.
func (l *caseList) add(name string, kernel backend.Kernel, out []int, bufs ...any) {
	l.cs = append(l.cs, Case{Name: name, Bufs: bufs, Float: l.dt, Kernel: kernel, Out: out})
}

// f64 sets the last case's Float64 buffers.
func (l *caseList) f64(bufs ...int) { l.cs[len(l.cs)-1].F64 = bufs }

// productCases are Gemm's cases: every transpose, odd sizes, scaled,
// batched with padding, and an empty inner dimension (C not read when Beta
// is 0).
func productCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {7, 5, 3}, {33, 17, 65}} {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			ra, ca, rb, cb := s.m, s.k, s.k, s.n
			if tr[0] {
				ra, ca = ca, ra
			}
			if tr[1] {
				rb, cb = cb, rb
			}
			for _, ab := range [][2]float64{{1, 0}, {0.5, -2}} {
				const batch = 3
				lda, ldb, ldc := ca+2, cb+1, s.n+3
				sa, sb, sc := ra*lda+5, rb*ldb+1, s.m*ldc+2
				l.add(fmt.Sprintf("gemm/%dx%dx%d/trans%v%v/alpha%v-beta%v", s.m, s.n, s.k, tr[0], tr[1], ab[0], ab[1]),
					backend.Gemm{TransA: tr[0], TransB: tr[1], M: s.m, N: s.n, K: s.k, Alpha: ab[0], Beta: ab[1],
						A: at(slot(0)), B: at(slot(1)), C: at(slot(2)), LDA: lda, LDB: ldb, LDC: ldc,
						Batch: batch, StrideA: sa, StrideB: sb, StrideC: sc}, []int{2}, g.normal(batch*sa, 1), g.normal(batch*sb, 1), g.normal(batch*sc, 1))
			}
		}
	}
	for _, beta := range []float64{0, 2} {
		c := g.normal(12, 1)
		if beta == 0 {
			c = fill(12, math.NaN)
		}
		l.add(fmt.Sprintf("gemm/k0/beta%v", beta),
			backend.Gemm{M: 3, N: 4, K: 0, Alpha: 1, Beta: beta, A: at(slot(0)), B: at(slot(1)), C: at(slot(2)), LDC: 4},
			[]int{2}, g.normal(1, 1), g.normal(1, 1), c)
	}
	return l.cs
}

// mapCases are the elementwise functions of one operand over their
// domains, alone and as a chain's middle step, and one in place.
func mapCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, op := range backend.UnaryOps() {
		x := g.normal(1000, 3)
		switch op {
		case backend.Log, backend.Sqrt, backend.InverseSqrt, backend.Log2:
			x = g.uniform(1000, 0.01, 50)
		case backend.Log1p:
			x = g.uniform(1000, -0.99, 50)
		case backend.Softplus:
			x = g.uniform(1000, -60, 60)
		}
		x[1] = 0 // the first element the kernel reads
		l.add("map/"+op.String(), backend.Map{Op: op, N: 999, Src: backend.At(slot(0), 1), Dst: at(slot(1))}, []int{1}, x, g.normal(1000, 1))
		// The function as a chain's middle step, between a product with
		// a scalar and a sum, in place over the first input.
		ch := backend.Chain{N: 999, In0: backend.At(slot(0), 1), In1: at(slot(1)), In2: at(slot(2)), Scalar: 2, Dst: backend.At(slot(0), 1)}
		ch.Steps.Len = 3
		ch.Steps.At[0] = backend.ChainStep{Binary: backend.Mul, A: 0, B: 1}
		ch.Steps.At[1] = backend.ChainStep{Unary: op, A: backend.MaxChainInputs}
		ch.Steps.At[2] = backend.ChainStep{Binary: backend.Add, A: backend.MaxChainInputs + 1, B: 2}
		l.add("chain/"+op.String(), ch, []int{0}, x, []float64{1}, g.normal(999, 1))
	}
	l.add("map/exp-in-place", backend.Map{Op: backend.Exp, N: 300, Src: at(slot(0)), Dst: at(slot(0))}, []int{0}, g.normal(300, 1))
	return l.cs
}

// zipCases are the elementwise functions of two operands, each either a
// scalar or not, alone and as a chain's last step.
func zipCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, op := range backend.BinaryOps() {
		for _, sc := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			x, y := g.halves(777), g.halves(777)
			if op == backend.Pow {
				x, y = g.uniform(777, 0.1, 3), g.normal(777, 2)
			}
			if op == backend.Max2 || op == backend.Min2 {
				x[5], y[9] = math.NaN(), math.NaN() // NaN wins on either side
			}
			if op == backend.Div || op == backend.GELUGrad {
				x, y = g.normal(777, 2), g.uniform(777, 0.5, 2)
			}
			l.add(fmt.Sprintf("zip/%v/scalars%v%v", op, sc[0], sc[1]),
				backend.Zip{Op: op, N: 777, A: at(slot(0)), B: at(slot(1)), Dst: at(slot(2)), AScalar: sc[0], BScalar: sc[1]},
				[]int{2}, x, y, g.normal(777, 1))
			// The function as a chain's last step, after a negation of
			// its first operand, over more elements than a block's threads.
			ch := backend.Chain{N: 777, In0: at(slot(0)), In1: at(slot(1)), Dst: at(slot(2))}
			for i, s := range sc {
				if s {
					ch.Scalar |= 1 << i
				}
			}
			ch.Steps.Len = 3
			ch.Steps.At[0] = backend.ChainStep{Unary: backend.Neg, A: 0}
			ch.Steps.At[1] = backend.ChainStep{Unary: backend.Neg, A: backend.MaxChainInputs}
			ch.Steps.At[2] = backend.ChainStep{Binary: op, A: backend.MaxChainInputs + 1, B: 1}
			l.add(fmt.Sprintf("chain/%v/scalars%v%v", op, sc[0], sc[1]), ch, []int{2}, x, y, g.normal(777, 1))
		}
	}
	return l.cs
}

// reductionCases are the sums and maxima along an axis.
func reductionCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range [][3]int{{1, 1, 1}, {3, 1000, 1}, {2, 5, 7}, {1, 300, 33}, {4, 1, 9}, {2, 700, 37}, {1, 129, 300}} {
		for _, op := range []backend.ReduceOp{backend.Sum, backend.Max} {
			l.add(fmt.Sprintf("reduce/%d/%v", op, s), backend.Reduce{Op: op, Outer: s[0], Mid: s[1], Inner: s[2], Src: at(slot(0)), Dst: at(slot(1))},
				[]int{1}, g.normal(s[0]*s[1]*s[2], 2), g.normal(s[0]*s[2], 1))
		}
	}
	return l.cs
}

// softmaxCases are softmax's and its gradient's, plain and log, with rows
// (inner 1) of more elements than a block's threads (256), so that the
// per-row kernels' loops over a row go round more than once.
func softmaxCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range [][3]int{{4, 10, 1}, {2, 65, 3}, {1, 1, 1}, {3, 700, 1}, {2, 300, 3}} {
		for _, log := range []bool{false, true} {
			n := s[0] * s[1] * s[2]
			l.add(fmt.Sprintf("softmax/log%v/%v", log, s), backend.Softmax{Log: log, Outer: s[0], Axis: s[1], Inner: s[2], Src: at(slot(0)), Dst: at(slot(1))},
				[]int{1}, g.normal(n, 3), g.normal(n, 1))
			y := g.uniform(n, 0, 1)
			if log {
				y = g.uniform(n, -5, 0)
			}
			l.add(fmt.Sprintf("softmax-grad/log%v/%v", log, s),
				backend.SoftmaxGrad{Log: log, Outer: s[0], Axis: s[1], Inner: s[2], Y: at(slot(0)), DY: at(slot(1)), DX: at(slot(2))},
				[]int{2}, y, g.normal(n, 1), g.normal(n, 1))
		}
	}
	return l.cs
}

// copyCases are the strided copies: a transpose, a permutation of three
// axes, a reversal, a broadcast, an accumulation, an empty axis, a scalar
// and eight axes.
func copyCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	copies := []struct {
		name         string
		shape, ss, d []int
		srcOff, n, m int
		add          bool
	}{
		{"transpose", []int{19, 37}, []int{1, 19}, []int{37, 1}, 0, 703, 703, false},
		{"permute3", []int{5, 3, 4}, []int{1, 20, 5}, []int{12, 4, 1}, 0, 60, 60, false},
		{"reverse", []int{50}, []int{-1}, []int{1}, 49, 50, 50, false},
		{"broadcast", []int{6, 7}, []int{0, 1}, []int{7, 1}, 0, 7, 42, false},
		{"add", []int{6, 7}, []int{1, 6}, []int{7, 1}, 0, 42, 42, true},
		{"empty", []int{3, 0}, []int{1, 1}, []int{1, 1}, 0, 3, 3, false},
		{"scalar", []int{}, []int{}, []int{}, 2, 3, 1, false},
		{"eight-axes", []int{2, 1, 2, 3, 1, 2, 2, 3}, []int{72, 72, 36, 12, 12, 6, 3, 1}, []int{1, 2, 2, 4, 12, 12, 24, 48}, 0, 144, 144, false},
	}
	for _, c := range copies {
		l.add("copy/"+c.name,
			backend.Copy{Shape: c.shape, Src: backend.At(slot(0), c.srcOff), Dst: at(slot(1)), SrcStrides: c.ss, DstStrides: c.d, Add: c.add},
			[]int{1}, g.normal(c.n, 1), g.normal(c.m, 1))
	}
	return l.cs
}

// fillCases are the fills, of floats and of int32s, and the finiteness
// flags, with a NaN or an infinity last or no bad value.
func fillCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	l.add("fill/float", backend.Fill{N: 30, Dst: backend.At(slot(0), 2), Value: 2.5}, []int{0}, g.normal(33, 1))
	l.add("fill/int32", backend.Fill{N: 30, Dst: backend.At(slot(0), 2), Value: 7}, []int{0}, make([]int32, 33))
	for _, bad := range []float64{0, math.NaN(), math.Inf(-1)} {
		x := g.normal(5000, 1)
		if bad != 0 {
			x[4999] = bad
		}
		l.add(fmt.Sprintf("check-finite/%v", bad), backend.CheckFinite{N: 5000, Src: at(slot(0)), Flag: backend.At(slot(1), 1)},
			[]int{1}, x, make([]int32, 2))
	}
	l.add("check-finite/int32", backend.CheckFinite{N: 4, Src: at(slot(0)), Flag: at(slot(1))}, []int{1}, []int32{1, 2, 3, 4}, make([]int32, 1))
	return l.cs
}

// checkProductCases are the product bound's: bounded, large, NaN and
// infinite operands, in one block and in many (the outlier in a late one),
// and B alone beyond the bound.
func checkProductCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	big := 1e300
	if dt == backend.Float32 {
		big = 1e19
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"bounded", 0}, {"large", big}, {"nan", math.NaN()}, {"inf", math.Inf(1)}} {
		a, bb := g.normal(16*9, 1), g.normal(16*5, 1)
		if c.v != 0 {
			a[7], bb[3] = c.v, c.v
		}
		l.add("check-product/"+c.name, backend.CheckProduct{RA: 16, CA: 9, CB: 5, A: at(slot(0)), B: at(slot(1)), Flag: at(slot(2))},
			[]int{2}, a, bb, make([]int32, 1))
		// Many blocks, the outlier in a late one.
		a, bb = g.normal(700*9, 1), g.normal(700*5, 1)
		if c.v != 0 {
			a[700*9-20], bb[700*5-3] = c.v, c.v
		}
		l.add("check-product/blocks/"+c.name, backend.CheckProduct{RA: 700, CA: 9, CB: 5, A: at(slot(0)), B: at(slot(1)), Flag: at(slot(2))},
			[]int{2}, a, bb, make([]int32, 1))
	}
	// Only B large, beyond the bound alone: the flag comes from the second
	// word's maximum.
	a, bb := g.normal(700*9, 1), g.normal(700*5, 1)
	bb[1234] = 1e306
	if dt == backend.Float32 {
		bb[1234] = 1e37
	}
	l.add("check-product/blocks/large-b", backend.CheckProduct{RA: 700, CA: 9, CB: 5, A: at(slot(0)), B: at(slot(1)), Flag: at(slot(2))},
		[]int{2}, a, bb, make([]int32, 1))
	return l.cs
}

// countCorrectCases are the correct predictions': scores on a grid of
// halves (ties), NaNs, one-hot targets; more rows than a block's threads.
func countCorrectCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range [][2]int{{1, 1}, {16, 10}, {300, 7}} {
		scores, targets := g.halves(s[0]*s[1]), make([]float64, s[0]*s[1])
		for r := range s[0] {
			targets[r*s[1]+g.r.IntN(s[1])] = 1
		}
		if s[0] > 1 {
			scores[3], scores[s[1]+1] = math.NaN(), math.NaN()
		}
		l.add(fmt.Sprintf("count-correct/%dx%d", s[0], s[1]), backend.CountCorrect{Rows: s[0], Classes: s[1], Scores: at(slot(0)),
			Targets: at(slot(1)), Count: at(slot(2))}, []int{2}, scores, targets, []int32{-5})
	}
	return l.cs
}

// rowCases are the gathers and scatters of rows by index.
func rowCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	l.add("gather-rows", backend.GatherRows{N: 5, Width: 7, Rows: at(slot(0)), Src: at(slot(1)), Dst: at(slot(2))},
		[]int{2}, g.perm(5, 13), g.normal(13*7, 1), g.normal(5*7, 1))
	l.add("scatter-rows", backend.ScatterRows{N: 5, Width: 7, Rows: at(slot(0)), Src: at(slot(1)), Dst: at(slot(2))},
		[]int{2}, g.perm(5, 13), g.normal(5*7, 1), g.normal(13*7, 1))
	return l.cs
}

// qfCases are the Q factor's, of tall and square matrices, with and
// without the Gram path's bound.
func qfCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range [][2]int{{9, 4}, {6, 6}, {70, 33}} {
		for _, bound := range []float64{0, 1e3} {
			x := g.normal(s[0]*s[1], 1)
			if s[0] == s[1] {
				for i := range s[1] {
					x[i*s[1]+i] += 4 // well conditioned, for the Gram path
				}
			}
			l.add(fmt.Sprintf("qf/%dx%d/bound%v", s[0], s[1], bound), backend.QF{M: s[0], N: s[1], A: at(slot(0)), GramBound: bound}, []int{0}, x)
		}
	}
	return l.cs
}

// optimizerCases are the optimizers' steps and the kernels they use:
// scaled sums, the skew step, dropout masks and the symmetric parts.
func optimizerCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, c := range []struct{ mom, decay float64 }{{0, 0}, {0.9, 0}, {0.9, 0.01}} {
		l.add(fmt.Sprintf("sgd-step/momentum%v/decay%v", c.mom, c.decay),
			backend.SGDStep{N: 300, Momentum: c.mom, Decay: c.decay, W: at(slot(0)), G: at(slot(1)), Mom: at(slot(2)), LR: at(slot(3))},
			[]int{0, 2}, g.normal(300, 1), g.normal(300, 1), g.normal(300, 1), []float64{0.05})
		l.f64(3)
	}
	for _, decay := range []float64{0, 0.01} {
		l.add(fmt.Sprintf("adam-step/decay%v", decay),
			backend.AdamStep{N: 300, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decay: decay, W: at(slot(0)), G: at(slot(1)), M: at(slot(2)), V: at(slot(3)), Hyper: at(slot(4))},
			[]int{0, 2, 3}, g.normal(300, 1), g.normal(300, 1), g.normal(300, 0.1), g.uniform(300, 0, 0.1), []float64{1e-3, 3})
		l.f64(4)
	}
	l.add("add-scaled/scale", backend.AddScaled{N: 300, Alpha: -1, X: at(slot(0)), Y: at(slot(1)), Dst: at(slot(0)), Scale: at(slot(2))},
		[]int{0}, g.normal(300, 1), g.normal(300, 1), []float64{0.3})
	l.f64(2)
	l.add("add-scaled/alpha", backend.AddScaled{N: 300, Alpha: 0.9, X: at(slot(0)), Y: at(slot(1)), Dst: at(slot(2))},
		[]int{2}, g.normal(300, 1), g.normal(300, 1), g.normal(300, 1))
	l.add("skew-step", backend.SkewStep{R: 7, B: at(slot(0)), Y: at(slot(1)), LR: at(slot(2))},
		[]int{1}, g.normal(49, 1), g.normal(49, 1), []float64{0.5})
	l.f64(1, 2)
	for _, c := range []struct {
		p    float64
		step float64
	}{{0.1, 0}, {0.5, 7}, {0, 3}} {
		l.add(fmt.Sprintf("dropout-mask/p%v/step%v", c.p, c.step),
			backend.DropoutMask{N: 5000, P: c.p, Seed: 42, Stream: 3, Step: at(slot(1)), Dst: at(slot(0))},
			[]int{0}, g.normal(5000, 1), []float64{c.step})
		l.f64(1)
	}
	l.add("symmetrize", backend.Symmetrize{N: 9, A: at(slot(0))}, []int{0}, g.normal(81, 1))
	l.add("identity-delta", backend.IdentityDelta{R: 7, Y: at(slot(0)), Dst: at(slot(1))}, []int{1}, g.normal(49, 1), g.normal(49, 1))
	l.f64(0)
	return l.cs
}

// crossEntropyCases are the fused softmax cross-entropy's and its
// gradient's, with one-hot and soft targets, rows wider than a block.
func crossEntropyCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range [][2]int{{5, 10}, {3, 700}} {
		rows, classes := s[0], s[1]
		n := rows * classes
		for _, soft := range []bool{false, true} {
			z, tg := g.normal(n, 3), make([]float64, n)
			for i := range rows {
				if soft {
					copy(tg[i*classes:], g.uniform(classes, 0, 0.2))
				} else {
					tg[i*classes+g.r.IntN(classes)] = 1
				}
			}
			l.add(fmt.Sprintf("softmax-cross-entropy/soft%v/%v", soft, s),
				backend.SoftmaxCrossEntropy{Rows: rows, Classes: classes, Z: at(slot(0)), T: at(slot(1)), Loss: at(slot(2))},
				[]int{2}, z, tg, g.normal(1, 1))
			l.add(fmt.Sprintf("softmax-cross-entropy-grad/soft%v/%v", soft, s),
				backend.SoftmaxCrossEntropyGrad{Rows: rows, Classes: classes, Z: at(slot(0)), T: at(slot(1)), G: at(slot(2)), DZ: at(slot(3))},
				[]int{3}, z, tg, []float64{0.7}, g.normal(n, 1))
		}
	}
	return l.cs
}

// layerNormCases are the fused layer normalization's and its gradients',
// of rows away from zero mean.
func layerNormCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range [][2]int{{6, 300}, {3, 7}, {300, 37}} {
		rows, d := s[0], s[1]
		n := rows * d
		x := g.normal(n, 2)
		for i := range x {
			x[i] += 1.5 // rows away from zero mean
		}
		gamma, beta := g.normal(d, 1), g.normal(d, 1)
		l.add(fmt.Sprintf("layer-norm/%v", s),
			backend.LayerNorm{Rows: rows, D: d, Eps: 1e-5, X: at(slot(0)), Gamma: at(slot(1)), Beta: at(slot(2)), Y: at(slot(3))},
			[]int{3}, x, gamma, beta, g.normal(n, 1))
		l.add(fmt.Sprintf("layer-norm-grad/%v", s),
			backend.LayerNormGrad{Rows: rows, D: d, Eps: 1e-5, X: at(slot(0)), Gamma: at(slot(1)), DY: at(slot(2)), DX: at(slot(3))},
			[]int{3}, x, gamma, g.normal(n, 1), g.normal(n, 1))
		l.add(fmt.Sprintf("layer-norm-param-grad/%v", s),
			backend.LayerNormParamGrad{Rows: rows, D: d, Eps: 1e-5, X: at(slot(0)), DY: at(slot(1)), DParams: at(slot(2))},
			[]int{2}, x, g.normal(n, 1), g.normal(2*d, 1))
	}
	return l.cs
}

// attentionCases are the fused attention's and its gradient's.
func attentionCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, s := range [][4]int{{2, 5, 3, 12}, {1, 65, 2, 16}, {1, 300, 2, 8}} {
		seqs, tokens, heads, d := s[0], s[1], s[2], s[3]
		n := seqs * tokens * d
		q, k, v := g.normal(n, 1), g.normal(n, 1), g.normal(n, 1)
		scale := 1 / math.Sqrt(float64(d/heads))
		l.add(fmt.Sprintf("attention/%v", s),
			backend.Attention{Seqs: seqs, Tokens: tokens, Heads: heads, D: d, Scale: scale, Q: at(slot(0)), K: at(slot(1)), V: at(slot(2)), Out: at(slot(3))},
			[]int{3}, q, k, v, g.normal(n, 1))
		l.add(fmt.Sprintf("attention-grad/%v", s),
			backend.AttentionGrad{Seqs: seqs, Tokens: tokens, Heads: heads, D: d, Scale: scale, Q: at(slot(0)), K: at(slot(1)), V: at(slot(2)), DOut: at(slot(3)), DQKV: at(slot(4))},
			[]int{4}, q, k, v, g.normal(n, 1), g.normal(3*n, 1))
	}
	return l.cs
}

// biasActCases are the fused bias and activation's and its gradient's, for
// every activation.
func biasActCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for act := backend.ActIdentity; act <= backend.ActGELU; act++ {
		x, bias := g.normal(9*33, 2), g.normal(33, 1)
		l.add(fmt.Sprintf("bias-act/%d", act), backend.BiasAct{Rows: 9, N: 33, Act: act, X: at(slot(0)), Bias: at(slot(1)), Y: at(slot(2))},
			[]int{2}, x, bias, g.normal(9*33, 1))
		l.add(fmt.Sprintf("bias-act-grad/%d", act),
			backend.BiasActGrad{Rows: 9, N: 33, Act: act, X: at(slot(0)), Bias: at(slot(1)), DY: at(slot(2)), DX: at(slot(3))},
			[]int{3}, x, bias, g.normal(9*33, 1), g.normal(9*33, 1))
	}
	return l.cs
}

// badRowCases are the cases that must fail: a bad row index fails the run
// on every backend, gathering or scattering.
func badRowCases(dt backend.DType, g gen) []Case {
	l := caseList{dt: dt}
	for _, gather := range []bool{true, false} {
		rows := g.perm(5, 13)
		rows[3] = 13
		var k backend.Kernel = backend.GatherRows{N: 5, Width: 7, Rows: at(slot(0)), Src: at(slot(1)), Dst: at(slot(2))}
		if !gather {
			k = backend.ScatterRows{N: 5, Width: 7, Rows: at(slot(0)), Src: at(slot(1)), Dst: at(slot(2))}
		}
		l.add(fmt.Sprintf("rows/out-of-range/gather%v", gather), k, nil, rows, g.normal(13*7, 1), g.normal(13*7, 1))
		l.cs[len(l.cs)-1].Fails = true
	}
	return l.cs
}

// allCases returns the cases in float32 and float64, those that must fail
// last: a device backend keeps reporting a fault once it has met one.
func allCases() []Case {
	var cases []Case
	for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
		cases = append(cases, Cases(dt)...)
	}
	sort.SliceStable(cases, func(i, j int) bool { return !cases[i].Fails && cases[j].Fails })
	return cases
}

// Same runs every case on a and on b, two configurations of backends that
// must compute alike (the CUDA backend's kernels with 32-bit and with
// 64-bit index arithmetic), and fails where an output differs in any bit or
// where a run fails on one and not on the other.
func Same(t *testing.T, a, b backend.Backend) {
	for _, c := range allCases() {
		t.Run(c.Float.String()+"/"+c.Name, func(t *testing.T) {
			x, xerr := run(a, c)
			y, yerr := run(b, c)
			if (xerr == nil) != (yerr == nil) || c.Fails {
				if xerr == nil || yerr == nil {
					t.Fatalf("%s: %v; %s: %v", a.Name(), xerr, b.Name(), yerr)
				}
				return
			}
			for i := range x {
				for j := range x[i] {
					if math.Float64bits(x[i][j]) != math.Float64bits(y[i][j]) {
						t.Fatalf("output %d (buffer %d), element %d: %v and %v", i, c.Out[i], j, x[i][j], y[i][j])
					}
				}
			}
		})
	}
}
