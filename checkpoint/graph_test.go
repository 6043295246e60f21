package checkpoint

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// toy is a small custom Gorgonia model, tanh(x W1) W2 + b fitted to targets
// by squared error, with W1 on the Stiefel manifold.
type toy struct {
	vm     G.VM
	x, y   *G.Node
	params []param.Param
	nodes  G.Nodes
	xs, ys []float64 // the whole data set, float64
}

const toyN, toyIn, toyHidden, toyOut, toyBatch = 40, 12, 6, 3, 8

func newToy(t testing.TB, dt tensor.Dtype, hidden int) *toy {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	m := &toy{xs: make([]float64, toyN*toyIn), ys: make([]float64, toyN*toyOut)}
	for i := range m.xs {
		m.xs[i] = rng.NormFloat64()
	}
	for i := range m.ys {
		m.ys[i] = rng.NormFloat64()
	}
	g := G.NewGraph()
	mk := func(name string, shape []int, vals []float64) *G.Node {
		var v tensor.Tensor
		if dt == tensor.Float32 {
			b := make([]float32, len(vals))
			for i, x := range vals {
				b[i] = float32(x)
			}
			v = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
		} else {
			v = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))
		}
		return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
	}
	st, _ := manifold.NewStiefel[float64](toyIn, hidden)
	w1 := make([]float64, toyIn*hidden)
	_ = st.Random(w1, rng)
	w2 := make([]float64, hidden*toyOut)
	for i := range w2 {
		w2[i] = rng.NormFloat64() / 3
	}
	W1 := mk("W1", []int{toyIn, hidden}, w1)
	W2 := mk("W2", []int{hidden, toyOut}, w2)
	b := mk("b", []int{toyOut}, make([]float64, toyOut))
	m.x = mk("x", []int{toyBatch, toyIn}, make([]float64, toyBatch*toyIn))
	m.y = mk("y", []int{toyBatch, toyOut}, make([]float64, toyBatch*toyOut))
	h := G.Must(G.Tanh(G.Must(G.Mul(m.x, W1))))
	out := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, W2)), b, nil, []byte{0}))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(out, m.y))))))
	m.params = []param.Param{param.OnStiefel(W1), param.Plain(W2), param.Plain(b)}
	m.nodes = param.Nodes(m.params)
	if _, err := G.Grad(loss, m.nodes...); err != nil {
		t.Fatal(err)
	}
	m.vm = G.NewTapeMachine(g, G.BindDualValues(m.nodes...))
	return m
}

// steps trains from step `from` to `to`; batch k is rows 3k, 3k+1, ... mod N.
func (m *toy) steps(t testing.TB, s *optim.Solver, from, to int) {
	t.Helper()
	for k := from; k < to; k++ {
		xb, yb := m.x.Value().Data(), m.y.Value().Data()
		for i := 0; i < toyBatch; i++ {
			row := (3*k + i) % toyN
			for j := 0; j < toyIn; j++ {
				set(xb, i*toyIn+j, m.xs[row*toyIn+j])
			}
			for j := 0; j < toyOut; j++ {
				set(yb, i*toyOut+j, m.ys[row*toyOut+j])
			}
		}
		if err := m.vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		m.vm.Reset()
	}
}

func set(data any, i int, v float64) {
	switch d := data.(type) {
	case []float32:
		d[i] = float32(v)
	case []float64:
		d[i] = v
	}
}

// groups returns a constrained group c and the rest r.
func groups(c, r optim.Group) []optim.Group {
	c.Select = optim.Param.Constrained
	return []optim.Group{c, r}
}

func solverConfigs() map[string][]optim.Group {
	return map[string][]optim.Group{
		"rsdm-p+sgd-momentum":  groups(optim.Group{LR: 0.2, Rule: optim.RSDMConfig{SubmanifoldSize: 5, Seed: 3}}, optim.Group{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.05}),
		"rsdm-o+adam":          groups(optim.Group{LR: 0.2, Rule: optim.RSDMConfig{SubmanifoldSize: 5, Sampling: optim.Orthogonal, Seed: 3}}, optim.Group{Rule: optim.AdamConfig{}, LR: 0.01}),
		"rgd-momentum+adam":    groups(optim.Group{Rule: optim.RGDConfig{Momentum: 0.9}, LR: 0.1}, optim.Group{Rule: optim.AdamConfig{}, LR: 0.01}),
		"rsdm-momentum+sgd":    groups(optim.Group{LR: 0.2, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Momentum: 0.5, InnerSteps: 3, Seed: 3}}, optim.Group{LR: 0.05}),
		"radam+adamw+schedule": groups(optim.Group{Rule: optim.RiemannianAdamConfig{}, LR: 0.05, Schedule: optim.Cosine{Steps: 25}}, optim.Group{Rule: optim.AdamWConfig{}, LR: 0.01, Schedule: optim.WarmupCosine{Warmup: 5, Steps: 25}}),
	}
}

