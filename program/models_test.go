package program

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

type modelCase struct {
	name  string
	build func(dt tensor.Dtype) (*model, error)
}

func fill(dt tensor.Dtype, shape []int, seed uint64) tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 5))
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return testval.Tensor(dt, shape, v)
}

func onehotValue(dt tensor.Dtype, batch, classes int, seed uint64) tensor.Tensor {
	v := make([]float64, batch*classes)
	for i := 0; i < batch; i++ {
		v[i*classes+int((seed+uint64(7*i))%uint64(classes))] = 1
	}
	return testval.Tensor(dt, []int{batch, classes}, v)
}

// classifier makes the model of a classifier from its logits (or the
// error computing them): the loss is their cross-entropy against the
// one-hot targets, inputs[1].
func classifier(g *G.ExprGraph, inputs []*G.Node, logits *G.Node, err error, params []param.Param) (*model, error) {
	if err != nil {
		return nil, err
	}
	loss, err := nn.CrossEntropy(logits, inputs[1])
	if err != nil {
		return nil, err
	}
	return &model{g: g, inputs: inputs, logits: logits, loss: loss, params: params}, nil
}

// classifierInputs returns a graph with an input x of shape, filled from
// seed, one-hot targets y of 10 classes (seed+1) for its first axis, and
// the random source of the weights (seed+2).
func classifierInputs(dt tensor.Dtype, shape []int, seed uint64) (g *G.ExprGraph, x, y *G.Node, rng *rand.Rand) {
	g = G.NewGraph()
	batch := shape[0]
	x = G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName("x"), G.WithValue(fill(dt, shape, seed)))
	y = G.NewMatrix(g, dt, G.WithShape(batch, 10), G.WithName("y"), G.WithValue(onehotValue(dt, batch, 10, seed+1)))
	return g, x, y, rand.New(rand.NewPCG(seed+2, seed+2))
}

// forwarder is a model of package models whose Forward takes one input.
type forwarder interface {
	Forward(x *G.Node) (*G.Node, error)
	Params() []param.Param
}

// classifierOn makes the classifier of m (or the error building it) on
// the input x and targets y of g.
func classifierOn[M forwarder](g *G.ExprGraph, x, y *G.Node, m M, err error) (*model, error) {
	if err != nil {
		return nil, err
	}
	logits, err := m.Forward(x)
	return classifier(g, []*G.Node{x, y}, logits, err, m.Params())
}

func modelCases() []modelCase {
	return []modelCase{
		{"ffn", func(dt tensor.Dtype) (*model, error) {
			g, x, y, rng := classifierInputs(dt, []int{5, 24}, 1)
			m, err := models.NewFFN(g, models.FFNConfig{In: 24, Hidden: 16, Classes: 10, Depth: 3, Bias: true}, dt, rng)
			return classifierOn(g, x, y, m, err)
		}},
		{"vit", func(dt tensor.Dtype) (*model, error) {
			cfg := models.ViTConfig{Image: 8, Patch: 4, Channels: 1, Dim: 16, Depth: 2, Heads: 2, MLP: 12, Classes: 10, Dropout: 0.2}
			g, x, y, rng := classifierInputs(dt, []int{3, cfg.Tokens(), cfg.PatchDim()}, 4)
			m, err := models.NewViT(g, cfg, dt, rng)
			if err != nil {
				return nil, err
			}
			logits, err := m.Forward(x, true)
			c, err := classifier(g, append([]*G.Node{x, y}, m.Drop.Masks()...), logits, err, m.Params())
			if c != nil {
				c.masks = m.FillMasks
			}
			return c, err
		}},
		{"cnn", func(dt tensor.Dtype) (*model, error) {
			g, x, y, rng := classifierInputs(dt, []int{3, 2, 8, 7}, 12)
			m, err := models.NewCNN(g, models.CNNConfig{InChannels: 2, Height: 8, Width: 7, Channels: 3, Depth: 2, Classes: 10, Bias: true}, dt, rng)
			return classifierOn(g, x, y, m, err)
		}},
		{"rnn", func(dt tensor.Dtype) (*model, error) {
			// 2-channel images read row by row, the recurrent weight on O(6).
			g, x, y, rng := classifierInputs(dt, []int{3, 32}, 15)
			m, err := models.NewRNN(g, models.RNNConfig{In: 8, Hidden: 6, Steps: 4, Classes: 10, Channels: 2}, dt, rng)
			return classifierOn(g, x, y, m, err)
		}},
		{"custom", func(dt tensor.Dtype) (*model, error) {
			// Only Gorgonia ops: a Stiefel weight, a softmax attention-like
			// mixing, a broadcast bias, a mean squared loss through LogSoftMax.
			g := G.NewGraph()
			const batch, in, hid = 4, 9, 6
			x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(fill(dt, []int{batch, in}, 7)))
			y := G.NewMatrix(g, dt, G.WithShape(batch, hid), G.WithName("y"), G.WithValue(onehotValue(dt, batch, hid, 8)))
			st, _ := manifold.NewStiefel[float64](in, hid)
			w0 := make([]float64, in*hid)
			_ = st.Random(w0, rand.New(rand.NewPCG(9, 9)))
			w := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("W"), G.WithValue(testval.Tensor(dt, []int{in, hid}, w0)))
			b := G.NewMatrix(g, dt, G.WithShape(1, hid), G.WithName("b"), G.WithValue(fill(dt, []int{1, hid}, 10)))
			v := G.NewMatrix(g, dt, G.WithShape(hid, hid), G.WithName("V"), G.WithValue(fill(dt, []int{hid, hid}, 11)))
			h := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
			a := G.Must(G.SoftMax(G.Must(G.Mul(h, G.Must(G.Transpose(h))))))
			z := G.Must(G.Tanh(G.Must(G.Mul(G.Must(G.Mul(a, h)), v))))
			ls := G.Must(G.LogSoftMax(z))
			loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(ls, y))))))
			return &model{g: g, inputs: []*G.Node{x, y}, logits: z, loss: loss, params: []param.Param{param.OnStiefel(w), param.Plain(b), param.Plain(v)}}, nil
		}},
	}
}

