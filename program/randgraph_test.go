package program

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// The random-graph test: well-typed Gorgonia graphs over the compiled ops
// of docs/ops.md, each compiled and compared with the tape machine in
// values, gradients and two training steps, where central differences of
// both losses decide a disagreement, or refused by Compile with an error.

// tapeTraps are the known bugs of Gorgonia's tape machine (gorgonia v0.9.18,
// tensor v0.9.23) and of its graph building that a random graph could meet,
// each with its cause. A disagreement with the tape machine passes only
// where central differences prove the tape wrong and the graph holds one of
// the traps not avoided; the generator never builds the avoided ones.
var tapeTraps = map[string]struct {
	cause   string
	avoided bool
}{
	"sum-axes-2-3": {cause: "the tape's Sum and Mean over axes (2, 3) of a 4-D tensor sum the wrong elements once H*W > 4 " +
		"(tensor v0.9.23's reduction over two trailing axes); the program's sum is right"},
	"reduce-4d-inner": {cause: "the tape's Sum, Mean and Max along axis 1, 2 or 3 of a 4-D tensor can reduce the wrong " +
		"elements (tensor v0.9.23's reduceDefault, as for sum-axes-2-3: found by this test on (3, 2, 4, 8) along axis 2); " +
		"the program's reduction matches central differences"},
	"softmax-column": {cause: "the tape's gradient of SoftMax of an (n, 1) column is wrong (gorgonia softmaxes the column " +
		"along its first axis, and its softmaxDiffOp along the last); the program's matches central differences of both losses"},
	"bn-grad": {cause: "the tape's gradients of BatchNorm's scale and bias are wrong on some image shapes (found by this " +
		"test on (3, 3, 3, 1) and (1, 3, 4, 1), images one pixel wide); the program's match central differences of both losses"},
	"tape-error": {cause: "the tape machine fails to run the graph with an error of its own (scalars where it wants tensors: " +
		"\"Expected left value to be Tensor\"; a Sum over all axes: \"Dimension mismatch. Expected 0, got 0\"); " +
		"the program's gradients are checked against central differences of its own loss instead"},
	"random-twins": {avoided: true, cause: "gorgonia hashes a random node by its op alone, so two random nodes of one " +
		"distribution and shape are one node (the generator draws at most one per shape)"},
	"log-softmax": {avoided: true, cause: "gorgonia rewrites Log(SoftMax(x)) by turning the SoftMax node itself into " +
		"a log-softmax, which changes every other user of it (the generator never takes the log of a softmax)"},
	"overwritten": {avoided: true, cause: "the tape machine overwrites intermediate values in place, so only the " +
		"outputs it was told to read (gorgonia.Read) keep theirs (the generator reads the output and the loss alone)"},
	"reduce-unit-axis": {avoided: true, cause: "the tape's Sum or Max along an axis of length 1 of a tensor of 3 or more " +
		"axes (a reduction's, or the gradient of a broadcast along it) panics in tensor v0.9.23's reduceDefault (index " +
		"out of range), in the tape's goroutine, which no recover reaches (the generator neither reduces nor broadcasts " +
		"along such an axis)"},
	"reshape-view": {cause: "the tape machine's Reshape is a view of its argument's value, and an op after it " +
		"may write its result in place into that memory: reshaping a parameter and adding to the result overwrites the " +
		"parameter's value at every run (the program never writes through a view); the solver then steps from the " +
		"overwritten values"},
	"gap-grad": {avoided: true, cause: "gorgonia.Grad panics on GlobalAveragePool2D, which has no gradient " +
		"(the generator does not build it)"},
	"slice-scalar": {avoided: true, cause: "gorgonia's Slice of one element of a column, whose node has shape (1), " +
		"yields a scalar value, and the tape's Sum of it panics (\"*gorgonia.F64 is not tensor.Tensor\", in " +
		"reductionDo) in the tape's goroutine, which no recover reaches (found by seed 78, graph 154; the generator " +
		"does not reduce such a slice)"},
}

