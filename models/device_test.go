package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// deviceModels are the graphs whose float32 numbers must agree with their
// float64 ones: the paper's FFN, a small ViT, a small RNN and a model of a
// user's own.
var deviceModels = []string{"ffn", "vit", "rnn", "custom"}

// deviceFamilies are the families deviceRun builds through build: each
// one's configuration and input shape, the batch first.
var deviceFamilies = map[string]struct {
	cfg   any
	input []int
}{
	"ffn": {FFNConfig{In: 64, Hidden: 32, Classes: 10, Depth: 3, Bias: true}, []int{8, 64}},
	"vit": {ViTConfig{Image: 16, Patch: 4, Channels: 3, Dim: 32, Depth: 2, Heads: 4, MLP: 64, Classes: 10}, []int{4, 16, 48}}, // (batch, Tokens, PatchDim)
	"rnn": {RNNConfig{In: 6, Hidden: 8, Steps: 5, Classes: 10, Channels: 3}, []int{8, 30}},
}

// deviceModel builds model in dtype dt on g, its weights and then its
// input drawn from rng, and returns its logits (a ViT's in training mode)
// and its parameters.
func deviceModel(g *G.ExprGraph, model string, dt tensor.Dtype, rng *rand.Rand) (*G.Node, []param.Param, error) {
	input := func(shape ...int) *G.Node {
		return G.Must(nn.NewTensor(g, "x", dt, shape, func(int) float64 { return rng.NormFloat64() }))
	}
	if model == "custom" {
		return customModel(g, dt, rng, input)
	}
	f, ok := deviceFamilies[model]
	if !ok {
		return nil, nil, fmt.Errorf("unknown model %q", model)
	}
	m, err := build(g, f.cfg, dt, rng)
	if err != nil {
		return nil, nil, err
	}
	logits, err := forward(m, input(f.input...), true)
	if err != nil {
		return nil, nil, err
	}
	return logits, m.Params(), nil
}

// customModel builds a model of a user's own from Gorgonia's ops,
// tanh(x W) V with W on the Stiefel manifold, for a batch of 8 inputs
// drawn by input, and returns its logits and parameters.
func customModel(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand, input func(shape ...int) *G.Node) (*G.Node, []param.Param, error) {
	w, err := nn.NewTensor(g, "W", dt, []int{20, 6}, func(int) float64 { return rng.NormFloat64() })
	if err != nil {
		return nil, nil, err
	}
	if err := orthonormalize(w); err != nil {
		return nil, nil, err
	}
	v, err := nn.NewTensor(g, "V", dt, []int{6, 10}, func(int) float64 { return rng.NormFloat64() / 3 })
	if err != nil {
		return nil, nil, err
	}
	h, err := G.Mul(input(8, 20), w)
	if err != nil {
		return nil, nil, err
	}
	if h, err = G.Tanh(h); err != nil {
		return nil, nil, err
	}
	logits, err := G.Mul(h, v)
	if err != nil {
		return nil, nil, err
	}
	return logits, []param.Param{param.OnStiefel(w), param.Plain(v)}, nil
}