// groups returns a constrained group c and the rest r.
func groups(c, r optim.Group) []optim.Group {
	c.Select = optim.Param.Constrained
	return []optim.Group{c, r}
}

func solverConfigs() map[string][]optim.Group {
	return map[string][]optim.Group{
		"rsdm-p+sgd":           groups(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 5, Seed: 1}}, optim.Group{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1}),
		"rsdm-o+adam":          groups(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 5, Sampling: optim.Orthogonal, Seed: 1}}, optim.Group{Rule: optim.AdamConfig{}, LR: 0.01}),
		"rsdm-blocks":          groups(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Sampling: optim.Blocks, Seed: 1}}, optim.Group{LR: 0.1}),
		"rsdm-momentum":        groups(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Momentum: 0.5, InnerSteps: 2, Seed: 1}}, optim.Group{LR: 0.1}),
		"rgd-momentum+adam":    groups(optim.Group{Rule: optim.RGDConfig{Momentum: 0.9}, LR: 0.2}, optim.Group{Rule: optim.AdamConfig{}, LR: 0.01}),
		"radam+adamw+schedule": groups(optim.Group{Rule: optim.RiemannianAdamConfig{}, LR: 0.05, Schedule: optim.Cosine{Steps: 4}}, optim.Group{Rule: optim.AdamWConfig{}, LR: 0.01}),
	}
}

// TestModelsAgree checks the FFN, a small ViT with dropout, a CNN, an RNN
// and a custom model: the loss, the logits, every gradient and every parameter after two
// steps of each optimizer agree between the tape machine with optim.Solver
// and a compiled program with its Solver (float64 to 1e-10, float32 to
// 1e-5, relative).
func TestModelsAgree(t *testing.T) {
	be := testBackends(t)[1] // the backend that splits every loop
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			for name, cfg := range solverConfigs() {
				t.Run(fmt.Sprintf("%s/%v/%s", mc.name, dt, name), func(t *testing.T) {
					compareModel(t, be, mc, dt, cfg, false, tolerance(dt))
				})
				if _, rsdm := cfg[0].Rule.(optim.RSDMConfig); rsdm {
					t.Run(fmt.Sprintf("%s/%v/%s/factored", mc.name, dt, name), func(t *testing.T) {
						compareModel(t, be, mc, dt, cfg, true, tolerance(dt))
					})
				}
			}
		}
	}
}

// compareModel runs mc on the tape machine with optim's Solver and as a
// program on be with its Solver, two steps, and checks that they agree to
// tol (agree); with factor the program leaves the gradients of thin-product
// weights factored (Config.Groups). It returns agree's largest
// difference.
func compareModel(t *testing.T, be backend.Backend, mc modelCase, dt tensor.Dtype, cfg []optim.Group, factor bool, tol float64) float64 {
	build := func() (*model, error) { return mc.build(dt) }
	ref, got := newSides(t, mc.name, build, onTape(sideConfig{groups: cfg}), compiled(be, sideConfig{groups: cfg, ask: factor}))
	worst := agree(t, mc.name, ref, got, 2, tol)
	factored := 0
	for _, p := range got.(*programSide).prog.Params() {
		if p.GradK > 0 {
			factored++
		}
	}
	if factor && mc.name == "ffn" && factored == 0 {
		t.Error("RSDM's groups left no FFN gradient factored")
	}
	return worst
}

