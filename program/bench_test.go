package program

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// paperFFN builds the paper's FFN (1024 inputs, five 1024-wide Stiefel
// layers, 10 classes) for a batch, with its loss and gradients.
func paperFFN(tb testing.TB, batch, width int) *model {
	g := G.NewGraph()
	dt := tensor.Float32
	x := G.NewMatrix(g, dt, G.WithShape(batch, width), G.WithName("x"), G.WithValue(fill(dt, []int{batch, width}, 1)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, 10), G.WithName("y"), G.WithValue(onehotValue(dt, batch, 10, 2)))
	m, err := models.NewFFN(g, models.FFNConfig{In: width, Hidden: width, Classes: 10, Depth: 5, Bias: true}, dt, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		tb.Fatal(err)
	}
	logits := G.Must(m.Forward(x))
	loss := G.Must(nn.CrossEntropy(logits, y))
	if _, err := G.Grad(loss, m.Nodes()...); err != nil {
		tb.Fatal(err)
	}
	return &model{g: g, inputs: []*G.Node{x, y}, logits: logits, loss: loss, params: m.Params()}
}

// BenchmarkFFN times one forward and backward pass of the paper's FFN
// (batch 16, float32) on Gorgonia's tape machine and as a compiled program
// on the CPU backend: with the default threads, with one (no loop split
// across goroutines), and leaving the Stiefel weights' gradients factored
// as cmd/train does for RSDM (Config.FactorForRSDM).
func BenchmarkFFN(b *testing.B) {
	b.Run("tape", func(b *testing.B) {
		m := paperFFN(b, 16, 1024)
		vm := G.NewTapeMachine(m.g, G.BindDualValues(param.Nodes(m.params)...))
		defer vm.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := vm.RunAll(); err != nil {
				b.Fatal(err)
			}
			vm.Reset()
		}
	})
	for _, v := range []struct {
		name    string
		threads int
		factor  bool
	}{{"program", 0, false}, {"program-1thread", 1, false}, {"program-factored", 0, true}} {
		b.Run(v.name, func(b *testing.B) {
			m := paperFFN(b, 16, 1024)
			be := cpu.New(cpu.Options{Threads: v.threads})
			defer be.Close()
			p := m.compile(b, be, Config{FactorForRSDM: map[bool]int{true: 300}[v.factor]})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStepAllocs checks that a training step on a compiled program (inputs
// copied in, forward and backward, the finite check, an RSDM and SGD step,
// the loss read out) allocates nothing after the first.
func TestStepAllocs(t *testing.T) {
	m := paperFFN(t, 4, 32)
	be := cpu.New(cpu.Options{Threads: 2, Grain: 64})
	defer be.Close()
	p := m.compile(t, be, Config{})
	s, err := NewSolver(p, groups(optim.Group{LR: 0.1, Schedule: optim.Cosine{Steps: 100}, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Seed: 1}}, optim.Group{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1}), optim.Options{ClipNorm: 1})
	if err != nil {
		t.Fatal(err)
	}
	var x any = m.inputs[0].Value().Data().([]float32)
	var loss any = make([]float32, 1)
	step := func() {
		if err := p.SetInput(m.inputs[0], x); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		if err := p.Read(m.loss, loss); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Errorf("%v allocations per training step, want 0", n)
	}
}
