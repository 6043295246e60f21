package program

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/param"
)

// opCase is a graphCase that the tape machine computes only in some float
// types, or that compiles for the CPU backend only.
type opCase struct {
	graphCase
	dtypes  []tensor.Dtype // nil: float64 and float32
	cpuOnly bool
}

// isCUDA reports whether be is the CUDA backend (on a GPU or its host
// model).
func isCUDA(be backend.Backend) bool { return !strings.HasPrefix(be.Name(), "cpu") }

// runOpCases runs every case as runCases does: against the tape machine,
// on the CPU backend with one and three threads and on the CUDA backend's
// host model (but a cpuOnly case).
func runOpCases(t *testing.T, cases []opCase) {
	for bi, be := range testBackends(t) {
		for _, c := range cases {
			if c.cpuOnly && isCUDA(be) {
				continue
			}
			t.Run(fmt.Sprintf("%s/backend%d", c.name, bi), func(t *testing.T) {
				dts := c.dtypes
				if dts == nil {
					dts = []tensor.Dtype{tensor.Float64, tensor.Float32}
				}
				for _, dt := range dts {
					runCase(t, be, c.graphCase, dt)
				}
			})
		}
	}
}

// opIntConst returns a constant integer tensor of the given shape (a
// vector when shape has one axis).
func opIntConst(g *G.ExprGraph, name string, shape []int, v []int) *G.Node {
	return G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(slices.Clone(v)))))
}

// opBroadcast returns a case of a Broadcast* function of a (3, 5) tensor
// and a (1, 5) one, the second broadcast along axis 0.
func opBroadcast(name string, f func(a, b *G.Node, l, r []byte) (*G.Node, error), positive bool) opCase {
	return opCase{graphCase: graphCase{name: name, shapes: [][]int{{3, 5}, {1, 5}}, positive: positive,
		build: two(func(a, b *G.Node) (*G.Node, error) { return f(a, b, nil, []byte{0}) })}}
}

// opCompare returns a case of a Broadcast* comparison with retSame true
// (0/1 in the operands' type), times its first operand.
func opCompare(name string, f func(a, b *G.Node, retSame bool, l, r []byte) (*G.Node, error)) opCase {
	return opCase{graphCase: graphCase{name: name, shapes: [][]int{{3, 5}, {3, 1}}, constant: []bool{false, true},
		build: two(func(a, b *G.Node) (*G.Node, error) {
			m, err := f(a, b, true, nil, []byte{1})
			if err != nil {
				return nil, err
			}
			return G.HadamardProd(a, m)
		})}}
}

