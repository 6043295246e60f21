package training

import (
	"context"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/program"
)

// The package's loop against a hand-written loop on the same program: the
// paper's FFN (5 Stiefel layers of 1024, RSDM-P r = 300, SGD on the rest),
// batch 16. Compare BenchmarkLoop/package with BenchmarkLoop/hand.

const benchBatch = 16

// benchFFN builds the paper's FFN with its cross-entropy loss.
func benchFFN(b *testing.B) Model {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(benchBatch, 1024), G.WithName("x"), G.WithInit(G.Zeroes()))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(benchBatch, 10), G.WithName("y"), G.WithInit(G.Zeroes()))
	ffn, err := models.NewFFN(g, models.FFNConfig{In: 1024, Hidden: 1024, Classes: 10, Depth: 5, Bias: true}, tensor.Float32, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		b.Fatal(err)
	}
	logits := G.Must(ffn.Forward(x))
	loss := G.Must(nn.CrossEntropy(logits, y))
	if _, err := G.Grad(loss, ffn.Nodes()...); err != nil {
		b.Fatal(err)
	}
	return Model{Loss: loss, Logits: logits, Input: x, Labels: y, Params: ffn.Params()}
}

// benchGroups are the paper's FFN settings.
func benchGroups() []optim.Group {
	return []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 300, Seed: 1}},
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.05},
	}
}

// benchSet is n random examples of 1024 values in 10 classes.
func benchSet(n int) *data.Set {
	rng := rand.New(rand.NewPCG(3, 4))
	s := &data.Set{Name: "random", N: n, C: 1, H: 32, W: 32, Classes: 10, X: make([]float32, n*1024), Y: make([]uint8, n)}
	for i := range s.X {
		s.X[i] = float32(rng.NormFloat64())
	}
	for i := range s.Y {
		s.Y[i] = uint8(rng.IntN(10))
	}
	return s
}

func BenchmarkLoop(b *testing.B) {
	b.Run("package", func(b *testing.B) {
		set := benchSet(benchBatch * (b.N + 2))
		c := Config{Train: set, Batch: benchBatch, MaxSteps: b.N + 1, Seed: 1, Device: "cpu", EvalEvery: -1, Out: b.TempDir(), Groups: benchGroups()}
		c.Callbacks.OnStep = func(s StepInfo) error {
			switch s.Step {
			case 1: // the first step sets up buffers: time the rest
				b.ResetTimer()
			case b.N + 1:
				b.StopTimer()
			}
			return nil
		}
		if _, err := Run(context.Background(), benchFFN(b), c); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("hand", func(b *testing.B) {
		m := benchFFN(b)
		set := benchSet(benchBatch * (b.N + 2))
		prog, err := program.Compile(m.Loss.Graph(), program.Config{Backend: cpu.New(cpu.Options{}), Outputs: []*G.Node{m.Loss, m.Logits},
			Params: m.Params, Inputs: []*G.Node{m.Input, m.Labels}, Groups: benchGroups(), Accuracy: program.Accuracy{Logits: m.Logits, Targets: m.Labels}})
		if err != nil {
			b.Fatal(err)
		}
		defer prog.Close()
		s, err := program.NewSolver(prog, benchGroups(), optim.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		loader, err := data.NewLoader(set, benchBatch, 1)
		if err != nil {
			b.Fatal(err)
		}
		x, labels, onehot, loss := make([]float32, benchBatch*1024), make([]int, benchBatch), make([]float32, benchBatch*10), make([]float32, 1)
		var lossAny any = loss
		step := func(k int) {
			if _, err := loader.Next(x, labels); err != nil {
				b.Fatal(err)
			}
			if err := nn.OneHot(onehot, labels, 10); err != nil {
				b.Fatal(err)
			}
			if err := prog.SetStep(k); err != nil {
				b.Fatal(err)
			}
			if err := prog.SetInput(m.Input, x); err != nil {
				b.Fatal(err)
			}
			if err := prog.SetInput(m.Labels, onehot); err != nil {
				b.Fatal(err)
			}
			if err := prog.Run(); err != nil {
				b.Fatal(err)
			}
			if _, err := prog.Collect(program.Read{Node: m.Loss, Dst: lossAny}); err != nil {
				b.Fatal(err)
			}
			if err := s.Step(); err != nil {
				b.Fatal(err)
			}
		}
		step(0)
		b.ResetTimer()
		for k := range b.N {
			step(k + 1)
		}
	})
}