// randGraphFixed are graphs, by seed and index, that met a trap, run at
// every test. The streams are the generator's of 2026-11-28: a change to
// the generator changes the graph of a seed. What the test found first,
// each now fixed or listed in tapeTraps: BinaryXent's panic in Compile
// (TestBinaryXent), reductions along an axis of length 1 (avoided), Shape.Eq
// taking (5) for (5, 1) (the generator's own bug), the reduce-4d-inner,
// softmax-column, bn-grad, reshape-view and tape-error traps.
var randGraphFixed = []struct {
	seed  uint64
	index int
	why   string
}{
	{20261128, 1, "sum-axes-2-3"},
	{20261128, 6, "reduce-4d-inner"},
	{20261128, 13, "reshape-view"},
	{20261128, 144, "softmax-column"},
}

// rgInfo says what a random graph holds, for failure messages and to
// decide disagreements.
type rgInfo struct {
	ops    []string
	random bool            // a random node: compared with the program's own central differences
	traps  map[string]bool // the keys of tapeTraps the graph holds
}

func (in rgInfo) String() string { return strings.Join(in.ops, "; ") }

// rgGen builds one random graph from its stream.
type rgGen struct {
	rng     *rand.Rand
	dt      tensor.Dtype
	m       *model
	pool    []*G.Node
	leaves  int
	randoms map[string]bool // the shapes of the random nodes drawn
	hasBN   bool
	names   map[*G.Node]string // short names of the op nodes, for messages
	info    rgInfo
}

// randGraph builds the graph of stream (seed, index) in dt: the same
// graph, up to the float type, for every call.
func randGraph(seed uint64, index int, dt tensor.Dtype) (*model, rgInfo, error) {
	r := &rgGen{rng: rand.New(rand.NewPCG(seed, uint64(index))), dt: dt, m: &model{g: G.NewGraph()},
		randoms: map[string]bool{}, names: map[*G.Node]string{}, info: rgInfo{traps: map[string]bool{}}}
	var base []int
	if r.rng.IntN(3) == 0 {
		base = []int{1 + r.rng.IntN(3), 1 + r.rng.IntN(3), 1 + r.rng.IntN(4), 1 + r.rng.IntN(4)}
	} else {
		base = []int{1 + r.rng.IntN(5), 1 + r.rng.IntN(6)}
	}
	for i := range 1 + r.rng.IntN(3) {
		r.pool = append(r.pool, r.leaf(base, i == 0 || r.rng.IntN(3) > 0))
	}
	for range 2 + r.rng.IntN(8) {
		if err := r.op(); err != nil {
			return nil, r.info, fmt.Errorf("%v (after %v)", err, r.info)
		}
	}
	out := r.pool[len(r.pool)-1]
	r.info.ops = append(r.info.ops, "output "+r.name(out))
	m := r.m
	// The parameters are those the output depends on.
	reach := map[*G.Node]bool{}
	var walk func(n *G.Node)
	walk = func(n *G.Node) {
		if !reach[n] {
			reach[n] = true
			for _, c := range gorgoniaop.Args(n) {
				walk(c)
			}
		}
	}
	walk(out)
	p0 := m.params[0]
	m.params = slices.DeleteFunc(m.params, func(p param.Param) bool { return !reach[p.Node] })
	m.logits = out
	n := out.Shape().TotalSize()
	rv := make([]float64, n)
	for i := range rv {
		rv[i] = r.rng.NormFloat64()
	}
	var err error
	if out.IsScalar() {
		m.loss, err = G.Mul(out, newLeaf(m.g, dt, "R", nil, rv))
	} else {
		var p *G.Node
		if p, err = G.HadamardProd(out, newLeaf(m.g, dt, "R", []int(out.Shape()), rv)); err == nil {
			m.loss, err = G.Sum(p)
		}
	}
	if len(m.params) == 0 && err == nil { // a loss that depends on a parameter: p0's sum
		m.params = []param.Param{p0}
		var s *G.Node
		if s, err = G.Sum(p0.Node); err == nil {
			m.loss, err = G.Add(m.loss, s)
		}
	}
	m.lossScale = func(o []float64) float64 {
		var s float64
		for i, v := range o {
			s += math.Abs(v * rv[i%len(rv)])
		}
		return s
	}
	return m, r.info, err
}