// TestOpLowerings compares the lowerings of Gorgonia's ops beyond those of
// orthonet's models, and the functions that build graphs of other ops,
// with the tape machine: values and gradients, float64 to 1e-10 and
// float32 to 1e-5, on odd shapes, on the CPU backend with one and three
// threads and on the CUDA backend's host model. Where gorgonia v0.9.18's
// tape machine computes a case wrong the case is elsewhere (TestOpsWhere...).
func TestOpLowerings(t *testing.T) {
	unary := func(name string, f func(*G.Node) (*G.Node, error), positive, noGrad bool) opCase {
		return opCase{graphCase: graphCase{name: name, shapes: [][]int{{3, 5}}, build: one(f), positive: positive, noGrad: noGrad}}
	}
	cases := []opCase{
		// The unary functions of api_gen.go that TestLowerings leaves out
		// (Sign, Ceil and Floor have no gradient in gorgonia).
		unary("sign", G.Sign, false, true),
		unary("ceil", G.Ceil, false, true),
		unary("floor", G.Floor, false, true),
		unary("sin", G.Sin, false, false),
		unary("cos", G.Cos, false, false),
		unary("expm1", G.Expm1, false, false),
		// Log2's and InverseSqrt's gradients are gorgonia's, wrong
		// (TestOpsWrongGradients); the program runs the same graph.
		unary("log2", G.Log2, true, false),
		unary("inverse-sqrt", G.InverseSqrt, true, false),
		// Every Broadcast* function.
		opBroadcast("broadcast-add", G.BroadcastAdd, false),
		opBroadcast("broadcast-sub", G.BroadcastSub, false),
		opBroadcast("broadcast-hadamard-prod", G.BroadcastHadamardProd, false),
		opBroadcast("broadcast-hadamard-div", G.BroadcastHadamardDiv, true),
		opBroadcast("broadcast-pow", G.BroadcastPow, true),
		opCompare("broadcast-lt", G.BroadcastLt),
		opCompare("broadcast-gt", G.BroadcastGt),
		opCompare("broadcast-lte", G.BroadcastLte),
		opCompare("broadcast-gte", G.BroadcastGte),
		opCompare("broadcast-eq", G.BroadcastEq),
		opCompare("broadcast-ne", G.BroadcastNe),
		// Functions built from other ops.
		{graphCase: graphCase{name: "min-between", shapes: [][]int{{3, 5}, {3, 5}}, build: two(G.MinBetween)}},
		{graphCase: graphCase{name: "max-between", shapes: [][]int{{2, 3, 4}, {2, 3, 4}}, build: two(G.MaxBetween)}},
		{graphCase: graphCase{name: "norm-2", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Norm(a, 1, 2) })}},
		{graphCase: graphCase{name: "norm-3", shapes: [][]int{{4, 3}}, positive: true, build: one(func(a *G.Node) (*G.Node, error) { return G.Norm(a, 0, 3) })}},
		// LogSumExp builds a graph only for vectors, and computes
		// log(sum(exp(a - max)) + max) (TestOpsLogSumExp).
		{graphCase: graphCase{name: "log-sum-exp", shapes: [][]int{{7}}, build: one(func(a *G.Node) (*G.Node, error) { return G.LogSumExp(a, 0) })}},
		{graphCase: graphCase{name: "mish", shapes: [][]int{{3, 5}}, build: one(G.Mish)}},
		{graphCase: graphCase{name: "leaky-relu", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) { return G.LeakyRelu(a, 0.15) })}},
		{graphCase: graphCase{name: "binary-xent", shapes: [][]int{{3, 5}, {3, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) {
			return G.BinaryXent(G.Must(G.Sigmoid(a)), G.Must(G.Sigmoid(b)))
		})}},
		// (The tape machine gets the gradient wrong where a node and its
		// tanh are both raveled: TestOpsTapeMachineWrong.)
		{graphCase: graphCase{name: "ravel", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.Ravel(G.Must(G.Tanh(a)))
		})}},
		{graphCase: graphCase{name: "reduce-add", shapes: [][]int{{3, 5}, {3, 5}, {3, 5}}, build: func(l []*G.Node) (*G.Node, error) { return G.ReduceAdd(l) }}},
		{graphCase: graphCase{name: "reduce-mul-matrices", shapes: [][]int{{3, 4}, {4, 4}, {4, 2}}, build: func(l []*G.Node) (*G.Node, error) { return G.ReduceMul(l) }}},
		{graphCase: graphCase{name: "reduce-mul-scalars", shapes: [][]int{{}, {}, {}}, build: func(l []*G.Node) (*G.Node, error) { return G.ReduceMul(l) }}},
		{graphCase: graphCase{name: "mean-0-2", shapes: [][]int{{2, 3, 4}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Mean(a, 0, 2) })}},
		{graphCase: graphCase{name: "div-scalar", shapes: [][]int{{3, 5}, {}}, positive: true, build: two(G.Div)}},
		{graphCase: graphCase{name: "div-same", shapes: [][]int{{3, 5}, {3, 5}}, positive: true, build: two(G.Div)}},
		{graphCase: graphCase{name: "unconcat", shapes: [][]int{{2, 6}}, build: one(func(a *G.Node) (*G.Node, error) {
			p, err := G.Unconcat(a, 1, 3)
			if err != nil {
				return nil, err
			}
			return G.Add(G.Must(G.HadamardProd(p[0], p[1])), p[2])
		})}},
		// Tensordot: the contracted axes in and out of order, a full
		// contraction, a vector.
		{graphCase: graphCase{name: "tensordot-2-1", shapes: [][]int{{2, 3, 4}, {4, 2, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) {
			return G.Tensordot([]int{0, 2}, []int{1, 0}, a, b)
		})}},
		{graphCase: graphCase{name: "tensordot-matmul", shapes: [][]int{{3, 4}, {4, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) {
			return G.Tensordot([]int{1}, []int{0}, a, b)
		})}},
		{graphCase: graphCase{name: "tensordot-first-axes", shapes: [][]int{{4, 3}, {4, 2, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) {
			return G.Tensordot([]int{0}, []int{0}, a, b)
		})}},
		{graphCase: graphCase{name: "tensordot-vector", shapes: [][]int{{3, 4}, {4}}, build: two(func(a, b *G.Node) (*G.Node, error) {
			return G.Tensordot([]int{1}, []int{0}, a, b)
		})}},
		// Upsample2D and its gradient.
		{graphCase: graphCase{name: "upsample-2", shapes: [][]int{{2, 3, 2, 3}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Upsample2D(a, 2) })}},
		{graphCase: graphCase{name: "upsample-3", shapes: [][]int{{1, 2, 3, 1}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Upsample2D(a, 3) })}},
		{graphCase: graphCase{name: "upsample-1", shapes: [][]int{{1, 1, 2, 3}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Upsample2D(a, 1) })}},
		// Sparsemax along the last axis of a matrix (where gorgonia's own
		// gradient works) and its gradient; scaled so that rows have
		// supports of several elements.
		{graphCase: graphCase{name: "sparsemax", shapes: [][]int{{4, 7}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.Sparsemax(G.Must(G.Mul(scalarOf(a, 0.3), a)))
		})}},
		{graphCase: graphCase{name: "sparsemax-vector", shapes: [][]int{{7}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.Sparsemax(G.Must(G.Mul(scalarOf(a, 0.3), a)))
		})}},
		{graphCase: graphCase{name: "sparsemax-axis-1", shapes: [][]int{{3, 5}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.Sparsemax(G.Must(G.Mul(scalarOf(a, 0.3), a)), 1)
		})}},
		// ByIndices: an embedding lookup with repeated rows (along another
		// axis gorgonia's forward or gradient is wrong:
		// TestOpsTapeMachineWrong).
		{graphCase: graphCase{name: "by-indices-rows", shapes: [][]int{{7, 4}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.ByIndices(a, opIntConst(a.Graph(), "idx", []int{6}, []int{3, 0, 3, 6, 1, 3}), 0)
		})}},
		// Gorgonia's identity op (no gradient).
		{graphCase: graphCase{name: "identity", shapes: [][]int{{3, 5}}, noGrad: true, build: one(func(a *G.Node) (*G.Node, error) {
			return G.ApplyOp(G.Iop{}, a)
		})}},
	}
	runOpCases(t, cases)
}

// opRun runs a side of c built in dt from the values once and returns the
// output, the loss and, with grad, the gradients of the parameters.
func opRun(c graphCase, dt tensor.Dtype, values [][]float64, grad bool, newSide func(*model) (side, error)) (out []float64, loss float64, grads [][]float64, err error) {
	m, err := c.model(dt, values)
	if err != nil {
		return nil, 0, nil, err
	}
	s, err := newSide(m)
	if err != nil {
		return nil, 0, nil, err
	}
	defer s.close()
	if err := s.run(); err != nil {
		return nil, 0, nil, err
	}
	if out, err = s.read(m.logits); err != nil {
		return nil, 0, nil, err
	}
	l, err := s.read(m.loss)
	if err != nil {
		return nil, 0, nil, err
	}
	for i := range m.params {
		g, err := s.grad(i)
		if err != nil {
			return nil, 0, nil, err
		}
		if g != nil {
			grads = append(grads, g)
		}
	}
	return out, l[0], grads, nil
}