// deviceRun builds one model in dtype dt from a fixed seed, runs forward and
// backward on a fixed batch and takes one solver step with RSDM-P (or RGD).
// It returns the loss, logits, gradients and updated weights by name.
func deviceRun(model string, dt tensor.Dtype, method optim.Rule) (map[string][]float64, error) {
	rng := rand.New(rand.NewPCG(11, 12))
	g := G.NewGraph()
	logits, params, err := deviceModel(g, model, dt, rng)
	if err != nil {
		return nil, err
	}
	batch := logits.Shape()[0]
	labels := make([]float64, batch*10)
	for i := 0; i < batch; i++ {
		labels[i*10+rng.IntN(10)] = 1
	}
	y := G.NewMatrix(g, dt, G.WithShape(batch, 10), G.WithName("y"), G.WithValue(testval.Tensor(dt, []int{batch, 10}, labels)))
	loss, err := nn.CrossEntropy(logits, y)
	if err != nil {
		return nil, err
	}
	nodes := param.Nodes(params)
	if _, err := G.Grad(loss, nodes...); err != nil {
		return nil, err
	}
	var lossV, logitV G.Value
	G.Read(loss, &lossV)
	G.Read(logits, &logitV)
	vm := G.NewTapeMachine(g, G.BindDualValues(nodes...))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, err
	}
	out := map[string][]float64{"loss": testval.Floats(lossV), "logits": testval.Floats(logitV)}
	for _, n := range nodes {
		gr, err := n.Grad()
		if err != nil {
			return nil, err
		}
		out["grad."+n.Name()] = testval.Floats(gr)
	}
	s, err := paramopt.NewSolver(params, []optim.Group{
		{Select: optim.Param.Constrained, Rule: method, LR: 0.5},
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1},
	}, optim.Options{})
	if err != nil {
		return nil, err
	}
	if err := s.Step(); err != nil {
		return out, err // what was computed, to show where it went wrong
	}
	for _, n := range nodes {
		out["step."+n.Name()] = testval.Floats(n.Value())
	}
	return out, nil
}

// orthonormalize replaces a weight by the Q factor of its thin QR, taken
// in float64 whatever the weight's element type.
func orthonormalize(w *G.Node) error {
	d := w.Value().(*tensor.Dense)
	r, c := d.Shape()[0], d.Shape()[1]
	v := testval.Floats(d)
	st, err := manifold.NewStiefel[float64](r, c)
	if err != nil {
		return err
	}
	if err := st.Orthonormalize(v); err != nil {
		return err
	}
	return G.Let(w, testval.Tensor(d.Dtype(), []int{r, c}, v))
}

// deviceTol is the float32 tolerance on each kind of result: values and
// weights carry rounding of one pass, gradients of a forward and a backward
// pass summed in another order.
func deviceTol(name string) float64 {
	switch {
	case name == "loss" || name == "logits":
		return 1e-4
	case len(name) > 5 && name[:5] == "grad.":
		return 1e-3
	}
	return 1e-4
}

// compareDevice checks got against want, name by name.
func compareDevice(t *testing.T, label string, got, want map[string][]float64) {
	t.Helper()
	var names []string
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(got) != len(want) {
		t.Errorf("%s: %d results, want %d", label, len(got), len(want))
	}
	worst := 0.0
	for _, k := range names {
		g, ok := got[k]
		if !ok || len(g) != len(want[k]) {
			t.Errorf("%s: %s: missing or %d values, want %d", label, k, len(g), len(want[k]))
			continue
		}
		e := testval.NormRel(g, want[k])
		worst = math.Max(worst, e)
		if !(e <= deviceTol(k)) {
			t.Errorf("%s: %s differs by %.3g (relative), tolerance %.0g", label, k, e, deviceTol(k))
		}
	}
	t.Logf("%s: %d results, largest relative difference %.3g", label, len(names), worst)
}

// TestDeviceAgreement holds one graph's numbers fixed across float types:
// the float32 forward values, gradients and one solver step of each model
// against float64's.
func TestDeviceAgreement(t *testing.T) {
	for _, model := range deviceModels {
		for _, method := range []optim.Rule{optim.RSDMConfig{SubmanifoldSize: 6, Seed: 3}, optim.RGDConfig{}} {
			label := fmt.Sprintf("%s/%v", model, method)
			got, err := deviceRun(model, tensor.Float32, method)
			if err != nil {
				if got == nil {
					t.Fatalf("%s: %v", label, err)
				}
				t.Errorf("%s: %v", label, err)
			}
			want, err := deviceRun(model, tensor.Float64, method)
			if err != nil {
				t.Fatalf("%s float64: %v", label, err)
			}
			compareDevice(t, label+" float32 vs float64", got, want)
		}
	}
}
