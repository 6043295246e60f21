package program_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
)

var _ checkpoint.StatefulProgram = (*program.Program)(nil)

// normNet is a model with program state: y = dropout(tanh(bn(x W) +
// noise)) v, with W on the Stiefel manifold, a gorgonia BatchNorm (its
// scale and shift trained by Adam), Gaussian noise from a random node and
// gorgonia's Dropout, fitted to a fixed target by RSDM and Adam.
type normNet struct {
	dt         tensor.Dtype
	x, y, loss *G.Node
	params     []param.Param
	prog       *program.Program
	solver     *optim.Solver
	xs, ys     any
	lossV      any
}

const nnBatch, nnIn, nnHidden = 8, 6, 4

func newNormNet(t *testing.T, be backend.Backend, dt tensor.Dtype) *normNet {
	t.Helper()
	st, _ := manifold.NewStiefel[float64](nnIn, nnHidden)
	w0 := make([]float64, nnIn*nnHidden)
	if err := st.Random(w0, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	m := &normNet{dt: dt}
	g := G.NewGraph()
	m.x = G.NewMatrix(g, dt, G.WithShape(nnBatch, nnIn), G.WithName("x"), G.WithInit(G.Zeroes()))
	m.y = G.NewMatrix(g, dt, G.WithShape(nnBatch, 1), G.WithName("y"), G.WithInit(G.Zeroes()))
	w := G.NewMatrix(g, dt, G.WithShape(nnIn, nnHidden), G.WithName("W"), G.WithValue(testval.Tensor(dt, []int{nnIn, nnHidden}, w0)))
	scale := G.NewMatrix(g, dt, G.WithShape(1, nnHidden), G.WithName("scale"), G.WithValue(testval.Tensor(dt, []int{1, nnHidden}, []float64{1, 0.9, 1.1, 1})))
	bias := G.NewMatrix(g, dt, G.WithShape(1, nnHidden), G.WithName("bias"), G.WithValue(testval.Tensor(dt, []int{1, nnHidden}, []float64{0, 0.1, -0.1, 0})))
	v := G.NewMatrix(g, dt, G.WithShape(nnHidden, 1), G.WithName("v"), G.WithValue(testval.Tensor(dt, []int{nnHidden, 1}, []float64{0.3, -0.2, 0.1, 0.2})))
	h, _, _, _, err := G.BatchNorm(G.Must(G.Mul(m.x, w)), scale, bias, 0.1, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	noise := G.GaussianRandomNode(g, dt, 0, 0.1, nnBatch, nnHidden)
	d := G.Must(G.Dropout(G.Must(G.Tanh(G.Must(G.Add(h, noise)))), 0.25))
	m.loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(d, v)), m.y))))))
	m.params = []param.Param{param.OnStiefel(w), param.Plain(scale), param.Plain(bias), param.Plain(v)}
	if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
		t.Fatal(err)
	}
	m.prog, err = program.Compile(g, program.Config{Backend: be, Outputs: []*G.Node{m.loss}, Params: m.params, Inputs: []*G.Node{m.x, m.y}, DropoutSeed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.prog.Close() })
	m.solver, err = program.NewSolver(m.prog, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 3, Seed: 1}},
		{Rule: optim.AdamConfig{}, LR: 1e-2},
	}, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.solver.Close() })
	m.xs, m.ys, m.lossV = testval.Host(dt, nnBatch*nnIn), testval.Host(dt, nnBatch), testval.Host(dt, 1)
	return m
}

// train takes the steps from..to-1, the batch of step k drawn from seed k;
// the program's own step (never set) keys its random draws.
func (m *normNet) train(t *testing.T, from, to int) float64 {
	t.Helper()
	for step := from; step < to; step++ {
		rng := rand.New(rand.NewPCG(uint64(step), 9))
		for b := range nnBatch {
			for k := range nnIn {
				setAt(m.xs, b*nnIn+k, 1+rng.NormFloat64())
			}
			setAt(m.ys, b, math.Sin(float64(b+step)))
		}
		for _, err := range []error{m.prog.SetInput(m.x, m.xs), m.prog.SetInput(m.y, m.ys), m.prog.Run(), m.prog.Read(m.loss, m.lossV), m.solver.Step()} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return testval.Floats(m.lossV)[0]
}

// state returns everything a resumed run must have equal: the parameters,
// the solver's buffers and counters, the program's state tensors and step.
func (m *normNet) state(t *testing.T) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{"step": {float64(m.prog.Step())}}
	for _, p := range m.params {
		h := testval.Host(m.dt, p.Node.Shape().TotalSize())
		if err := m.prog.Read(p.Node, h); err != nil {
			t.Fatal(err)
		}
		out["param "+p.Name()] = testval.Floats(h)
	}
	for i, s := range m.solver.State() {
		for k, b := range s.Buffers {
			out["solver "+m.params[i].Name()+" "+k] = testval.Floats(b)
		}
		for k, c := range s.Counters {
			out["solver "+m.params[i].Name()+" "+k] = []float64{float64(c)}
		}
	}
	for _, name := range m.prog.StateNames() {
		shape, dt, _ := m.prog.StateInfo(name)
		h := testval.Host(dt, shape.TotalSize())
		if err := m.prog.ReadState(name, h); err != nil {
			t.Fatal(err)
		}
		out["state "+name] = testval.Floats(h)
	}
	return out
}