// name returns n's short name: a leaf's own, n0, n1, ... for the ops.
func (r *rgGen) name(n *G.Node) string {
	if s, ok := r.names[n]; ok {
		return s
	}
	return n.Name()
}

// leaf adds a leaf of shape, a parameter or a constant, with N(0, 1) values.
func (r *rgGen) leaf(shape []int, isParam bool) *G.Node {
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = r.rng.NormFloat64()
	}
	isParam = isParam && len(shape) > 0 // a parameter is a tensor
	name := fmt.Sprintf("c%d", r.leaves)
	if isParam {
		name = fmt.Sprintf("p%d", r.leaves)
	}
	r.leaves++
	l := newLeaf(r.m.g, r.dt, name, shape, v)
	if isParam {
		r.m.params = append(r.m.params, param.Plain(l))
	}
	r.info.ops = append(r.info.ops, fmt.Sprintf("%s %v", name, shape))
	return l
}

// pick returns a node of the pool, the newer ones likelier (chains), any
// of them sometimes (branches, and parameters used twice).
func (r *rgGen) pick() *G.Node {
	if r.rng.IntN(2) == 0 {
		return r.pool[len(r.pool)-1]
	}
	return r.pool[r.rng.IntN(len(r.pool))]
}

// sameShape returns a node of the pool of x's shape, or a new leaf of it.
func (r *rgGen) sameShape(x *G.Node) *G.Node {
	var c []*G.Node
	for _, n := range r.pool {
		if n != x && slices.Equal([]int(n.Shape()), []int(x.Shape())) { // not Shape.Eq: (5) and (5, 1) are Eq
			c = append(c, n)
		}
	}
	if len(c) > 0 && r.rng.IntN(3) > 0 {
		return c[r.rng.IntN(len(c))]
	}
	return r.leaf(x.Shape(), r.rng.IntN(2) == 0)
}

