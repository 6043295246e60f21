package models_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/param"
)

// A small orthogonal FFN: its Stiefel weights are found from its
// parameters' markings, and its logits computed on Gorgonia's tape machine.
func ExampleNewFFN() {
	const batch = 4
	g := G.NewGraph()
	ffn, err := models.NewFFN(g, models.FFNConfig{In: 16, Hidden: 8, Classes: 3, Depth: 2, Bias: true}, tensor.Float32, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		log.Fatal(err)
	}
	xs := make([]float32, batch*16)
	for i := range xs {
		xs[i] = float32(i%7) - 3
	}
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, 16), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(batch, 16), tensor.WithBacking(xs))))
	logits, err := ffn.Forward(x)
	if err != nil {
		log.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	ps := ffn.Params()
	fmt.Println("parameters:", len(ps))
	for _, n := range param.Constrained(ps) {
		fmt.Println("on the Stiefel manifold:", n.Name(), n.Node.Shape())
	}
	fmt.Println("logits:", logits.Shape())
	// Output:
	// parameters: 6
	// on the Stiefel manifold: fc1.W (16, 8)
	// on the Stiefel manifold: fc2.W (8, 8)
	// logits: (4, 3)
}

// A small orthogonal ViT on 8 x 8 one-channel images cut into 4 x 4
// patches; an evaluation graph without dropout shares the training graph's
// weights (models.Share), so both give the same logits.
func ExampleNewViT() {
	const batch = 2
	cfg := models.ViTConfig{Image: 8, Patch: 4, Channels: 1, Dim: 16, Depth: 1, Heads: 2, MLP: 32, Classes: 3, Dropout: 0.1}
	img := make([]float32, batch*cfg.Image*cfg.Image)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range img {
		img[i] = float32(rng.NormFloat64())
	}
	patches := make([]float32, batch*cfg.Tokens()*cfg.PatchDim())
	for b := 0; b < batch; b++ {
		per := cfg.Tokens() * cfg.PatchDim()
		models.Patchify(patches[b*per:(b+1)*per], img[b*64:(b+1)*64], cfg.Channels, cfg.Image, cfg.Patch)
	}
	build := func(seed uint64) (*models.ViT, *G.ExprGraph, *G.Node) {
		g := G.NewGraph()
		vit, err := models.NewViT(g, cfg, tensor.Float32, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			log.Fatal(err)
		}
		in := G.NewTensor(g, tensor.Float32, 3, G.WithShape(batch, cfg.Tokens(), cfg.PatchDim()), G.WithName("patches"),
			G.WithValue(tensor.New(tensor.WithShape(batch, cfg.Tokens(), cfg.PatchDim()), tensor.WithBacking(patches))))
		logits, err := vit.Forward(in, false)
		if err != nil {
			log.Fatal(err)
		}
		return vit, g, logits
	}
	logitsOf := func(g *G.ExprGraph, logits *G.Node) []float32 {
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		return append([]float32(nil), logits.Value().Data().([]float32)...)
	}
	vit, g, logits := build(1)
	eval, ge, evLogits := build(2) // other random weights, replaced by vit's
	if err := models.Share(eval.Nodes(), vit.Nodes()); err != nil {
		log.Fatal(err)
	}
	a, b := logitsOf(g, logits), logitsOf(ge, evLogits)
	same := true
	for i := range a {
		same = same && a[i] == b[i]
	}
	fmt.Println("tokens per image:", cfg.Tokens(), "of", cfg.PatchDim(), "values")
	fmt.Println("Stiefel-constrained weights:", len(param.Constrained(vit.Params())))
	fmt.Println("logits:", logits.Shape())
	fmt.Println("shared weights give the same logits:", same)
	// Output:
	// tokens per image: 4 of 16 values
	// Stiefel-constrained weights: 3
	// logits: (2, 3)
	// shared weights give the same logits: true
}