// resumeBackends are the CPU backend and, where cgo is on, the CUDA one on
// the host model of the device (or a GPU where ORTHONET_CUDA_GPU=1).
func resumeBackends(t *testing.T) []backend.Backend {
	bs := []backend.Backend{cpu.New(cpu.Options{})}
	if os.Getenv("ORTHONET_CUDA_GPU") != "1" {
		t.Setenv(cuda.StandInEnv, "1")
	}
	if b, err := cuda.New(cuda.Options{}); err == nil {
		bs = append(bs, b)
	} else {
		t.Logf("no CUDA backend: %v", err)
	}
	t.Cleanup(func() {
		for _, b := range bs {
			b.Close()
		}
	})
	return bs
}

// TestResumeWithProgramState trains normNet 6 steps straight, and 3 steps,
// PutProgram, a file written and read back, LoadProgram into a fresh
// program, 3 more steps; the parameters, the solver's state, the batch
// norm's running statistics and the program's step must be equal bit for
// bit, on the CPU and the CUDA backend, in float64 and float32. A checkpoint
// whose program state does not fit (a state tensor missing, one too many,
// another shape) is refused naming the tensor, and the program, its
// parameters and its solver are left as they were.
func TestResumeWithProgramState(t *testing.T) {
	for bi, be := range resumeBackends(t) {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("backend%d/%v", bi, dt), func(t *testing.T) {
				straight := newNormNet(t, be, dt)
				wantLoss := straight.train(t, 0, 6)
				want := straight.state(t)

				half := newNormNet(t, be, dt)
				half.train(t, 0, 3)
				f := checkpoint.New()
				if err := f.PutProgram("model.", "optim.", half.prog, half.solver); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "step-3.safetensors")
				if err := checkpoint.Write(path, f); err != nil {
					t.Fatal(err)
				}
				saved, err := checkpoint.Read(path)
				if err != nil {
					t.Fatal(err)
				}
				names := half.prog.StateNames()
				if len(names) != 2 {
					t.Fatalf("the program's state is %q, want a running mean and variance", names)
				}

				r := newNormNet(t, be, dt)
				r.train(t, 0, 1) // a program that has run: its state must all be replaced
				before := r.state(t)
				edit := func(change func(g *checkpoint.File)) *checkpoint.File {
					g := checkpoint.New()
					for k, v := range saved.Tensors {
						g.Tensors[k] = v
					}
					for k, v := range saved.Meta {
						g.Meta[k] = v
					}
					change(g)
					return g
				}
				key := "model.state/" + names[1]
				for _, c := range []struct {
					name  string
					f     *checkpoint.File
					wants string
				}{
					{"missing", edit(func(g *checkpoint.File) { delete(g.Tensors, key) }), key},
					{"extra", edit(func(g *checkpoint.File) { g.Tensors["model.state/other/running_mean"] = g.Tensors[key] }), "model.state/other/running_mean"},
					{"shape", edit(func(g *checkpoint.File) {
						tt := g.Tensors[key]
						g.Tensors[key] = checkpoint.Tensor{Shape: []int{2, 2}, Data: tt.Data}
					}), key},
				} {
					err := c.f.LoadProgram("model.", "optim.", r.prog, r.solver)
					if err == nil || !strings.Contains(err.Error(), c.wants) {
						t.Errorf("%s state: LoadProgram gave %v, want an error naming %s", c.name, err, c.wants)
					}
					if after := r.state(t); !sameState(after, before) {
						t.Errorf("%s state: a refused LoadProgram changed the program or its solver", c.name)
					}
				}

				if err := saved.LoadProgram("model.", "optim.", r.prog, r.solver); err != nil {
					t.Fatal(err)
				}
				if r.prog.Step() != 3 {
					t.Errorf("the loaded program's step is %d, want 3", r.prog.Step())
				}
				gotLoss := r.train(t, 3, 6)
				got := r.state(t)
				if gotLoss != wantLoss {
					t.Errorf("resumed loss %v, straight %v", gotLoss, wantLoss)
				}
				for k, w := range want {
					if g, ok := got[k]; !ok || !sameState(map[string][]float64{k: g}, map[string][]float64{k: w}) {
						t.Errorf("%s: resumed %v, straight %v", k, g, w)
					}
				}
				if len(got) != len(want) {
					t.Errorf("resumed state has %d entries, straight %d", len(got), len(want))
				}
			})
		}
	}
}

// sameState reports whether a and b hold the same entries, bit for bit.
func sameState(a, b map[string][]float64) bool {
	return maps.EqualFunc(a, b, func(x, y []float64) bool { return testval.SameBits(x, y) })
}