// opProgram returns what a program compiled from c's graph on be computes
// from the values: the output, the loss and, with grad, the gradients of
// the parameters.
func opProgram(t *testing.T, be backend.Backend, c graphCase, dt tensor.Dtype, values [][]float64, grad bool) (out []float64, loss float64, grads [][]float64) {
	t.Helper()
	out, loss, grads, err := opRun(c, dt, values, grad, compiled(be, sideConfig{noGrad: !grad}))
	if err != nil {
		t.Fatalf("%s %v: %v", c.name, dt, err)
	}
	return out, loss, grads
}

// opTape returns what the tape machine computes from the values (float64),
// or the error (or panic) it stops with.
func opTape(c graphCase, values [][]float64, grad bool) (out []float64, grads [][]float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tape machine panicked: %v", r)
		}
	}()
	out, _, grads, err = opRun(c, tensor.Float64, values, grad, onTape(sideConfig{noGrad: !grad}))
	return out, grads, err
}

// opFD returns the central differences of the loss of the program that be
// compiles from c, in float64, with respect to every parameter's elements.
func opFD(t *testing.T, be backend.Backend, c graphCase, values [][]float64) [][]float64 {
	t.Helper()
	const h = 1e-6
	var fd [][]float64
	for i := range values {
		if i < len(c.constant) && c.constant[i] {
			continue
		}
		d := make([]float64, len(values[i]))
		for j := range d {
			v := values[i][j]
			values[i][j] = v + h
			_, up, _ := opProgram(t, be, c, tensor.Float64, values, false)
			values[i][j] = v - h
			_, down, _ := opProgram(t, be, c, tensor.Float64, values, false)
			values[i][j] = v
			d[j] = (up - down) / (2 * h)
		}
		fd = append(fd, d)
	}
	return fd
}

// TestOpsTapeMachineWrong checks the lowerings where gorgonia v0.9.18's
// tape machine computes the value or the gradient wrong, or fails: the
// program's output against a reference computed here from the op's
// definition, its gradient against central differences of its own loss
// (float64, to 1e-6), its float32 results against its float64 ones (to
// 1e-5), on every backend; and that the tape machine is indeed wrong
// there.
func TestOpsTapeMachineWrong(t *testing.T) {
	byIndices := func(x []float64, shape []int, axis int, idx []int) []float64 {
		outer, n, inner := numel(shape[:axis]), shape[axis], numel(shape[axis+1:])
		var out []float64
		for o := range outer {
			for _, r := range idx {
				out = append(out, x[(o*n+r)*inner:(o*n+r+1)*inner]...)
			}
		}
		return out
	}
	sparsemax := func(x []float64, cols int) []float64 {
		out := make([]float64, len(x))
		for r := 0; r < len(x); r += cols {
			row := x[r : r+cols]
			// tau by bisection on sum(max(x - tau, 0)) = 1.
			lo, hi := slices.Min(row)-1, slices.Max(row)
			for range 200 {
				mid := (lo + hi) / 2
				s := 0.0
				for _, v := range row {
					s += max(v-mid, 0)
				}
				if s > 1 {
					lo = mid
				} else {
					hi = mid
				}
			}
			for j, v := range row {
				out[r+j] = max(v-(lo+hi)/2, 0)
			}
		}
		return out
	}
	idxCase := func(name string, shape []int, axis int, idx []int, wrong string) struct {
		c     graphCase
		ref   func(v [][]float64) []float64
		wrong string
	} {
		return struct {
			c     graphCase
			ref   func(v [][]float64) []float64
			wrong string
		}{graphCase{name: name, shapes: [][]int{shape}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.ByIndices(a, opIntConst(a.Graph(), "idx", []int{len(idx)}, idx), axis)
		})}, func(v [][]float64) []float64 { return byIndices(v[0], shape, axis, idx) }, wrong}
	}
	cases := []struct {
		c     graphCase
		ref   func(v [][]float64) []float64
		wrong string // what the tape machine gets wrong: "value", "gradient" or "fails"
	}{
		{graphCase{name: "ravel-twice", shapes: [][]int{{2, 3}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.HadamardProd(G.Must(G.Ravel(a)), G.Must(G.Ravel(G.Must(G.Tanh(a)))))
		})}, func(v [][]float64) []float64 {
			out := make([]float64, len(v[0]))
			for i, x := range v[0] {
				out[i] = x * math.Tanh(x)
			}
			return out
		}, "gradient"},
		idxCase("by-indices-middle-axis", []int{2, 4, 3}, 1, []int{3, 0, 3}, "value"),
		idxCase("by-indices-last-axis", []int{3, 5}, 1, []int{4, 0, 4, 2}, "gradient"),
		idxCase("by-indices-3d-last-axis", []int{2, 3, 4}, 2, []int{1, 1, 3}, "gradient"),
		{graphCase{name: "sparsemax-3d", shapes: [][]int{{2, 3, 5}}, build: one(func(a *G.Node) (*G.Node, error) {
			return G.Sparsemax(G.Must(G.Mul(scalarOf(a, 0.3), a)))
		})}, func(v [][]float64) []float64 {
			x := make([]float64, len(v[0]))
			for i, e := range v[0] {
				x[i] = 0.3 * e
			}
			return sparsemax(x, 5)
		}, "fails"},
	}
	for bi, be := range testBackends(t) {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/backend%d", tc.c.name, bi), func(t *testing.T) {
				values := caseValues(tc.c)
				out, _, grads := opProgram(t, be, tc.c, tensor.Float64, values, true)
				if d := testval.MaxRel(out, tc.ref(values)); !(d <= 1e-10) {
					t.Errorf("output differs from the reference by %.3g\n got %v\nwant %v", d, trim(out), trim(tc.ref(values)))
				}
				fd := opFD(t, be, tc.c, values)
				for i := range fd {
					if d := testval.MaxRel(grads[i], fd[i]); !(d <= 1e-6) {
						t.Errorf("gradient %d differs from central differences by %.3g\n got %v\nwant %v", i, d, trim(grads[i]), trim(fd[i]))
					}
				}
				out32, _, grads32 := opProgram(t, be, tc.c, tensor.Float32, values, true)
				if d := testval.MaxRel(out32, out); !(d <= 1e-5) {
					t.Errorf("float32 output differs from float64's by %.3g", d)
				}
				for i := range grads32 {
					if d := testval.MaxRel(grads32[i], grads[i]); !(d <= 1e-5) {
						t.Errorf("float32 gradient %d differs from float64's by %.3g", i, d)
					}
				}
				if bi > 0 {
					return
				}
				// The tape machine's own results, wrong.
				tout, tgrads, err := opTape(tc.c, values, tc.wrong != "value")
				switch tc.wrong {
				case "value":
					if err == nil && len(tout) == len(out) && testval.MaxRel(tout, out) < 1e-3 {
						t.Errorf("the tape machine computes the value right (%v): update the test and the README", trim(tout))
					}
				case "gradient":
					if err == nil && testval.MaxRel(tgrads[0], fd[0]) < 1e-3 {
						t.Errorf("the tape machine computes the gradient right (%v): update the test and the README", trim(tgrads[0]))
					}
				case "fails":
					if err == nil {
						t.Errorf("the tape machine computes the gradient (%v): update the test and the README", trim(tgrads[0]))
					}
				}
			})
		}
	}
}