// op adds one op of a random kind to the pool, over nodes of the pool.
func (r *rgGen) op() error {
	x := r.pick()
	shape := []int(x.Shape())
	var (
		y    *G.Node
		err  error
		what string
	)
	switch k := r.rng.IntN(14); {
	case k == 0 || k == 1: // unary
		names := []string{"Tanh", "Sigmoid", "Neg", "Square", "Sin", "Cos", "Softplus", "Exp(Tanh)", "Log1p(Square)", "Log(Sigmoid)", "Sqrt(1+Square)"}
		what = names[r.rng.IntN(len(names))]
		y, err = r.unary(what, x)
	case k == 2 || k == 3: // same-shape binary
		b := r.sameShape(x)
		names := []string{"Add", "Sub", "HadamardProd", "HadamardDiv(1+Square)"}
		what = names[r.rng.IntN(len(names))]
		switch what {
		case "Add":
			y, err = G.Add(x, b)
		case "Sub":
			y, err = G.Sub(x, b)
		case "HadamardProd":
			y, err = G.HadamardProd(x, b)
		default:
			var d *G.Node
			if d, err = r.unary("1+Square", b); err == nil {
				y, err = G.HadamardDiv(x, d)
			}
		}
		what += " " + r.name(b)
	case k == 4: // broadcast of a node with one axis fewer
		if len(shape) < 2 {
			return nil
		}
		ax := r.rng.IntN(len(shape))
		if len(shape) >= 3 && shape[ax] == 1 {
			return nil // tapeTraps["reduce-unit-axis"]
		}
		small := slices.Delete(slices.Clone(shape), ax, ax+1)
		b := r.leaf(small, r.rng.IntN(2) == 0)
		if len(shape) == 4 && ax > 0 { // its gradient is a Sum along ax
			r.info.traps["reduce-4d-inner"] = true
		}
		pat := []byte{byte(ax)}
		switch r.rng.IntN(3) {
		case 0:
			what = "BroadcastAdd"
			y, err = G.BroadcastAdd(x, b, nil, pat)
		case 1:
			what = "BroadcastHadamardProd(left)"
			y, err = G.BroadcastHadamardProd(b, x, pat, nil)
		default:
			what = "BroadcastSub"
			y, err = G.BroadcastSub(x, b, nil, pat)
		}
		what = fmt.Sprintf("%s %s axis %d", what, r.name(b), ax)
	case k == 5 || k == 6: // reduction along axes
		if len(shape) == 0 || (len(shape) == 1 && shape[0] == 1 && strings.Contains(fmt.Sprintf("%T", x.Op()), "sliceOp")) {
			return nil // tapeTraps["slice-scalar"]
		}
		axes := []int{r.rng.IntN(len(shape))}
		if len(shape) == 4 && r.rng.IntN(2) == 0 {
			axes = []int{2, 3}
			if shape[2]*shape[3] > 4 {
				r.info.traps["sum-axes-2-3"] = true
			}
		} else if len(shape) > 1 && r.rng.IntN(4) == 0 {
			axes = nil // all axes
		}
		for _, a := range axes {
			if len(shape) >= 3 && shape[a] == 1 {
				return nil // tapeTraps["reduce-unit-axis"]
			}
		}
		if len(shape) == 4 && (axes == nil || slices.ContainsFunc(axes, func(a int) bool { return a > 0 })) {
			r.info.traps["reduce-4d-inner"] = true
		}
		switch r.rng.IntN(3) {
		case 0:
			what = "Sum"
			y, err = G.Sum(x, axes...)
		case 1:
			what = "Mean"
			y, err = G.Mean(x, axes...)
		default:
			what = "Max"
			if axes == nil {
				axes = []int{0}
			}
			y, err = G.Max(x, axes...)
		}
		what = fmt.Sprintf("%s axes %v", what, axes)
	case k == 7: // matrix product with a parameter, maybe one used before
		if len(shape) != 2 {
			return nil
		}
		w := r.sameShapeParam([]int{shape[1], 1 + r.rng.IntN(4)})
		what = "Mul " + r.name(w)
		y, err = G.Mul(x, w)
	case k == 8: // softmax along the last axis
		if len(shape) != 2 {
			return nil
		}
		what = "SoftMax"
		if shape[1] == 1 {
			r.info.traps["softmax-column"] = true
		}
		y, err = G.SoftMax(x)
	case k == 9: // transpose or reshape
		if len(shape) != 2 {
			return nil
		}
		if r.rng.IntN(2) == 0 {
			what = "Transpose"
			y, err = G.Transpose(x)
		} else {
			what = "Reshape"
			r.info.traps["reshape-view"] = true
			y, err = G.Reshape(x, tensor.Shape{shape[1], shape[0]})
		}
	case k == 10: // concat or slice
		if len(shape) == 0 {
			return nil
		}
		ax := r.rng.IntN(len(shape))
		if r.rng.IntN(2) == 0 {
			b := r.sameShape(x)
			what = fmt.Sprintf("Concat axis %d with %s", ax, r.name(b))
			y, err = G.Concat(ax, x, b)
		} else if shape[0] > 1 {
			what = "Slice rows 1:"
			y, err = G.Slice(x, G.S(1, shape[0]))
		} else {
			return nil
		}
	case k == 11: // batch norm of an image batch, in training
		if len(shape) != 4 || r.hasBN || shape[0]*shape[2]*shape[3] < 2 {
			return nil
		}
		r.hasBN = true
		scale, bias := r.leaf([]int{1, shape[1], 1, 1}, true), r.leaf([]int{1, shape[1], 1, 1}, true)
		what = "BatchNorm"
		r.info.traps["bn-grad"] = true
		y, _, _, _, err = G.BatchNorm(x, scale, bias, 0.3, 1e-3)
	case k == 12: // additive noise from a random node
		key := fmt.Sprint(shape)
		if r.randoms[key] || len(shape) == 0 {
			return nil // tapeTraps["random-twins"]
		}
		r.randoms[key] = true
		r.info.random = true
		noise := G.GaussianRandomNode(r.m.g, r.dt, 0, 0.1, shape...)
		what = "Add GaussianRandomNode"
		y, err = G.Add(x, noise)
	default: // BinaryXent of a sigmoid against constant targets in (0, 1)
		p, err2 := G.Sigmoid(x)
		if err2 != nil {
			return err2
		}
		tv := make([]float64, numel(shape))
		for i := range tv {
			tv[i] = r.rng.Float64()
		}
		tgt := newLeaf(r.m.g, r.dt, fmt.Sprintf("t%d", r.leaves), shape, tv)
		r.leaves++
		what = "BinaryXent(Sigmoid)"
		y, err = G.BinaryXent(p, tgt)
	}
	if err != nil {
		return fmt.Errorf("%s of %s %v: %w", what, r.name(x), x.Shape(), err)
	}
	if y == nil {
		return nil
	}
	r.names[y] = fmt.Sprintf("n%d", len(r.names))
	r.info.ops = append(r.info.ops, fmt.Sprintf("%s = %s(%s) %v", r.name(y), what, r.name(x), y.Shape()))
	r.pool = append(r.pool, y)
	return nil
}

