package program

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/param"
)

// tolerance returns the largest relative difference allowed between the
// program and the tape machine: 1e-10 for float64, 1e-5 for float32.
func tolerance(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-5
	}
	return 1e-10
}

// newLeaf returns a leaf of dt with the given shape (a scalar if none) and
// values.
func newLeaf(g *G.ExprGraph, dt tensor.Dtype, name string, shape []int, v []float64) *G.Node {
	if len(shape) == 0 {
		return G.NewScalar(g, dt, G.WithName(name), G.WithValue(testval.Tensor(dt, shape, v).Data()))
	}
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(testval.Tensor(dt, shape, v)))
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// graphCase is a function of some leaves to compare between the tape
// machine and a compiled program.
type graphCase struct {
	name   string
	shapes [][]int
	// build returns the node to check; leaves[i] has shapes[i].
	build func(leaves []*G.Node) (*G.Node, error)
	// positive draws the leaves from (0.5, 2) instead of N(0, 1).
	positive bool
	// constant lists leaves that are constants, not parameters.
	constant []bool
	// noGrad compares the forward values only.
	noGrad bool
	// evalMode runs the tape machine with gorgonia.EvalMode() and compiles
	// with Config.EvalMode (batch norm and dropout in inference).
	evalMode bool
}

// caseValues draws the leaf values of c: N(0, 1), or (0.5, 2) where c is
// positive, seeded by its name's length.
func caseValues(c graphCase) [][]float64 {
	rng := rand.New(rand.NewPCG(uint64(len(c.name)), 7))
	values := make([][]float64, len(c.shapes))
	for i, s := range c.shapes {
		values[i] = make([]float64, numel(s))
		for j := range values[i] {
			if c.positive {
				values[i][j] = 0.5 + 1.5*rng.Float64()
			} else {
				values[i][j] = rng.NormFloat64()
			}
		}
	}
	return values
}

// model builds c in dt from the leaf values: its output, the loss
// sum(out * R) for a fixed random R, and as parameters the leaves c does
// not list as constants.
func (c graphCase) model(dt tensor.Dtype, values [][]float64) (*model, error) {
	m := &model{g: G.NewGraph()}
	var leaves []*G.Node
	for i, s := range c.shapes {
		l := newLeaf(m.g, dt, fmt.Sprintf("x%d", i), s, values[i])
		leaves = append(leaves, l)
		if i >= len(c.constant) || !c.constant[i] {
			m.params = append(m.params, param.Plain(l))
		}
	}
	out, err := c.build(leaves)
	if err != nil {
		return nil, err
	}
	m.logits = out
	wr := rand.New(rand.NewPCG(3, 4))
	r := make([]float64, numel(out.Shape()))
	for i := range r {
		r[i] = wr.NormFloat64()
	}
	if out.Shape().IsScalar() || len(out.Shape()) == 0 {
		m.loss = G.Must(G.Mul(out, newLeaf(m.g, dt, "R", nil, r[:1])))
	} else {
		m.loss = G.Must(G.Sum(G.Must(G.HadamardProd(out, newLeaf(m.g, dt, "R", []int(out.Shape()), r)))))
	}
	// The loss sums out * R: its rounding error scales with the terms'
	// magnitudes, not with the sum's, which may cancel.
	m.lossScale = func(out []float64) float64 {
		var s float64
		for i, o := range out {
			s += math.Abs(o * r[i%len(r)])
		}
		return s
	}
	return m, nil
}

// runCase builds c in dt twice, runs it on the tape machine and as a
// compiled program on be (twice: a second run must not accumulate), and
// compares the output, the loss sum(out * R) for a random R, and the
// gradient of the loss for every parameter leaf.
func runCase(t *testing.T, be backend.Backend, c graphCase, dt tensor.Dtype) {
	t.Helper()
	values := caseValues(c)
	label := fmt.Sprintf("%s %v", c.name, dt)
	cfg := sideConfig{noGrad: c.noGrad, evalMode: c.evalMode, runs: 2}
	build := func() (*model, error) { return c.model(dt, values) }
	ref, got := newSides(t, label, build, onTape(cfg), compiled(be, cfg))
	agree(t, label, ref, got, 0, tolerance(dt))
	if c.noGrad {
		return
	}
	if err := got.(*programSide).prog.CheckGrads(); err != nil {
		t.Errorf("%s: CheckGrads: %v", label, err)
	}
}

func trim(a []float64) []float64 {
	if len(a) > 8 {
		return a[:8]
	}
	return a
}

// testBackends returns the backends every lowering runs on: the default
// CPU backend, one that splits every loop across three goroutines, and
// those of moreBackends.
func testBackends(t *testing.T) []backend.Backend {
	a, b := cpu.New(cpu.Options{}), cpu.New(cpu.Options{Threads: 3, Grain: 1})
	bs := []backend.Backend{a, b}
	for _, f := range moreBackends {
		bs = append(bs, f())
	}
	t.Cleanup(func() {
		for _, be := range bs {
			be.Close()
		}
	})
	return bs
}

// moreBackends start the backends of other builds (the CUDA kernels on
// the host model of the device where cgo is on).
var moreBackends []func() backend.Backend

func runCases(t *testing.T, cases []graphCase) {
	for bi, be := range testBackends(t) {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/backend%d", c.name, bi), func(t *testing.T) {
				for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
					runCase(t, be, c, dt)
				}
			})
		}
	}
}