// opForward compiles g's outputs (no gradients) on be, runs the program
// and returns it.
func opForward(t *testing.T, be backend.Backend, g *G.ExprGraph, outs []*G.Node, inputs ...*G.Node) *Program {
	t.Helper()
	prog, err := Compile(g, Config{Backend: be, Outputs: outs, NoGrad: true, Inputs: inputs})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// TestOpsBooleanResults compiles comparisons built with retSame false,
// elementwise, against a scalar and broadcast, and checks that Read gives
// the comparisons' booleans (computed here, and the tape machine's where it
// runs them right), and 0 and 1 as integers.
func TestOpsBooleanResults(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	halves := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(rng.IntN(5)-2) / 2 // ties on a grid
		}
		return v
	}
	av, bv, cv := halves(15), halves(15), halves(3)
	type cmp struct {
		name string
		f    func(a, b, col *G.Node) (*G.Node, error)
		ref  func(i int) bool // element i of the (3, 5) result
		tape bool             // the tape machine computes it right
	}
	cmps := []cmp{
		{"lt", func(a, b, _ *G.Node) (*G.Node, error) { return G.Lt(a, b, false) }, func(i int) bool { return av[i] < bv[i] }, true},
		{"gt", func(a, b, _ *G.Node) (*G.Node, error) { return G.Gt(a, b, false) }, func(i int) bool { return av[i] > bv[i] }, true},
		{"lte", func(a, b, _ *G.Node) (*G.Node, error) { return G.Lte(a, b, false) }, func(i int) bool { return av[i] <= bv[i] }, true},
		{"gte", func(a, b, _ *G.Node) (*G.Node, error) { return G.Gte(a, b, false) }, func(i int) bool { return av[i] >= bv[i] }, true},
		{"eq", func(a, b, _ *G.Node) (*G.Node, error) { return G.Eq(a, b, false) }, func(i int) bool { return av[i] == bv[i] }, true},
		{"ne", func(a, b, _ *G.Node) (*G.Node, error) { return G.Ne(a, b, false) }, func(i int) bool { return av[i] != bv[i] }, true},
		{"lt-scalar", func(a, _, _ *G.Node) (*G.Node, error) { return G.Lt(a, scalarOf(a, 0), false) }, func(i int) bool { return av[i] < 0 }, true},
		{"scalar-gte", func(_, b, _ *G.Node) (*G.Node, error) { return G.Gte(scalarOf(b, 0.5), b, false) }, func(i int) bool { return 0.5 >= bv[i] }, true},
		{"broadcast-lt", func(a, _, col *G.Node) (*G.Node, error) { return G.BroadcastLt(a, col, false, nil, []byte{1}) },
			func(i int) bool { return av[i] < cv[i/5] }, true},
		// The tape machine gives BroadcastEq with its pattern on the left
		// values that are neither booleans nor comparisons.
		{"broadcast-eq-left", func(a, _, col *G.Node) (*G.Node, error) { return G.BroadcastEq(col, a, false, []byte{1}, nil) },
			func(i int) bool { return cv[i/5] == av[i] }, false},
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		build := func() (*G.ExprGraph, []*G.Node, []*G.Value) {
			g := G.NewGraph()
			a, b := newLeaf(g, dt, "a", []int{3, 5}, av), newLeaf(g, dt, "b", []int{3, 5}, bv)
			col := newLeaf(g, dt, "col", []int{3, 1}, cv)
			var outs []*G.Node
			var vals []*G.Value
			for _, c := range cmps {
				o := G.Must(c.f(a, b, col))
				outs, vals = append(outs, o), append(vals, new(G.Value))
				G.Read(o, vals[len(vals)-1])
			}
			return g, outs, vals
		}
		g, _, vals := build()
		vm := G.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		vm.Close()
		for i, c := range cmps {
			tape, _ := (*vals[i]).Data().([]bool)
			right := len(tape) == 15
			for j := range tape {
				right = right && tape[j] == c.ref(j)
			}
			if right != c.tape {
				t.Errorf("%v: %s: the tape machine right: %v, want %v (%v): update the test", dt, c.name, right, c.tape, (*vals[i]).Data())
			}
		}
		for bi, be := range testBackends(t) {
			g, outs, _ := build()
			prog := opForward(t, be, g, outs)
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
			for i, c := range cmps {
				got, ints := make([]bool, 15), make([]int32, 15)
				if err := prog.Read(outs[i], got); err != nil {
					t.Fatal(err)
				}
				if err := prog.Read(outs[i], ints); err != nil {
					t.Fatal(err)
				}
				for j := range got {
					if got[j] != c.ref(j) || ints[j] != map[bool]int32{false: 0, true: 1}[c.ref(j)] {
						t.Errorf("%v backend %d: %s: element %d is %v (%d as an integer), want %v", dt, bi, c.name, j, got[j], ints[j], c.ref(j))
						break
					}
				}
				if err := prog.Read(outs[i], make([]float64, 15)); err == nil {
					t.Errorf("%s: reading booleans into []float64 gave no error", c.name)
				}
			}
		}
	}
}