// sameShapeParam returns a parameter of shape already in the graph (a
// parameter shared between two uses), or a new one.
func (r *rgGen) sameShapeParam(shape []int) *G.Node {
	for _, p := range r.m.params {
		if slices.Equal([]int(p.Node.Shape()), shape) && r.rng.IntN(2) == 0 {
			return p.Node
		}
	}
	return r.leaf(shape, true)
}

// unary applies a smooth unary function (or a short chain of them, kept
// in the domain of its logs and roots) to x.
func (r *rgGen) unary(name string, x *G.Node) (*G.Node, error) {
	one := func() *G.Node {
		if r.dt == tensor.Float32 {
			return G.NewConstant(float32(1))
		}
		return G.NewConstant(1.0)
	}
	onePlus := func(a *G.Node) (*G.Node, error) { return G.Add(one(), a) }
	// Each function is a chain of Gorgonia's, applied in turn.
	chains := map[string][]func(*G.Node) (*G.Node, error){
		"Tanh": {G.Tanh}, "Sigmoid": {G.Sigmoid}, "Neg": {G.Neg}, "Square": {G.Square},
		"Sin": {G.Sin}, "Cos": {G.Cos}, "Softplus": {G.Softplus},
		"Exp(Tanh)":      {G.Tanh, G.Exp},
		"Log1p(Square)":  {G.Square, G.Log1p},
		"Log(Sigmoid)":   {G.Sigmoid, G.Log}, // gorgonia rewrites it to -Softplus(-x)
		"Sqrt(1+Square)": {G.Square, onePlus, G.Sqrt},
		"1+Square":       {G.Square, onePlus},
	}
	fs, ok := chains[name]
	if !ok {
		return nil, fmt.Errorf("no unary function %q", name)
	}
	y := x
	for _, f := range fs {
		var err error
		if y, err = f(y); err != nil {
			return nil, err
		}
	}
	return y, nil
}

// TestRandomGraphs runs the fixed cases and randomGraphCount graphs of one
// seed: ORTHONET_RANDGRAPH=N runs N graphs from a seed of the clock (or of
// ORTHONET_RANDGRAPH_SEED), which the test prints (make randgraph).
func TestRandomGraphs(t *testing.T) {
	n, seed := 200, uint64(20261128)
	if s := os.Getenv("ORTHONET_RANDGRAPH"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 0 {
			t.Fatalf("ORTHONET_RANDGRAPH=%q, want a count of graphs", s)
		}
		seed = uint64(time.Now().UnixNano())
	}
	if s := os.Getenv("ORTHONET_RANDGRAPH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ORTHONET_RANDGRAPH_SEED=%q, want an unsigned integer", s)
		}
	}
	fmt.Printf("TestRandomGraphs: %d graphs of seed %d (rerun: ORTHONET_RANDGRAPH=%d ORTHONET_RANDGRAPH_SEED=%d)\n", n, seed, n, seed)
	bes := testBackends(t)
	var st rgStats
	for _, f := range randGraphFixed {
		t.Run(fmt.Sprintf("fixed-%d-%d-%s", f.seed, f.index, f.why), func(t *testing.T) { checkRandGraph(t, bes, f.seed, f.index, &st) })
	}
	for i := range n {
		t.Run(fmt.Sprintf("seed-%d-%d", seed, i), func(t *testing.T) { checkRandGraph(t, bes, seed, i, &st) })
	}
	t.Logf("%d compared with the tape machine, %d with central differences alone (random nodes), %d refused, %d proven tape bugs %v",
		st.compared, st.random, st.refused, st.tapeBugs, st.traps)
}

