package models_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// counts returns the number of parameter tensors, of scalars in them, and
// of Stiefel-constrained weights.
func counts(ps []param.Param) (tensors, scalars, stiefel int) {
	for _, p := range ps {
		scalars += p.Node.Shape().TotalSize()
		if p.Constrained() {
			stiefel++
		}
	}
	return len(ps), scalars, stiefel
}

// An orthogonal feed-forward network, 16 -> 8 -> 8 -> 3, trained one step:
// RSDM on its two column-orthonormal weights, SGD on the rest.
func ExampleNewFFN() {
	const batch = 10
	cfg := models.FFNConfig{In: 16, Hidden: 8, Classes: 3, Depth: 2, Bias: true}
	rng := rand.New(rand.NewPCG(1, 1))
	g := G.NewGraph()
	m, err := models.NewFFN(g, cfg, tensor.Float32, rng)
	if err != nil {
		log.Fatal(err)
	}
	x, err := nn.NewTensor(g, "x", tensor.Float32, []int{batch, cfg.In}, func(int) float64 { return rng.NormFloat64() })
	if err != nil {
		log.Fatal(err)
	}
	labels := make([]int, batch)
	for i := range labels {
		labels[i] = i % cfg.Classes
	}
	onehot := make([]float32, batch*cfg.Classes)
	if err := nn.OneHot(onehot, labels, cfg.Classes); err != nil {
		log.Fatal(err)
	}
	y, err := nn.NewTensor(g, "y", tensor.Float32, []int{batch, cfg.Classes}, func(i int) float64 { return float64(onehot[i]) })
	if err != nil {
		log.Fatal(err)
	}
	logits, err := m.Forward(x)
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.CrossEntropy(logits, y)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := G.Grad(loss, m.Nodes()...); err != nil {
		log.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(m.Nodes()...))
	defer vm.Close()
	solver, err := paramopt.NewSolver(m.Params(), []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{LR: 0.05},
	}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	l := float64(loss.Value().Data().(float32))
	if err := solver.Step(); err != nil {
		log.Fatal(err)
	}

	tensors, scalars, stiefel := counts(m.Params())
	fmt.Printf("%d parameter tensors, %d scalars, %d on the Stiefel manifold\n", tensors, scalars, stiefel)
	fmt.Println("logits:", logits.Shape())
	fmt.Println("loss finite:", !math.IsNaN(l) && !math.IsInf(l, 0))
	for _, p := range param.Constrained(m.Params()) {
		n, k := p.Node.Shape()[0], p.Node.Shape()[1]
		st, _ := manifold.NewStiefel[float32](n, k)
		fmt.Printf("%s %v after the step: ||W^T W - I||_F < 1e-5: %v\n", p.Name(), p.Node.Shape(), st.Feasibility(p.Node.Value().Data().([]float32)) < 1e-5)
	}
	// Output:
	// 6 parameter tensors, 235 scalars, 2 on the Stiefel manifold
	// logits: (10, 3)
	// loss finite: true
	// fc1.W (16, 8) after the step: ||W^T W - I||_F < 1e-5: true
	// fc2.W (8, 8) after the step: ||W^T W - I||_F < 1e-5: true
}

// A small orthogonal vision transformer: 8 x 8 RGB images cut into four 4 x 4
// patches, two blocks whose attention projections Wq, Wk, Wv are on the
// Stiefel manifold. A training graph gets one dropout mask per dropout
// site; an evaluation graph none.
func ExampleNewViT() {
	const batch = 5
	cfg := models.ViTConfig{Image: 8, Patch: 4, Channels: 3, Dim: 16, Depth: 2, Heads: 2, MLP: 8, Classes: 10, Dropout: 0.1}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, train := range []bool{true, false} {
		g := G.NewGraph()
		m, err := models.NewViT(g, cfg, tensor.Float32, rng)
		if err != nil {
			log.Fatal(err)
		}
		x, err := nn.NewTensor(g, "x", tensor.Float32, []int{batch, cfg.Tokens(), cfg.PatchDim()}, func(int) float64 { return rng.NormFloat64() })
		if err != nil {
			log.Fatal(err)
		}
		logits, err := m.Forward(x, train)
		if err != nil {
			log.Fatal(err)
		}
		m.FillMasks(rand.New(rand.NewPCG(1, 3)))
		vm := G.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		finite := true
		for _, v := range logits.Value().Data().([]float32) {
			finite = finite && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
		}
		vm.Close()
		tensors, scalars, stiefel := counts(m.Params())
		fmt.Printf("train %v: input %v, logits %v, finite %v, %d dropout masks\n", train, x.Shape(), logits.Shape(), finite, len(m.Drop.Masks()))
		fmt.Printf("  %d parameter tensors, %d scalars, %d on the Stiefel manifold\n", tensors, scalars, stiefel)
	}
	// Output:
	// train true: input (5, 4, 48), logits (5, 10), finite true, 7 dropout masks
	//   34 parameter tensors, 3850 scalars, 6 on the Stiefel manifold
	// train false: input (5, 4, 48), logits (5, 10), finite true, 0 dropout masks
	//   34 parameter tensors, 3850 scalars, 6 on the Stiefel manifold
}

// Patchify cuts a channel-major image into patches, row by row of patches,
// each patch channel-major: here one 4 x 4 channel into four 2 x 2 patches.
func ExamplePatchify() {
	img := make([]float32, 16)
	for i := range img {
		img[i] = float32(i)
	}
	dst := make([]float32, 16)
	models.Patchify(dst, img, 1, 4, 2)
	for k := 0; k < 4; k++ {
		fmt.Println(dst[4*k : 4*k+4])
	}
	// Output:
	// [0 1 4 5]
	// [2 3 6 7]
	// [8 9 12 13]
	// [10 11 14 15]
}

// Share lets a network built on a second graph, here one for evaluation on a
// larger batch, use the trained network's tensors without copying them.
func ExampleShare() {
	cfg := models.FFNConfig{In: 6, Hidden: 4, Classes: 2, Depth: 1}
	rng := rand.New(rand.NewPCG(1, 4))
	train, err := models.NewFFN(G.NewGraph(), cfg, tensor.Float64, rng)
	if err != nil {
		log.Fatal(err)
	}
	eval, err := models.NewFFN(G.NewGraph(), cfg, tensor.Float64, rng)
	if err != nil {
		log.Fatal(err)
	}
	if err := models.Share(eval.Nodes(), train.Nodes()); err != nil {
		log.Fatal(err)
	}
	train.Layers[0].W.Node.Value().Data().([]float64)[0] = 42 // an optimizer step, say
	fmt.Println("eval sees the update:", eval.Layers[0].W.Node.Value().Data().([]float64)[0])

	wide, err := models.NewFFN(G.NewGraph(), models.FFNConfig{In: 6, Hidden: 5, Classes: 2, Depth: 1}, tensor.Float64, rng)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(models.Share(wide.Nodes(), train.Nodes()))
	// Output:
	// eval sees the update: 42
	// models: parameter fc1.W is (6, 5) float64, its source fc1.W is (6, 4) float64
}