// TestOpsAtAndDiagFlat checks At and DiagFlat, which gorgonia does not
// differentiate: At against the element itself (the tape machine does not
// run At, a statement to it, and leaves the argument's value in the
// node), DiagFlat against the tape machine.
func TestOpsAtAndDiagFlat(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		vals := caseValues(graphCase{name: "at", shapes: [][]int{{3, 4}}})[0]
		build := func() (*G.ExprGraph, *G.Node, *G.Node, *G.Value, *G.Value) {
			g := G.NewGraph()
			x := newLeaf(g, dt, "x", []int{3, 4}, vals)
			at := G.Must(G.At(x, 2, 1))
			d := G.Must(G.DiagFlat(G.Must(G.Slice(x, G.S(1, 3)))))
			var av, dv G.Value
			G.Read(at, &av)
			G.Read(d, &dv)
			return g, at, d, &av, &dv
		}
		g, _, _, av, dv := build()
		vm := G.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		vm.Close()
		if len(testval.Floats((*av).Data())) == 1 {
			t.Errorf("the tape machine runs At (%v): update the test and the README", (*av).Data())
		}
		want := vals[2*4+1]
		if dt == tensor.Float32 {
			want = float64(float32(want))
		}
		for bi, be := range testBackends(t) {
			g, at, d, _, _ := build()
			prog := opForward(t, be, g, []*G.Node{at, d})
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
			got := testval.Host(dt, 1)
			if err := prog.Read(at, got); err != nil {
				t.Fatal(err)
			}
			if testval.Floats(got)[0] != want {
				t.Errorf("%v backend %d: At(2, 1) = %v, want %v", dt, bi, testval.Floats(got)[0], want)
			}
			dg := testval.Host(dt, 64)
			if err := prog.Read(d, dg); err != nil {
				t.Fatal(err)
			}
			if w := testval.Floats((*dv).Data()); !slices.Equal(testval.Floats(dg), w) {
				t.Errorf("%v backend %d: DiagFlat %v, want the tape machine's %v", dt, bi, testval.Floats(dg), w)
			}
		}
	}
}

// TestOpsYOLO checks YOLOv3's decoding: against the tape machine where it
// computes it (float32, one image), against the decoding computed here
// from its definition in float64 and for a batch of two (where the tape
// machine fails), and that training mode is refused at Compile.
func TestOpsYOLO(t *testing.T) {
	anchors := []float32{10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119}
	const boxes, classes, grid, netSize = 3, 2, 4, 70 // stride 70/4 = 17
	attrs := 5 + classes
	decode := func(x []float64, batch int) []float64 {
		cells, stride := grid*grid, float64(netSize/grid)
		sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
		out := make([]float64, len(x))
		for b := range batch {
			for cell := range cells {
				for box := range boxes {
					for a := range attrs {
						v := x[((b*boxes+box)*attrs+a)*cells+cell]
						o := &out[((b*cells+cell)*boxes+box)*attrs+a]
						switch a {
						case 0:
							*o = (sig(v) + float64(cell%grid)) * stride
						case 1:
							*o = (sig(v) + float64(cell/grid)) * stride
						case 2, 3:
							*o = math.Exp(v) * float64(anchors[2*box+a-2]) // the anchors of the first pairs
						default:
							*o = sig(v)
						}
					}
				}
			}
		}
		return out
	}
	masks := []int{3, 4, 5}
	for _, batch := range []int{1, 2} {
		x := caseValues(graphCase{name: "yolo", shapes: [][]int{{batch * boxes * attrs * grid * grid}}})[0]
		shape := []int{batch, boxes * attrs, grid, grid}
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			build := func() (*G.ExprGraph, *G.Node, *G.Value) {
				g := G.NewGraph()
				in := newLeaf(g, dt, "x", shape, x)
				out := G.Must(G.YOLOv3(in, anchors, masks, netSize, classes, 0.5))
				var v G.Value
				G.Read(out, &v)
				return g, out, &v
			}
			want := decode(x, batch)
			tol := tolerance(dt)
			if batch == 1 && dt == tensor.Float32 {
				g, _, v := build()
				vm := G.NewTapeMachine(g)
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				vm.Close()
				if d := testval.MaxRel(testval.Floats((*v).Data()), want); !(d <= tol) {
					t.Fatalf("the tape machine's decoding differs from the reference by %.3g: fix the reference", d)
				}
				want = testval.Floats((*v).Data())
			}
			for bi, be := range testBackends(t) {
				g, out, _ := build()
				prog := opForward(t, be, g, []*G.Node{out})
				if err := prog.Run(); err != nil {
					t.Fatal(err)
				}
				got := testval.Host(dt, len(want))
				if err := prog.Read(out, got); err != nil {
					t.Fatal(err)
				}
				if d := testval.MaxRel(testval.Floats(got), want); !(d <= tol) {
					t.Errorf("batch %d %v backend %d: differs by %.3g\n got %v\nwant %v", batch, dt, bi, d, trim(testval.Floats(got)), trim(want))
				}
			}
		}
	}
	// Training mode (targets given) is refused, with the reason.
	g := G.NewGraph()
	in := newLeaf(g, tensor.Float32, "x", []int{1, boxes * attrs, grid, grid}, make([]float64, boxes*attrs*grid*grid))
	targets := newLeaf(g, tensor.Float32, "targets", []int{1, 1, grid, grid}, make([]float64, grid*grid))
	out := G.Must(G.YOLOv3(in, anchors, masks, netSize, classes, 0.5, targets))
	be := cpu.New(cpu.Options{})
	defer be.Close()
	if _, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{out}, NoGrad: true}); err == nil || !strings.Contains(err.Error(), "training mode") || !strings.Contains(err.Error(), out.Name()) {
		t.Errorf("YOLOv3 in training mode: %v, want an error naming the node and training mode", err)
	}
}