type rgStats struct {
	compared, random, refused, tapeBugs int
	traps                               map[string]int
}

// checkRandGraph checks graph (seed, index): in float64 for an even index,
// float32 for an odd one, on one of the test backends in turn.
func checkRandGraph(t *testing.T, bes []backend.Backend, seed uint64, index int, st *rgStats) {
	dt := tensor.Float64
	if index%2 == 1 {
		dt = tensor.Float32
	}
	be := bes[index%len(bes)]
	label := fmt.Sprintf("graph %d of seed %d (%v, backend %d)", index, seed, dt, index%len(bes))
	m, info, err := randGraph(seed, index, dt)
	if err != nil {
		t.Fatalf("%s: the generator built an ill-typed graph: %v", label, err)
	}
	got, err := newProgramSide(be, m, sideConfig{})
	if err != nil {
		if !strings.Contains(err.Error(), "program: ") {
			t.Errorf("%s: refused with an error that does not say why: %v\ngraph: %v", label, err, info)
		}
		t.Logf("%s: refused: %v", label, err)
		st.refused++
		return
	}
	if info.random {
		got.close()
		st.random++
		checkOwnDifferences(t, label, be, seed, index, info)
		return
	}
	st.compared++
	build := func() (*model, error) { m, _, err := randGraph(seed, index, dt); return m, err }
	tol := 1e-8
	if dt == tensor.Float32 {
		tol = 2e-4
	}
	got.close()
	// Two steps of a solver on both: values, gradients and parameters.
	cfg := sideConfig{groups: []optim.Group{{Rule: optim.SGDConfig{Momentum: 0.5}, LR: 0.05}}}
	ref, prog := newSides(t, label, build, onTape(cfg), compiled(be, cfg))
	if what, ok := sidesAgree(ref, prog, 2, tol); !ok {
		if strings.HasPrefix(what, "the tape machine failed") {
			t.Logf("%s: %s: the tape machine's bug %q (%s)", label, what, "tape-error", tapeTraps["tape-error"].cause)
			st.tapeBugs++
			checkOwnDifferences(t, label, be, seed, index, info)
			return
		}
		trap, proven := decide(t, label, be, seed, index, info)
		if !proven {
			t.Errorf("%s: %s, and central differences do not prove the tape machine wrong\ngraph: %v", label, what, info)
			return
		}
		if trap == "" {
			t.Errorf("%s: %s; central differences prove the tape machine wrong, by no trap of tapeTraps: list it with its cause\ngraph: %v", label, what, info)
			return
		}
		t.Logf("%s: %s: the tape machine's bug %q (%s)", label, what, trap, tapeTraps[trap].cause)
		st.tapeBugs++
		if st.traps == nil {
			st.traps = map[string]int{}
		}
		st.traps[trap]++
	}
}

// rgClose says whether a and b agree to the random graphs' tolerance: a difference is within it
// relative to the reference's largest value, or absolutely where both are
// rounding noise about 0 (tol/100: a gradient that is 0 in exact arithmetic).
func rgClose(a, b []float64, tol float64) bool {
	return testval.MaxRel(a, b) <= tol || testval.MaxAbs(a, b) <= tol/100
}