// TestResumeBitExact checks that N steps straight and k steps, Write, Read
// into a fresh model and solver, N-k steps give weights equal bit for bit,
// for RSDM-P, RSDM-O, RGD with momentum, RSDM-momentum, SGD with momentum
// and Adam, in float32 and float64.
func TestResumeBitExact(t *testing.T) {
	const total = 25
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for name, cfg := range solverConfigs() {
			for _, k := range []int{0, 7, 11} {
				straight := newToy(t, dt, toyHidden)
				s1, _ := paramopt.NewSolver(straight.params, cfg, optim.Options{})
				straight.steps(t, s1, 0, total)

				first := newToy(t, dt, toyHidden)
				s2, _ := paramopt.NewSolver(first.params, cfg, optim.Options{})
				first.steps(t, s2, 0, k)
				f := New()
				if err := f.PutNodes("model.", first.nodes); err != nil {
					t.Fatal(err)
				}
				if err := f.PutSolver("optim.", s2); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "c.safetensors")
				if err := Write(path, f); err != nil {
					t.Fatal(err)
				}
				g, err := Read(path)
				if err != nil {
					t.Fatal(err)
				}
				second := newToy(t, dt, toyHidden)
				s3, _ := paramopt.NewSolver(second.params, cfg, optim.Options{})
				if err := g.LoadNodes("model.", second.nodes); err != nil {
					t.Fatal(err)
				}
				if err := g.LoadSolver("optim.", s3); err != nil {
					t.Fatal(err)
				}
				second.steps(t, s3, k, total)
				for i, n := range straight.nodes {
					if d := firstDiff(n.Value().Data(), second.nodes[i].Value().Data()); d >= 0 {
						t.Fatalf("%v %s k=%d: %s differs at entry %d", dt, name, k, n.Name(), d)
					}
				}
			}
		}
	}
}

// firstDiff returns the first index where two float slices differ in bits,
// or -1.
func firstDiff(a, b any) int {
	switch x := a.(type) {
	case []float32:
		y := b.([]float32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return i
			}
		}
	case []float64:
		y := b.([]float64)
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return i
			}
		}
	}
	return -1
}

// TestLoadMismatch checks that a checkpoint of another architecture, element
// type or optimizer is refused with an error naming the fault, and that
// nothing is loaded.
func TestLoadMismatch(t *testing.T) {
	cfgs := solverConfigs()
	src := newToy(t, tensor.Float64, toyHidden)
	s, _ := paramopt.NewSolver(src.params, cfgs["rsdm-o+adam"], optim.Options{})
	src.steps(t, s, 0, 3)
	f := New()
	_ = f.PutNodes("model.", src.nodes)
	_ = f.PutSolver("optim.", s)

	wider := newToy(t, tensor.Float64, toyHidden+1)
	before := append([]float64(nil), wider.nodes[2].Value().Data().([]float64)...)
	if err := f.LoadNodes("model.", wider.nodes); err == nil || !strings.Contains(err.Error(), `"model.W1" has shape [12 6], the model's (12, 7)`) {
		t.Errorf("wider model: %v", err)
	}
	if firstDiff(before, wider.nodes[2].Value().Data()) >= 0 {
		t.Error("a refused load changed the bias")
	}
	if err := f.LoadNodes("model.", newToy(t, tensor.Float32, toyHidden).nodes); err == nil || !strings.Contains(err.Error(), "is float64, the model's float32") {
		t.Errorf("float32 model: %v", err)
	}
	if err := f.LoadNodes("model.", src.nodes[:2]); err == nil || !strings.Contains(err.Error(), `[model.b] belong to no node`) {
		t.Errorf("model without b: %v", err)
	}
	if err := f.LoadNodes("other.", src.nodes); err == nil || !strings.Contains(err.Error(), `no tensor "other.W1"`) {
		t.Errorf("missing prefix: %v", err)
	}
	sgd, _ := paramopt.NewSolver(src.params, cfgs["rsdm-p+sgd-momentum"], optim.Options{})
	if err := f.LoadSolver("optim.", sgd); err == nil || !strings.Contains(err.Error(), `"adam" optimizer cannot restore a "sgd"`) {
		t.Errorf("Adam state into SGD: %v", err)
	}
	rgd, _ := paramopt.NewSolver(src.params, cfgs["rgd-momentum+adam"], optim.Options{})
	if err := f.LoadSolver("optim.", rgd); err == nil || !strings.Contains(err.Error(), `"rsdm" optimizer cannot restore a "rgd"`) {
		t.Errorf("RSDM state into RGD: %v", err)
	}
	fewer, _ := paramopt.NewSolver(src.params[:2], cfgs["rgd-momentum+adam"], optim.Options{})
	if err := f.LoadSolver("optim.", fewer); err == nil || !strings.Contains(err.Error(), "state for 3 parameters, the model has 2") {
		t.Errorf("fewer parameters: %v", err)
	}
}