// TestFactorGrads checks the factoring phase on the FFN: with
// RSDM's groups every gradient it leaves factored loses the product that
// formed it and its check, which one check of the factors replaces, and
// nothing else changes (the same kernels otherwise, in the same order).
func TestFactorGrads(t *testing.T) {
	be := testBackends(t)[0]
	compile := func(r int) *Program {
		m, err := modelCases()[0].build(tensor.Float64) // the FFN
		if err != nil {
			t.Fatal(err)
		}
		if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
			t.Fatal(err)
		}
		if r == 0 {
			return m.compile(t, be, Config{})
		}
		return m.compile(t, be, Config{Groups: []optim.Group{{Rule: optim.RSDMConfig{SubmanifoldSize: r}}}})
	}
	plain, factored := compile(0), compile(5)
	var k int // the number of gradients left factored
	for _, p := range factored.Params() {
		if p.GradK > 0 {
			k++
		}
	}
	if k == 0 {
		t.Fatal("RSDM's groups left no FFN gradient factored")
	}
	got, want := kernelTypes(factored), kernelTypes(plain)
	if got["gemm"] != want["gemm"]-k {
		t.Errorf("%d products factored, %d products, %d without: want %d fewer", k, got["gemm"], want["gemm"], k)
	}
	if len(factored.kernels) != len(plain.kernels)-k {
		t.Errorf("%d gradients factored: %d kernels, %d without, want %d fewer", k, len(factored.kernels), len(plain.kernels), k)
	}
	// The kernels that are not a factored gradient's are the same, in the
	// same order.
	var a, b []string
	for _, kern := range plain.kernels {
		a = append(a, backend.Name(kern))
	}
	for _, kern := range factored.kernels {
		b = append(b, backend.Name(kern))
	}
	for i, j := 0, 0; i < len(a) && j < len(b); i, j = i+1, j+1 {
		if a[i] != b[j] {
			// a factored gradient: its product and check became one check
			if a[i] != "gemm" || b[j] != "check-product" || i+1 >= len(a) || !isCheck(a[i+1]) {
				t.Fatalf("kernel %d: %s, without factoring %s (then %v)", j, b[j], a[i], a[i+1:min(i+3, len(a))])
			}
			i++
		}
	}
}

func isCheck(name string) bool { return name == "check-product" || name == "check-finite" }

// TestGroupsAskForFactors checks that Config.Groups leaves the FFN's
// gradients factored where RSDM's r gains, on every CPU backend: a
// constrained weight's (a linear layer's, a product over the batch),
// n x p, where r (p + r) < n p, so fc1 alone at r = 12 and every one at
// r = 5; and nowhere for an r too large to gain, for a rule that steps
// whole gradients, for two constrained groups of different r, or on a
// device (the CUDA backend on the host model, where cgo is on).
func TestGroupsAskForFactors(t *testing.T) {
	rsdm := func(r int) optim.Group {
		return optim.Group{LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: r, Seed: 1}}
	}
	ffn := func() *model {
		m, err := modelCases()[0].build(tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	factoredOf := func(be backend.Backend, cfg Config) []int {
		m := ffn()
		if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
			t.Fatal(err)
		}
		var ks []int
		for _, p := range m.compile(t, be, cfg).Params() {
			ks = append(ks, p.GradK)
		}
		return ks
	}
	// gains returns each parameter's factors' K (the batch) where r gains.
	gains := func(be backend.Backend, r int) []int {
		m := ffn()
		_, onCPU := be.(*cpu.Backend)
		ks := make([]int, len(m.params))
		for i, p := range m.params {
			if s := p.Node.Shape(); onCPU && p.Constrained() && r*(s[1]+r) < s[0]*s[1] {
				ks[i] = m.inputs[0].Shape()[0]
			}
		}
		return ks
	}
	rest := optim.Group{LR: 0.1}
	for bi, be := range testBackends(t) {
		none := make([]int, len(ffn().params))
		for _, c := range []struct {
			name   string
			groups []optim.Group
			want   []int
		}{
			{"rsdm r=5", groups(rsdm(5), rest), gains(be, 5)},
			{"rsdm r=12", groups(rsdm(12), rest), gains(be, 12)},
			{"rsdm of an r no product is cheaper for", groups(rsdm(1000), rest), none},
			{"rgd", groups(optim.Group{LR: 0.1, Rule: optim.RGDConfig{}}, rest), none},
			{"two r", []optim.Group{{Select: func(p optim.Param) bool { return p.Constrained() && p.Name == "fc1.W" }, LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 5}}, groups(rsdm(4), rest)[0], rest}, none},
			{"no groups", nil, none},
		} {
			if got := factoredOf(be, Config{Groups: c.groups}); !slices.Equal(got, c.want) {
				t.Errorf("backend %d (%s), %s: factors of each gradient %v, want %v", bi, be.Name(), c.name, got, c.want)
			}
		}
	}
	if !slices.ContainsFunc(gains(testBackends(t)[0], 12), func(k int) bool { return k > 0 }) || slices.Equal(gains(testBackends(t)[0], 5), gains(testBackends(t)[0], 12)) {
		t.Fatal("the FFN's shapes no longer tell r = 5 from r = 12")
	}
}