// sidesAgree runs both sides steps times with a step of their solvers after
// each run (once, without steps) and compares, after each run, the output,
// the loss and every gradient, after each step the parameters; it says
// what differs first.
func sidesAgree(ref, got side, steps int, tol float64) (string, bool) {
	rm, gm := ref.model(), got.model()
	for k := range max(steps, 1) {
		if err := ref.run(); err != nil {
			return "the tape machine failed: " + err.Error(), false
		}
		if err := got.run(); err != nil {
			return "the program failed: " + err.Error(), false
		}
		at := fmt.Sprintf("run %d: ", k)
		for _, n := range [][2]*G.Node{{rm.logits, gm.logits}, {rm.loss, gm.loss}} {
			a, err1 := ref.read(n[0])
			b, err2 := got.read(n[1])
			if err1 != nil || err2 != nil {
				return fmt.Sprintf("%sreading: %v %v", at, err1, err2), false
			}
			if !rgClose(b, a, tol) {
				return fmt.Sprintf("%sthe value of %s differs by %.3g, %s", at, n[0].Name(), testval.MaxRel(b, a), testval.Worst(b, a)), false
			}
		}
		for i, p := range gm.params {
			a, err1 := ref.grad(i)
			b, err2 := got.grad(i)
			if err1 != nil || err2 != nil {
				return fmt.Sprintf("%sgradient of %s: %v %v", at, p.Node.Name(), err1, err2), false
			}
			if !rgClose(b, a, tol) {
				return fmt.Sprintf("%sthe gradient of %s differs by %.3g, %s", at, p.Node.Name(), testval.MaxRel(b, a), testval.Worst(b, a)), false
			}
		}
		if k >= steps {
			break
		}
		if err := ref.step(); err != nil {
			return "the tape's step failed: " + err.Error(), false
		}
		if err := got.step(); err != nil {
			return "the program's step failed: " + err.Error(), false
		}
		for i, p := range gm.params {
			a, b := testval.Floats(rm.params[i].Node.Value()), testval.Floats(p.Node.Value())
			if !rgClose(b, a, tol) {
				return fmt.Sprintf("%s%s after the step differs by %.3g, %s", at, p.Node.Name(), testval.MaxRel(b, a), testval.Worst(b, a)), false
			}
		}
	}
	return "", true
}

// lossAt evaluates the float64 loss of graph (seed, index) with parameter
// values vals: on the tape machine, or compiled for be.
type lossAt func(vals [][]float64) (float64, error)

// tapeLoss and programLoss build graph (seed, index) in float64 once and
// return its loss as a function of the parameters' values.
func tapeLoss(t *testing.T, seed uint64, index int) lossAt {
	m, _, err := randGraph(seed, index, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	var v G.Value
	G.Read(m.loss, &v)
	vm := G.NewTapeMachine(m.g)
	t.Cleanup(func() { vm.Close() })
	return func(vals [][]float64) (float64, error) {
		for i, p := range m.params {
			copy(p.Node.Value().Data().([]float64), vals[i])
		}
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			return 0, err
		}
		return testval.Floats(v)[0], nil
	}
}

