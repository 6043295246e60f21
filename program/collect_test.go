//go:build cgo

package program_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/cudak/standin"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
)

// classifier is a one-hidden-layer classifier compiled with
// Config.Accuracy, and its Solver.
type classifier struct {
	x, y, w, v, loss, logits *G.Node
	prog                     *program.Program
	solver                   *optim.Solver
	xs, ys                   []float32
	labels                   []int
}

const clBatch, clIn, clHidden, clClasses = 24, 12, 8, 5

func newClassifier(t *testing.T, be backend.Backend) *classifier {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	st, _ := manifold.NewStiefel[float32](clIn, clHidden)
	w := make([]float32, clIn*clHidden)
	if err := st.Random(w, rng); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, clHidden*clClasses)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	c := &classifier{xs: make([]float32, clBatch*clIn), ys: make([]float32, clBatch*clClasses), labels: make([]int, clBatch)}
	g := G.NewGraph()
	c.x = G.NewMatrix(g, tensor.Float32, G.WithShape(clBatch, clIn), G.WithName("x"), G.WithInit(G.Zeroes()))
	c.y = G.NewMatrix(g, tensor.Float32, G.WithShape(clBatch, clClasses), G.WithName("y"), G.WithInit(G.Zeroes()))
	c.w = G.NewMatrix(g, tensor.Float32, G.WithShape(clIn, clHidden), G.WithName("W"), G.WithValue(tensor.New(tensor.WithShape(clIn, clHidden), tensor.WithBacking(w))))
	c.v = G.NewMatrix(g, tensor.Float32, G.WithShape(clHidden, clClasses), G.WithName("V"), G.WithValue(tensor.New(tensor.WithShape(clHidden, clClasses), tensor.WithBacking(v))))
	c.logits = G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(c.x, c.w)))), c.v))
	var err error
	if c.loss, err = nn.CrossEntropy(c.logits, c.y); err != nil {
		t.Fatal(err)
	}
	params := []param.Param{param.OnStiefel(c.w), param.Plain(c.v)}
	if _, err := G.Grad(c.loss, c.w, c.v); err != nil {
		t.Fatal(err)
	}
	c.prog, err = program.Compile(g, program.Config{Backend: be, Outputs: []*G.Node{c.loss, c.logits}, Params: params,
		Inputs: []*G.Node{c.x, c.y}, Accuracy: program.Accuracy{Logits: c.logits, Targets: c.y}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.prog.Close() })
	c.solver, err = program.NewSolver(c.prog, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{Rule: optim.AdamConfig{}, LR: 0.01},
	}, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.solver.Close() })
	return c
}

// batch draws inputs (with ties among the logits unlikely but possible)
// and labels, and sets them.
func (c *classifier) batch(t *testing.T, rng *rand.Rand) {
	t.Helper()
	for i := range c.xs {
		c.xs[i] = float32(rng.NormFloat64())
	}
	clear(c.ys)
	for r := range c.labels {
		c.labels[r] = rng.IntN(clClasses)
		c.ys[r*clClasses+c.labels[r]] = 1
	}
	if err := c.prog.SetInput(c.x, c.xs); err != nil {
		t.Fatal(err)
	}
	if err := c.prog.SetInput(c.y, c.ys); err != nil {
		t.Fatal(err)
	}
}