// TestOpsIntegerInputs runs an embedding lookup (ByIndices along axis 0)
// whose indices are an input: SetInput takes []int, []int32 and []int64
// alike, Read gives them back, the output and the gradient (a scatter-add
// over repeated indices) are those computed here, and a bad index or
// integer is a clear error (on the CPU at Run, on the CUDA backend at the
// next read, from its fault words), never a crash; the program runs on
// after a bad index is replaced.
func TestOpsIntegerInputs(t *testing.T) {
	const rows, width = 5, 3
	table := caseValues(graphCase{name: "embedding", shapes: [][]int{{rows * width}}})[0]
	weights := caseValues(graphCase{name: "weights", shapes: [][]int{{4 * width}}})[0]
	good := []int{4, 0, 4, 2}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for bi, be := range testBackends(t) {
			g := G.NewGraph()
			emb := newLeaf(g, dt, "emb", []int{rows, width}, table)
			idx := G.NewTensor(g, tensor.Int, 1, G.WithShape(4), G.WithName("idx"))
			w := newLeaf(g, dt, "w", []int{4, width}, weights)
			out := G.Must(G.ByIndices(emb, idx, 0))
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, w))))
			if _, err := G.Grad(loss, emb); err != nil {
				t.Fatal(err)
			}
			prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{out, loss}, Params: []param.Param{param.Plain(emb)}, Inputs: []*G.Node{idx}})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			check := func(what string, data any) {
				t.Helper()
				if err := prog.SetInput(idx, data); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if err := prog.Run(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				got := testval.Host(dt, 4*width)
				if err := prog.Read(out, got); err != nil {
					t.Fatal(err)
				}
				wantOut, wantGrad := make([]float64, 0, 4*width), make([]float64, rows*width)
				for i, r := range good {
					wantOut = append(wantOut, table[r*width:(r+1)*width]...)
					for j := range width {
						wantGrad[r*width+j] += weights[i*width+j]
					}
				}
				if d := testval.MaxRel(testval.Floats(got), wantOut); !(d <= tolerance(dt)) {
					t.Errorf("%v backend %d %s: output %v, want %v", dt, bi, what, testval.Floats(got), wantOut)
				}
				p := prog.Params()[0]
				gr := testval.Host(dt, p.Size)
				if err := be.CopyOut(gr, p.Grad.Buf, p.Grad.Off); err != nil {
					t.Fatal(err)
				}
				if d := testval.MaxRel(testval.Floats(gr), wantGrad); !(d <= tolerance(dt)) {
					t.Errorf("%v backend %d %s: gradient %v, want %v", dt, bi, what, testval.Floats(gr), wantGrad)
				}
				back := make([]int, 4)
				if err := prog.Read(idx, back); err != nil || !slices.Equal(back, good) {
					t.Errorf("%s: reading the indices back: %v, %v", what, back, err)
				}
			}
			check("[]int", good)
			check("[]int32", []int32{4, 0, 4, 2})
			check("[]int64", []int64{4, 0, 4, 2})
			for _, bad := range []struct {
				data any
				want string
			}{{[]int{1 << 40, 0, 0, 0}, "outside the range of int32"}, {[]float64{1, 2, 3, 4}, "takes []int"}, {[]int{1, 2}, "takes 4 integers"}} {
				if err := prog.SetInput(idx, bad.data); err == nil || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("SetInput(%v): %v, want an error saying %q", bad.data, err, bad.want)
				}
			}
			// A bad index: the CPU refuses it at Run, before writing; the
			// CUDA backend reports it from its fault words at the next read
			// (and keeps reporting it: a backend of its own).
			if isCUDA(be) {
				continue
			}
			if err := prog.SetInput(idx, []int{4, 0, 5, 2}); err != nil {
				t.Fatal(err)
			}
			if err := prog.Run(); err == nil || !strings.Contains(err.Error(), "index 5 (entry 2 of the indices) outside 0 to 4") {
				t.Errorf("%v backend %d: Run with index 5 of 5 rows: %v", dt, bi, err)
			}
			check("after a bad index", good)
		}
		if len(moreBackends) == 0 {
			continue
		}
		be := moreBackends[0]()
		g := G.NewGraph()
		emb := newLeaf(g, dt, "emb", []int{rows, width}, table)
		idx := G.NewTensor(g, tensor.Int, 1, G.WithShape(4), G.WithName("idx"))
		out := G.Must(G.ByIndices(emb, idx, 0))
		prog := opForward(t, be, g, []*G.Node{out}, idx)
		if err := prog.SetInput(idx, []int{4, 0, -1, 2}); err != nil {
			t.Fatal(err)
		}
		err := prog.Run()
		if err == nil {
			err = prog.Read(out, testval.Host(dt, 4*width))
		}
		if err == nil || !strings.Contains(err.Error(), "index -1 (entry 2 of the indices) outside 0 to 4") {
			t.Errorf("%v %s: index -1 of 5 rows: %v", dt, be.Name(), err)
		}
		prog.Close()
		be.Close()
	}
}

// TestOpsScatterAddDeterministic checks that ByIndices' gradient, a
// scatter-add of many entries into few rows, is the same bit for bit on
// every backend (one and three CPU threads, the CUDA backend's host model
// in each order of its blocks and threads) and in every run.
func TestOpsScatterAddDeterministic(t *testing.T) {
	const rows, width, n = 37, 5, 1500
	rng := rand.New(rand.NewPCG(8, 8))
	idx := make([]int, n)
	for i := range idx {
		idx[i] = rng.IntN(rows)
	}
	c := graphCase{name: "scatter-add", shapes: [][]int{{rows, width}}, build: one(func(a *G.Node) (*G.Node, error) {
		return G.ByIndices(a, opIntConst(a.Graph(), "idx", []int{n}, idx), 0)
	})}
	values := caseValues(c)
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		var first []uint64
		for bi, be := range testBackends(t) {
			for run := range 2 {
				_, _, grads := opProgram(t, be, c, dt, values, true)
				bits := make([]uint64, len(grads[0]))
				for i, v := range grads[0] {
					bits[i] = math.Float64bits(v)
				}
				if first == nil {
					first = bits
				} else if !slices.Equal(bits, first) {
					t.Errorf("%v backend %d run %d: the gradient differs in its bits from backend 0's", dt, bi, run)
				}
			}
		}
	}
}