// TestPutNodesNames checks that a node without a name, input or operation,
// and two nodes of one name are errors that say which and what to do.
func TestPutNodesNames(t *testing.T) {
	g := G.NewGraph()
	v := func() tensor.Tensor { return tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2})) }
	a := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("a"), G.WithValue(v()))
	a2 := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("a"), G.WithValue(v()))
	anon := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithValue(v()))
	sum := G.Must(G.Add(a, anon))
	for _, tc := range []struct {
		nodes G.Nodes
		want  string
	}{
		{G.Nodes{a, anon}, "node 2 of 2 has no name"},
		{G.Nodes{sum}, "node 1 of 1 has no name"},
		{G.Nodes{a, a2}, `two nodes are named "a"`},
	} {
		err := New().PutNodes("model.", tc.nodes)
		if err == nil || !strings.Contains(err.Error(), tc.want) || (strings.Contains(tc.want, "no name") && !strings.Contains(err.Error(), "gorgonia.WithName")) {
			t.Errorf("%v: error %v, want %q", tc.nodes, err, tc.want)
		}
	}
	named := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("add(%1)"), G.WithValue(v()))
	if err := New().PutNodes("model.", G.Nodes{a, named}); err != nil {
		t.Errorf("a node named like an operation: %v", err)
	}
}

// TestConvertTypes checks that a float64 checkpoint loads into a float32
// model only when asked: without the option the error says how; with it the
// weights and the optimizer's buffers are rounded to float32, the steps
// counted on, and training goes on from there (its weights stay within
// float32 rounding of the float64 run's for a few steps).
func TestConvertTypes(t *testing.T) {
	cfg := solverConfigs()["radam+adamw+schedule"]
	src := newToy(t, tensor.Float64, toyHidden)
	s, _ := paramopt.NewSolver(src.params, cfg, optim.Options{})
	src.steps(t, s, 0, 6)
	f := New()
	if err := f.PutNodes("model.", src.nodes); err != nil {
		t.Fatal(err)
	}
	if err := f.PutSolver("optim.", s); err != nil {
		t.Fatal(err)
	}
	dst := newToy(t, tensor.Float32, toyHidden)
	ds, _ := paramopt.NewSolver(dst.params, cfg, optim.Options{})
	if err := f.LoadNodes("model.", dst.nodes); err == nil || !strings.Contains(err.Error(), "ConvertTypes") {
		t.Errorf("float64 into float32 without the option: error %v", err)
	}
	if err := f.LoadNodes("model.", dst.nodes, LoadOptions{ConvertTypes: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.LoadSolver("optim.", ds); err == nil {
		t.Error("float64 optimizer buffers loaded into a float32 solver without the option")
	}
	if err := f.LoadSolver("optim.", ds, LoadOptions{ConvertTypes: true}); err != nil {
		t.Fatal(err)
	}
	if ds.Steps() != 6 {
		t.Errorf("steps %d after loading, want 6", ds.Steps())
	}
	for i, n := range src.nodes {
		a, b := n.Value().Data().([]float64), dst.nodes[i].Value().Data().([]float32)
		for k := range a {
			if float32(a[k]) != b[k] {
				t.Fatalf("%s[%d]: %v loaded as %v", n.Name(), k, a[k], b[k])
			}
		}
	}
	src.steps(t, s, 6, 9)
	dst.steps(t, ds, 6, 9)
	for i, n := range src.nodes {
		a, b := n.Value().Data().([]float64), dst.nodes[i].Value().Data().([]float32)
		for k := range a {
			if math.Abs(a[k]-float64(b[k])) > 1e-4*(1+math.Abs(a[k])) {
				t.Fatalf("%s[%d]: float64 run %v, converted float32 run %v", n.Name(), k, a[k], b[k])
			}
		}
	}
}
