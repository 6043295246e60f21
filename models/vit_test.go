package models

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/gradcheck"
	"github.com/orthonet/orthonet/param"
)

func TestPatchify(t *testing.T) {
	// 2 channels of a 4x4 image, patches of 2: patch (0,1) of channel 1
	// holds rows 0-1, columns 2-3 of the second plane.
	img := make([]float32, 32)
	for i := range img {
		img[i] = float32(i)
	}
	dst := make([]float32, 32)
	Patchify(dst, img, 2, 4, 2)
	patch1 := dst[8:16] // second patch: channel 0 then channel 1
	want := []float32{2, 3, 6, 7, 18, 19, 22, 23}
	for i, v := range want {
		if patch1[i] != v {
			t.Fatalf("patch 1 = %v, want %v", patch1, want)
		}
	}
}

// trainingViT builds cfg's ViT of dtype dt on a new graph, its weights
// drawn from rng, and its training-mode logits for a batch of batch
// Gaussian inputs x (batch x tokens x patch features).
func trainingViT(t *testing.T, cfg ViTConfig, dt tensor.Dtype, rng *rand.Rand, batch int) (g *G.ExprGraph, m *ViT, x, logits *G.Node) {
	t.Helper()
	g = G.NewGraph()
	m, err := NewViT(g, cfg, dt, rng)
	if err != nil {
		t.Fatal(err)
	}
	x = G.NewTensor(g, dt, 3, G.WithShape(batch, cfg.Tokens(), cfg.PatchDim()), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
	if logits, err = m.Forward(x, true); err != nil {
		t.Fatal(err)
	}
	return g, m, x, logits
}

func TestViT(t *testing.T) {
	cfg := ViTConfig{Image: 8, Patch: 4, Channels: 3, Dim: 16, Depth: 2, Heads: 2, MLP: 8, Classes: 10, Dropout: 0.1}
	rng := rand.New(rand.NewPCG(1, 1))
	_, m, _, logits := trainingViT(t, cfg, tensor.Float32, rng, 5)
	if !logits.Shape().Eq(tensor.Shape{5, 10}) {
		t.Errorf("logits %v, want (5, 10)", logits.Shape())
	}
	if len(m.Drop.Masks()) != 1+3*cfg.Depth {
		t.Errorf("%d dropout masks, want %d", len(m.Drop.Masks()), 1+3*cfg.Depth)
	}
	marked := 0
	for _, p := range m.Params() {
		if p.Constrained() {
			marked++
		}
	}
	if marked != 3*cfg.Depth || len(param.Constrained(m.Params())) != 3*cfg.Depth || len(m.Params()) != len(m.Nodes()) {
		t.Errorf("%d marked, %d orthogonal, %d params, %d nodes", marked, len(param.Constrained(m.Params())), len(m.Params()), len(m.Nodes()))
	}
	// A copy on an evaluation graph shares the parameters.
	g2 := G.NewGraph()
	m2, err := NewViT(g2, cfg, tensor.Float32, rng)
	if err != nil {
		t.Fatal(err)
	}
	if err := Share(m2.Nodes(), m.Nodes()); err != nil {
		t.Fatal(err)
	}
	param.Nodes(param.Constrained(m.Params()))[0].Value().Data().([]float32)[3] = 7
	if param.Nodes(param.Constrained(m2.Params()))[0].Value().Data().([]float32)[3] != 7 {
		t.Error("the shared ViT does not see the original's weights")
	}
	// The same seed gives the same parameters, bit for bit; another seed not.
	init := func(seed uint64) []float32 {
		m, err := NewViT(G.NewGraph(), cfg, tensor.Float32, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		var all []float32
		for _, n := range m.Nodes() {
			all = append(all, n.Value().Data().([]float32)...)
		}
		return all
	}
	a, b, c := init(3), init(3), init(4)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, parameter entry %d differs", i)
		}
	}
	if a[len(a)/2] == c[len(c)/2] {
		t.Error("another seed gave the same parameters")
	}
}

// TestViTGradient checks the gradient of a tiny float64 ViT (patch
// embedding, class token, position embedding, attention, MLP, norms, head)
// against finite differences, with a fixed dropout mask.
func TestViTGradient(t *testing.T) {
	cfg := ViTConfig{Image: 4, Patch: 2, Channels: 1, Dim: 4, Depth: 1, Heads: 2, MLP: 3, Classes: 3, Dropout: 0.2}
	g, m, x, logits := trainingViT(t, cfg, tensor.Float64, rand.New(rand.NewPCG(3, 3)), 2)
	m.FillMasks(rand.New(rand.NewPCG(4, 4)))
	c := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("c"), G.WithInit(G.Gaussian(0, 1)))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Tanh(logits)), c))))
	wrt := append(G.Nodes{x}, m.Nodes()...)
	if err := gradcheck.Check(g, loss, 1e-6, 1e-5, wrt...); err != nil {
		t.Fatal(err)
	}
}