// ctcCase is a CTC loss of logits (time, batch, labels) through a
// log-softmax over the labels, or of log-probabilities given directly
// (raw).
type ctcCase struct {
	name               string
	time, batch, label int
	targets, shape     []int // the targets and their shape
	inLens, tgtLens    []int
	reduction          G.Reduction
	raw                bool
}

// build builds the loss on a fresh graph, with its gradient.
func (c ctcCase) build(dt tensor.Dtype, x []float64) (g *G.ExprGraph, in, cost *G.Node, costV *G.Value, err error) {
	g = G.NewGraph()
	in = newLeaf(g, dt, "logits", []int{c.time, c.batch, c.label}, x)
	lp := in
	if !c.raw {
		lp = G.Must(G.LogSoftMax(in, 2))
	}
	cost, err = G.CTCLoss(lp, opIntConst(g, "targets", c.shape, c.targets), opIntConst(g, "inlen", []int{c.batch}, c.inLens),
		opIntConst(g, "tgtlen", []int{c.batch}, c.tgtLens), c.reduction)
	if err != nil {
		return
	}
	costV = new(G.Value)
	G.Read(cost, costV)
	_, err = G.Grad(cost, in)
	return
}

// logSoftmaxRows returns x with a log-softmax taken over each run of n.
func logSoftmaxRows(x []float64, n int) []float64 {
	out := make([]float64, len(x))
	for r := 0; r < len(x); r += n {
		m := slices.Max(x[r : r+n])
		s := 0.0
		for _, v := range x[r : r+n] {
			s += math.Exp(v - m)
		}
		for j, v := range x[r : r+n] {
			out[r+j] = v - m - math.Log(s)
		}
	}
	return out
}

// TestOpsCTCLoss checks the CTC loss, which compiles for the CPU backend
// only: its value and gradient against the tape machine (targets as a
// matrix and as a vector, averaged and summed, an empty target among
// them); at time steps past an input's length, where the tape machine
// leaves -Inf in the gradient, the program writes 0; the gradient of a
// summed loss through a log-softmax is that of central differences, that
// of an averaged one is gorgonia's (not divided by the target lengths and
// the batch, unlike the loss); the CUDA backend refuses it at Compile,
// saying what to do.
func TestOpsCTCLoss(t *testing.T) {
	cases := []ctcCase{
		{name: "matrix-mean", time: 6, batch: 3, label: 5, targets: []int{1, 2, 2, 4, 0, 0, 3, 1, 0}, shape: []int{3, 3},
			inLens: []int{6, 6, 6}, tgtLens: []int{3, 1, 2}, reduction: G.ReductionMean},
		{name: "vector-sum", time: 5, batch: 3, label: 4, targets: []int{3, 1, 2}, shape: []int{3},
			inLens: []int{5, 5, 5}, tgtLens: []int{1, 0, 2}, reduction: G.ReductionSum},
		{name: "vector-mean-repeats", time: 7, batch: 2, label: 3, targets: []int{1, 1, 2, 2, 2}, shape: []int{5},
			inLens: []int{7, 7}, tgtLens: []int{2, 3}, reduction: G.ReductionMean},
	}
	backends := testBackends(t)
	for _, c := range cases {
		x := caseValues(graphCase{name: c.name, shapes: [][]int{{c.time * c.batch * c.label}}})[0]
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			g, in, _, costV, err := c.build(dt, x)
			if err != nil {
				t.Fatal(err)
			}
			vm := G.NewTapeMachine(g, G.BindDualValues(in))
			if err := vm.RunAll(); err != nil {
				t.Fatalf("%s %v: tape machine: %v", c.name, dt, err)
			}
			vm.Close()
			wantCost := testval.Floats((*costV).Data())
			tg, err := in.Grad()
			if err != nil {
				t.Fatal(err)
			}
			wantGrad := testval.Floats(tg.Data())
			for bi, be := range backends {
				g, in, cost, _, err := c.build(dt, x)
				if err != nil {
					t.Fatal(err)
				}
				prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{cost}, Params: []param.Param{param.Plain(in)}})
				if isCUDA(be) {
					if !errors.Is(err, backend.ErrUnsupported) || !strings.Contains(err.Error(), "CPU backend") {
						t.Errorf("%s: Compile: %v, want ErrUnsupported saying to use the CPU backend", be.Name(), err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := prog.Run(); err != nil {
					t.Fatal(err)
				}
				got := testval.Host(dt, 1)
				if err := prog.Read(cost, got); err != nil {
					t.Fatal(err)
				}
				if d := testval.MaxRel(testval.Floats(got), wantCost); !(d <= tolerance(dt)) {
					t.Errorf("%s %v backend %d: loss %v, the tape machine's %v", c.name, dt, bi, testval.Floats(got), wantCost)
				}
				p := prog.Params()[0]
				gr := testval.Host(dt, p.Size)
				if err := be.CopyOut(gr, p.Grad.Buf, p.Grad.Off); err != nil {
					t.Fatal(err)
				}
				if d := testval.MaxRel(testval.Floats(gr), wantGrad); !(d <= tolerance(dt)) {
					t.Errorf("%s %v backend %d: gradient differs from the tape machine's by %.3g\n got %v\nwant %v", c.name, dt, bi, d, trim(testval.Floats(gr)), trim(wantGrad))
				}
				prog.Close()
			}
		}
	}

	// Shorter inputs, the log-probabilities given directly.
	be := backends[0]
	short := ctcCase{name: "short", time: 6, batch: 2, label: 4, targets: []int{1, 3, 2, 0}, shape: []int{2, 2},
		inLens: []int{4, 6}, tgtLens: []int{2, 1}, reduction: G.ReductionSum, raw: true}
	lp := logSoftmaxRows(caseValues(graphCase{name: "short", shapes: [][]int{{6 * 2 * 4}}})[0], 4)
	g, in, _, _, err := short.build(tensor.Float64, lp)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(in))
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	vm.Close()
	tg, _ := in.Grad()
	tape := testval.Floats(tg.Data())
	_, _, grads := ctcProgram(t, be, short, lp, true)
	for i, v := range grads {
		tt, b := i/(2*4), (i/4)%2
		switch {
		case tt >= short.inLens[b]:
			if v != 0 || !math.IsInf(tape[i], -1) {
				t.Errorf("element %d (time %d, past the input length %d): %v, the tape machine's %v; want 0 and -Inf", i, tt, short.inLens[b], v, tape[i])
			}
		case math.Abs(v-tape[i]) > 1e-10*max(1, math.Abs(tape[i])):
			t.Errorf("element %d: %v, the tape machine's %v", i, v, tape[i])
		}
	}

	// Central differences of the loss with respect to the logits.
	for _, c := range cases {
		x := caseValues(graphCase{name: c.name, shapes: [][]int{{c.time * c.batch * c.label}}})[0]
		_, _, grad := ctcProgram(t, be, c, x, true)
		fd := make([]float64, len(x))
		for i := range x {
			v := x[i]
			x[i] = v + 1e-6
			up, _, _ := ctcProgram(t, be, c, x, false)
			x[i] = v - 1e-6
			down, _, _ := ctcProgram(t, be, c, x, false)
			x[i] = v
			fd[i] = (up - down) / 2e-6
		}
		if c.reduction == G.ReductionMean {
			// Gorgonia's gradient of the averaged loss is that of the sum.
			for i := range fd {
				b := (i / c.label) % c.batch
				fd[i] *= float64(max(c.tgtLens[b], 1) * c.batch)
			}
		}
		if slices.Contains(c.tgtLens, 0) {
			continue // gorgonia's loss of an empty target is its log-likelihood, its gradient that of minus it
		}
		if d := testval.MaxRel(grad, fd); !(d <= 1e-6) {
			t.Errorf("%s: the gradient differs from central differences (scaled as gorgonia's) by %.3g\n got %v\nwant %v", c.name, d, trim(grad), trim(fd))
		}
	}
}