// deviceBackend starts the CUDA backend for t, closed when t ends: the
// host model of the device, or a GPU where ORTHONET_CUDA_GPU=1.
func deviceBackend(t *testing.T) backend.Backend {
	t.Helper()
	if os.Getenv("ORTHONET_CUDA_GPU") != "1" {
		t.Setenv(cuda.StandInEnv, "1")
	}
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// TestCollect trains a classifier compiled with Config.Accuracy on the CPU
// and on the CUDA backend (the host model of the device, or a GPU where
// ORTHONET_CUDA_GPU=1): Collect's loss and logits are Read's, its count of
// correct rows is nn.Accuracy's of those logits, and a step (inputs, Run,
// Collect, the Solver's Step) waits for the device once, where reading the
// loss and the logits and checking the gradients apart waited three times.
// A NaN batch still fails the Step with ErrNotFinite before any weight
// moves.
func TestCollect(t *testing.T) {
	dev := deviceBackend(t)
	for _, be := range []backend.Backend{cpu.New(cpu.Options{}), dev} {
		name := strings.Fields(be.Name())[0]
		c := newClassifier(t, be)
		rng := rand.New(rand.NewPCG(7, 8))
		loss, logits := make([]float32, 1), make([]float32, clBatch*clClasses)
		readLoss, readLogits := make([]float32, 1), make([]float32, clBatch*clClasses)
		for step := range 8 {
			waits := standin.HostWaits()
			c.batch(t, rng)
			if err := c.prog.Run(); err != nil {
				t.Fatal(err)
			}
			correct, err := c.prog.Collect(program.Read{Node: c.loss, Dst: loss}, program.Read{Node: c.logits, Dst: logits})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.solver.Step(); err != nil {
				t.Fatal(err)
			}
			if got := standin.HostWaits() - waits; be == dev && got != 1 {
				t.Errorf("%s: step %d waited %d times for the device, want once", name, step, got)
			}
			acc, err := nn.Accuracy(logits, c.labels, clClasses)
			if err != nil {
				t.Fatal(err)
			}
			if want := int(math.Round(acc * clBatch)); correct != want {
				t.Errorf("%s: step %d: Collect counts %d correct rows, nn.Accuracy of its logits %d", name, step, correct, want)
			}
			// Read, after the step, gives what Collect gave before it (the
			// outputs are the Run's; the step moves only the weights).
			if err := c.prog.Read(c.loss, readLoss); err != nil {
				t.Fatal(err)
			}
			if err := c.prog.Read(c.logits, readLogits); err != nil {
				t.Fatal(err)
			}
			if readLoss[0] != loss[0] || !testval.SameBits(readLogits, logits) {
				t.Errorf("%s: step %d: Collect read loss %v, Read %v (or the logits differ)", name, step, loss[0], readLoss[0])
			}
		}
		if be == dev { // the same step with Read and CheckGrads waited three times
			waits := standin.HostWaits()
			c.batch(t, rng)
			if err := c.prog.Run(); err != nil {
				t.Fatal(err)
			}
			if err := c.prog.Read(c.loss, loss); err != nil {
				t.Fatal(err)
			}
			if err := c.prog.Read(c.logits, logits); err != nil {
				t.Fatal(err)
			}
			if err := c.solver.Step(); err != nil {
				t.Fatal(err)
			}
			if got := standin.HostWaits() - waits; got != 3 {
				t.Errorf("%s: a step that reads apart waited %d times, want 3", name, got)
			}
		}

		// A NaN in the batch: the Step fails before anything moves.
		c.batch(t, rng)
		c.xs[5] = float32(math.NaN())
		if err := c.prog.SetInput(c.x, c.xs); err != nil {
			t.Fatal(err)
		}
		before := weightsOf(t, c)
		if err := c.prog.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.prog.Collect(program.Read{Node: c.loss, Dst: loss}); err != nil {
			t.Fatal(err)
		}
		if err := c.solver.Step(); !errors.Is(err, optim.ErrNotFinite) {
			t.Errorf("%s: a step on a NaN batch: %v, want ErrNotFinite", name, err)
		}
		if after := weightsOf(t, c); !testval.SameBits(after, before) {
			t.Errorf("%s: a failed step moved the weights", name)
		}
	}
}

func weightsOf(t *testing.T, c *classifier) []float32 {
	t.Helper()
	w, v := make([]float32, clIn*clHidden), make([]float32, clHidden*clClasses)
	if err := c.prog.Read(c.w, w); err != nil {
		t.Fatal(err)
	}
	if err := c.prog.Read(c.v, v); err != nil {
		t.Fatal(err)
	}
	return append(w, v...)
}

// TestAccuracyRefused checks Config.Accuracy's errors: logits that are not
// an output, targets that are not an input.
func TestAccuracyRefused(t *testing.T) {
	be := cpu.New(cpu.Options{})
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(4, 3), G.WithName("x"), G.WithInit(G.Zeroes()))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(4, 3), G.WithName("y"), G.WithInit(G.Zeroes()))
	z := G.Must(G.Tanh(x))
	for _, tc := range []struct {
		cfg  program.Config
		want string
	}{
		{program.Config{Backend: be, Outputs: []*G.Node{z}, Inputs: []*G.Node{x}, NoGrad: true, Accuracy: program.Accuracy{Logits: z, Targets: y}}, "targets"},
		{program.Config{Backend: be, Outputs: []*G.Node{z}, Inputs: []*G.Node{x, y}, NoGrad: true, Accuracy: program.Accuracy{Logits: x, Targets: y}}, "not an output"},
		{program.Config{Backend: be, Outputs: []*G.Node{z}, Inputs: []*G.Node{x, y}, NoGrad: true, Accuracy: program.Accuracy{Logits: z, Targets: y}}, "do not need the targets"},
	} {
		if _, err := program.Compile(g, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile: %v, want an error naming %q", err, tc.want)
		}
	}
}

// TestCollectAllocs checks that Collect allocates nothing: nor does a
// training step that reads its loss and count with it on the CPU backend.
// (On the CUDA backend the device steppers' Step allocates, as it did
// before Collect.)
func TestCollectAllocs(t *testing.T) {
	dev := deviceBackend(t)
	for _, be := range []backend.Backend{cpu.New(cpu.Options{Threads: 2}), dev} {
		c := newClassifier(t, be)
		c.batch(t, rand.New(rand.NewPCG(1, 1)))
		var loss any = make([]float32, 1)
		collect := func() {
			if _, err := c.prog.Collect(program.Read{Node: c.loss, Dst: loss}); err != nil {
				t.Fatal(err)
			}
		}
		step := func() {
			if err := c.prog.Run(); err != nil {
				t.Fatal(err)
			}
			collect()
			if err := c.solver.Step(); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if n := testing.AllocsPerRun(10, collect); n != 0 {
			t.Errorf("%s: Collect makes %v allocations, want 0", be.Name(), n)
		}
		if n := testing.AllocsPerRun(10, step); be != dev && n != 0 {
			t.Errorf("%s: %v allocations per step, want 0", be.Name(), n)
		}
	}
}