func programLoss(t *testing.T, be backend.Backend, seed uint64, index int) lossAt {
	m, _, err := randGraph(seed, index, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	nodes := param.Nodes(m.params)
	p, err := Compile(m.g, Config{Backend: be, Outputs: []*G.Node{m.loss}, Inputs: nodes, NoGrad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	out := make([]float64, 1)
	return func(vals [][]float64) (float64, error) {
		for i, n := range nodes {
			if err := p.SetInput(n, vals[i]); err != nil {
				return 0, err
			}
		}
		if err := p.SetStep(0); err != nil { // the same random draws at every run
			return 0, err
		}
		if err := p.Run(); err != nil {
			return 0, err
		}
		return out[0], p.Read(m.loss, out)
	}
}

// gradients returns the float64 gradients of graph (seed, index) on the
// tape machine (tape) or compiled for be, and the parameters' values.
//
// clobbered says whether the run changed a leaf's value.
func gradients(t *testing.T, be backend.Backend, seed uint64, index int, tape bool) (grads, vals [][]float64, clobbered bool) {
	m, _, err := randGraph(seed, index, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	var s side
	if tape {
		s, err = newTapeSide(m, sideConfig{})
	} else {
		s, err = newProgramSide(be, m, sideConfig{})
		if err == nil {
			err = s.(*programSide).prog.SetStep(0)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, p := range m.params {
		vals = append(vals, slices.Clone(testval.Floats(p.Node.Value())))
	}
	var leaves []*G.Node // every leaf, parameter or constant, with its value
	var before [][]float64
	for _, n := range m.g.AllNodes() {
		if n.Op() == nil && n.Value() != nil {
			leaves, before = append(leaves, n), append(before, slices.Clone(testval.Floats(n.Value())))
		}
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	for i := range m.params {
		g, err := s.grad(i)
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, g)
	}
	for i, n := range leaves {
		clobbered = clobbered || !slices.Equal(before[i], testval.Floats(n.Value()))
	}
	return grads, vals, clobbered
}

// centralDiff returns (f(v + h e) - f(v - h e)) / 2h for element j of
// parameter i.
func centralDiff(f lossAt, vals [][]float64, i, j int) (float64, error) {
	const h = 1e-5
	x := vals[i][j]
	defer func() { vals[i][j] = x }()
	vals[i][j] = x + h
	fp, err := f(vals)
	if err != nil {
		return 0, err
	}
	vals[i][j] = x - h
	fm, err := f(vals)
	if err != nil {
		return 0, err
	}
	return (fp - fm) / (2 * h), nil
}

// worstElems returns, for each parameter, the element where a and b differ
// most.
func worstElem(a, b []float64) int {
	j, d := 0, -1.0
	for k := range a {
		if e := math.Abs(a[k] - b[k]); e > d || math.IsNaN(e) {
			j, d = k, e
		}
	}
	return j
}

// near reports whether g and cd agree as a gradient and its central
// difference can: to 1e-5 of their scale.
func near(g, cd float64) bool {
	return math.Abs(g-cd) <= 1e-5*max(1, math.Abs(cd))
}

// decide settles a disagreement between the tape machine and the program
// in float64. The tape machine is proven wrong where its loss differs from
// the program's, or a run of it changed a parameter's value, or their
// gradients differ and the program's matches the central differences of
// its loss at the worst element (the differences of the tape's loss are
// logged beside it), each with the program's gradients matching; trap
// names a listed trap the graph holds ("" if none).
func decide(t *testing.T, label string, be backend.Backend, seed uint64, index int, info rgInfo) (trap string, proven bool) {
	tg, vals, clobbered := gradients(t, be, seed, index, true)
	pg, _, _ := gradients(t, be, seed, index, false)
	tl, pl := tapeLoss(t, seed, index), programLoss(t, be, seed, index)
	lt, err1 := tl(vals)
	lp, err2 := pl(vals)
	if err1 != nil || err2 != nil {
		t.Logf("%s: deciding: %v %v", label, err1, err2)
		return "", false
	}
	valueWrong := math.Abs(lt-lp) > 1e-8*max(1, math.Abs(lp))
	gradWrong := false
	for i := range pg {
		if rgClose(pg[i], tg[i], 1e-8) {
			continue
		}
		j := worstElem(pg[i], tg[i])
		cdt, err1 := centralDiff(tl, vals, i, j)
		cdp, err2 := centralDiff(pl, vals, i, j)
		if err1 != nil || err2 != nil {
			return "", false
		}
		t.Logf("%s: parameter %d element %d: program %v, tape %v, central differences of the program's loss %v, of the tape's %v",
			label, i, j, pg[i][j], tg[i][j], cdp, cdt)
		if !near(pg[i][j], cdp) {
			return "", false // the program is wrong, or the difference cannot say
		}
		gradWrong = true
	}
	if clobbered {
		t.Logf("%s: the tape machine's run changed a leaf's value", label)
	}
	if !valueWrong && !gradWrong && !clobbered {
		return "", false // they agree in float64: a float32 rounding difference
	}
	// The program's gradients are its loss's derivatives; the tape's loss
	// or gradients differ from them. A listed trap the graph holds is the
	// cause.
	for k := range info.traps {
		if !tapeTraps[k].avoided {
			return k, true
		}
	}
	return "", true
}

// checkOwnDifferences checks a graph with random nodes, which the tape
// machine draws differently, against central differences of the program's
// own loss (float64, the step's draws fixed).
func checkOwnDifferences(t *testing.T, label string, be backend.Backend, seed uint64, index int, info rgInfo) {
	pg, vals, _ := gradients(t, be, seed, index, false)
	pl := programLoss(t, be, seed, index)
	for i := range pg {
		for _, j := range []int{0, len(pg[i]) - 1} {
			cd, err := centralDiff(pl, vals, i, j)
			if err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			if !near(pg[i][j], cd) {
				t.Errorf("%s: the gradient of parameter %d at %d is %v, central differences of the loss %v\ngraph: %v", label, i, j, pg[i][j], cd, info)
			}
		}
	}
}