// ctcProgram compiles c in float64 on be and returns its loss and, with
// grad, the gradient with respect to its input.
func ctcProgram(t *testing.T, be backend.Backend, c ctcCase, x []float64, grad bool) (float64, []float64, []float64) {
	t.Helper()
	g, in, cost, _, err := c.build(tensor.Float64, x)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{cost}, Params: []param.Param{param.Plain(in)}, NoGrad: !grad})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	loss := make([]float64, 1)
	if err := prog.Read(cost, loss); err != nil {
		t.Fatal(err)
	}
	if !grad {
		return loss[0], nil, nil
	}
	p := prog.Params()[0]
	gr := make([]float64, p.Size)
	if err := be.CopyOut(gr, p.Grad.Buf, p.Grad.Off); err != nil {
		t.Fatal(err)
	}
	return loss[0], nil, gr
}

// TestOpsGorgoniaGraphWrong shows, with central differences and the
// definitions, where the graph gorgonia v0.9.18 builds is itself wrong: the
// gradients of Log2 and InverseSqrt, and LogSumExp's value (it computes
// log(sum(exp(a - max)) + max)). A program runs the graph as built, so it
// agrees with the tape machine there (TestOpLowerings).
func TestOpsGorgoniaGraphWrong(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, c := range []graphCase{
		{name: "log2", shapes: [][]int{{2, 3}}, positive: true, build: one(G.Log2)},
		{name: "inverse-sqrt", shapes: [][]int{{2, 3}}, positive: true, build: one(G.InverseSqrt)},
	} {
		values := caseValues(c)
		_, _, grads := opProgram(t, be, c, tensor.Float64, values, true)
		fd := opFD(t, be, c, values)
		if d := testval.MaxRel(grads[0], fd[0]); d < 1e-2 {
			t.Errorf("%s: gorgonia's gradient agrees with central differences (%.3g): update the test and the README", c.name, d)
		}
	}
	c := graphCase{name: "log-sum-exp", shapes: [][]int{{7}}, build: one(func(a *G.Node) (*G.Node, error) { return G.LogSumExp(a, 0) })}
	values := caseValues(c)
	out, _, _ := opProgram(t, be, c, tensor.Float64, values, false)
	m := slices.Max(values[0])
	var s float64
	for _, v := range values[0] {
		s += math.Exp(v - m)
	}
	if got, want := out[0], math.Log(s+m); math.Abs(got-want) > 1e-12*math.Abs(want) {
		t.Errorf("LogSumExp = %v, want gorgonia's log(sum(exp(a - max)) + max) = %v", got, want)
	}
	if lse := m + math.Log(s); math.Abs(out[0]-lse) < 1e-3 {
		t.Errorf("LogSumExp = %v is the log-sum-exp %v: update the test and the README", out[0], lse)
	}
}

// TestOpsRefused checks that what the compiler cannot run right fails
// Compile with an error naming the node and the reason: sparsemax along
// another axis than the last, integers where an op takes floats, and an
// integer parameter.
func TestOpsRefused(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	g := G.NewGraph()
	x := newLeaf(g, tensor.Float64, "x", []int{3, 4}, make([]float64, 12))
	sm := G.Must(G.Sparsemax(x, 0))
	ints := opIntConst(g, "ints", []int{4}, []int{1, 2, 3, 4})
	sum := G.Must(G.Add(ints, ints))
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{Outputs: []*G.Node{sm}, NoGrad: true}, []string{sm.Name(), "last axis"}},
		{Config{Outputs: []*G.Node{sum}, NoGrad: true}, []string{sum.Name(), "integers"}},
		{Config{Params: []param.Param{param.Plain(ints)}, NoGrad: true}, []string{"ints", "parameters are float32 or float64"}},
	} {
		tc.cfg.Backend = be
		_, err := Compile(g, tc.cfg)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Compile: %v, want an error saying %q", err, w)
			}
		}
	}
}
