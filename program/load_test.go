package program_test

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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

// teacherNet is a small model compiled for a backend: y = tanh(x W1) W2
// with W1 on the Stiefel manifold, fitted to a teacher, with its solver
// and its own stream of batches.
type teacherNet struct {
	dt            tensor.Dtype
	x, y, loss    *G.Node
	w1, w2        *G.Node
	params        []param.Param
	prog          *program.Program
	solver        *optim.Solver
	teacher       []float64
	xs, ys, lossV any
}

const tnBatch, tnIn, tnHidden = 16, 8, 4

// newTeacherNet builds and compiles the model in dt on be, with the same
// starting weights every time, and a batch stream that starts at seed.
func newTeacherNet(t *testing.T, be backend.Backend, dt tensor.Dtype) *teacherNet {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	st, _ := manifold.NewStiefel[float64](tnIn, tnHidden)
	w1 := make([]float64, tnIn*tnHidden)
	if err := st.Random(w1, rng); err != nil {
		t.Fatal(err)
	}
	teacher := make([]float64, tnIn*tnHidden)
	if err := st.Random(teacher, rng); err != nil {
		t.Fatal(err)
	}
	m := &teacherNet{dt: dt, teacher: teacher}
	g := G.NewGraph()
	m.x = G.NewMatrix(g, dt, G.WithShape(tnBatch, tnIn), G.WithName("x"), G.WithInit(G.Zeroes()))
	m.y = G.NewMatrix(g, dt, G.WithShape(tnBatch, 1), G.WithName("y"), G.WithInit(G.Zeroes()))
	m.w1 = G.NewMatrix(g, dt, G.WithShape(tnIn, tnHidden), G.WithName("W1"), G.WithValue(testval.Tensor(dt, []int{tnIn, tnHidden}, w1)))
	m.w2 = G.NewMatrix(g, dt, G.WithShape(tnHidden, 1), G.WithName("W2"), G.WithValue(testval.Tensor(dt, []int{tnHidden, 1}, []float64{0.1, 0.1, 0.1, 0.1})))
	out := G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(m.x, m.w1)))), m.w2))
	m.loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(out, m.y))))))
	m.params = []param.Param{param.OnStiefel(m.w1), param.Plain(m.w2)}
	m.prog, m.solver = compileWithSolver(t, g, program.Config{Backend: be, Outputs: []*G.Node{m.loss}, Params: m.params, Inputs: []*G.Node{m.x, m.y}}, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.5, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1},
	})
	m.xs, m.ys, m.lossV = testval.Host(dt, tnBatch*tnIn), testval.Host(dt, tnBatch), testval.Host(dt, 1)
	return m
}

func setAt(h any, i int, v float64) {
	switch d := h.(type) {
	case []float32:
		d[i] = float32(v)
	case []float64:
		d[i] = v
	}
}

// train takes steps on batches drawn from the teacher, the batch of step
// k from seed k, and returns the loss of the last one.
func (m *teacherNet) train(from, to int) (float64, error) {
	var last float64
	for step := from; step < to; step++ {
		rng := rand.New(rand.NewPCG(uint64(step), 3))
		for b := 0; b < tnBatch; b++ {
			var s float64
			for k := 0; k < tnIn; k++ {
				v := rng.NormFloat64()
				setAt(m.xs, b*tnIn+k, v)
				s += v * m.teacher[k*tnHidden]
			}
			setAt(m.ys, b, math.Tanh(s))
		}
		if err := m.prog.SetInput(m.x, m.xs); err != nil {
			return 0, err
		}
		if err := m.prog.SetInput(m.y, m.ys); err != nil {
			return 0, err
		}
		if err := m.prog.Run(); err != nil {
			return 0, err
		}
		if err := m.prog.Read(m.loss, m.lossV); err != nil {
			return 0, err
		}
		last = testval.Floats(m.lossV)[0]
		if err := m.solver.Step(); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// weights returns the program's parameters, read from the program.
func (m *teacherNet) weights(t *testing.T) [][]float64 {
	t.Helper()
	var out [][]float64
	for _, n := range []*G.Node{m.w1, m.w2} {
		h := testval.Host(m.dt, n.Shape().TotalSize())
		if err := m.prog.Read(n, h); err != nil {
			t.Fatal(err)
		}
		out = append(out, testval.Floats(h))
	}
	return out
}

// save writes the model's checkpoint the way the README shows for nodes:
// the parameters copied into their nodes, then the nodes and the solver.
func (m *teacherNet) save(t *testing.T, path string) {
	t.Helper()
	if err := m.prog.StoreParams(); err != nil {
		t.Fatal(err)
	}
	f := checkpoint.New()
	if err := f.PutNodes("model.", param.Nodes(m.params)); err != nil {
		t.Fatal(err)
	}
	if err := f.PutSolver("optim.", m.solver); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Write(path, f); err != nil {
		t.Fatal(err)
	}
}

// straightRun trains a fresh teacher net on be straight from step 0 to
// steps, writing a checkpoint with save after half of them; it returns the
// net, the checkpoint's path and the loss of the last step.
func straightRun(t *testing.T, be backend.Backend, dt tensor.Dtype, half, steps int, save func(m *teacherNet, path string)) (*teacherNet, string, float64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ckpt.safetensors")
	m := newTeacherNet(t, be, dt)
	if _, err := m.train(0, half); err != nil {
		t.Fatal(err)
	}
	save(m, path)
	loss, err := m.train(half, steps)
	if err != nil {
		t.Fatal(err)
	}
	return m, path, loss
}

// resumedNet makes a fresh teacher net on be and loads the checkpoint at
// path into it with load.
func resumedNet(t *testing.T, be backend.Backend, dt tensor.Dtype, path string, load func(f *checkpoint.File, m *teacherNet) error) *teacherNet {
	t.Helper()
	m := newTeacherNet(t, be, dt)
	f, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := load(f, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// endsAsStraight fails t unless a resumed net ended with the loss and the
// weights of the straight one, bit for bit.
func endsAsStraight(t *testing.T, how string, resumed, straight *teacherNet, gotLoss, wantLoss float64) {
	t.Helper()
	if gotLoss != wantLoss || !sameWeights(resumed.weights(t), straight.weights(t)) {
		t.Errorf("resumed %s: loss %v, a straight run's %v (or the weights differ)", how, gotLoss, wantLoss)
	}
}

// sameWeights reports whether a and b are the same weights, bit for bit.
func sameWeights(a, b [][]float64) bool {
	return slices.EqualFunc(a, b, func(x, y []float64) bool { return testval.SameBits(x, y) })
}

// TestResumeWithoutLoadParams resumes a compiled program through the
// checkpoint package's node and solver calls alone, without
// Program.LoadParams, as a new user would: the program must either train
// from the loaded weights (ending where a straight run ends, bit for bit)
// or refuse to run, never train on from its starting weights.
func TestResumeWithoutLoadParams(t *testing.T) {
	save := func(t *testing.T, m *teacherNet, path string) { m.save(t, path) }
	resumesAsStraight(t, "without LoadParams (trained on other weights than the checkpoint's?)", save, func(f *checkpoint.File, m *teacherNet) error {
		if err := f.LoadNodes("model.", param.Nodes(m.params)); err != nil {
			return err
		}
		return f.LoadSolver("optim.", m.solver) // and no m.prog.LoadParams()
	}, program.ErrParamsChanged)
}

// TestLoadProgramResumes resumes a compiled program with one call,
// checkpoint.File.LoadProgram, from a checkpoint PutProgram wrote: the run
// ends where a straight one does, bit for bit, in float64 and float32.
func TestLoadProgramResumes(t *testing.T) {
	save := func(t *testing.T, m *teacherNet, path string) {
		f := checkpoint.New()
		if err := f.PutProgram("model.", "optim.", m.prog, m.solver); err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.Write(path, f); err != nil {
			t.Fatal(err)
		}
	}
	resumesAsStraight(t, "with LoadProgram", save, func(f *checkpoint.File, m *teacherNet) error {
		return f.LoadProgram("model.", "optim.", m.prog, m.solver)
	}, nil)
}

// resumesAsStraight trains a teacherNet on the CPU backend in float64 and
// float32 for 200 steps straight, and again from the checkpoint save wrote
// at step 100, loaded by load: the resumed run must end where the straight
// one does, bit for bit, or (where refused is not nil) fail with refused.
func resumesAsStraight(t *testing.T, how string, save func(*testing.T, *teacherNet, string), load func(*checkpoint.File, *teacherNet) error, refused error) {
	t.Helper()
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			const half, steps = 100, 200
			straight, path, wantLoss := straightRun(t, be, dt, half, steps, func(m *teacherNet, path string) { save(t, m, path) })
			resumed := resumedNet(t, be, dt, path, load)
			gotLoss, err := resumed.train(half, steps)
			if refused != nil && errors.Is(err, refused) {
				return // refused loudly: acceptable
			}
			if err != nil {
				t.Fatal(err)
			}
			endsAsStraight(t, how, resumed, straight, gotLoss, wantLoss)
		})
	}
}

// TestNodesChangedBehindTheProgram changes parameter nodes of a program on
// the CPU backend: before the first Run a written node fails Run with
// ErrParamsChanged; after it the nodes are the program's parameters
// (written data reaches the program, StoreParams copies nothing), and a
// node given another value fails Run until LoadParams.
func TestNodesChangedBehindTheProgram(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			m := newTeacherNet(t, be, dt)
			setAt(m.w2.Value().Data(), 0, 0.7) // before the first Run
			if _, err := m.train(0, 1); !errors.Is(err, program.ErrParamsChanged) {
				t.Fatalf("Run after a node was written behind the program: %v, want ErrParamsChanged", err)
			}
			if err := m.prog.LoadParams(); err != nil {
				t.Fatal(err)
			}
			if _, err := m.train(0, 5); err != nil {
				t.Fatalf("after LoadParams: %v", err)
			}
			// The node is the program's parameter now: writing it writes the program's.
			setAt(m.w2.Value().Data(), 1, 0.25)
			if got := m.weights(t)[1][1]; got != 0.25 {
				t.Errorf("the program's W2[1] is %v after the node's was set to 0.25", got)
			}
			if _, err := m.train(5, 10); err != nil {
				t.Fatal(err)
			}
			if got, want := testval.Floats(m.w2.Value().Data()), m.weights(t)[1]; !sameWeights([][]float64{got}, [][]float64{want}) {
				t.Errorf("without StoreParams the node holds %v, the program %v", got, want)
			}
			// A new value for the node is refused until LoadParams copies it in.
			fresh := testval.Tensor(dt, []int{tnHidden, 1}, []float64{1, 2, 3, 4})
			if err := G.Let(m.w2, fresh); err != nil {
				t.Fatal(err)
			}
			if _, err := m.train(10, 11); !errors.Is(err, program.ErrParamsChanged) || !strings.Contains(err.Error(), `"W2"`) {
				t.Fatalf("Run after the node was given another value: %v, want ErrParamsChanged naming W2", err)
			}
			if err := m.prog.LoadParams(); err != nil {
				t.Fatal(err)
			}
			if got := m.weights(t)[1]; got[3] != 4 {
				t.Errorf("after LoadParams the program's W2 is %v, want the node's [1 2 3 4]", got)
			}
			if _, err := m.train(10, 11); err != nil {
				t.Fatalf("after LoadParams: %v", err)
			}
		})
	}
}

var _ checkpoint.StatefulProgram = (*program.Program)(nil)

// compileWithSolver writes the gradients of cfg.Outputs[0] (the loss)
// into g, compiles g by cfg and builds the program's Solver over groups;
// t's end closes both.
func compileWithSolver(t *testing.T, g *G.ExprGraph, cfg program.Config, groups []optim.Group) (*program.Program, *optim.Solver) {
	t.Helper()
	if _, err := G.Grad(cfg.Outputs[0], param.Nodes(cfg.Params)...); err != nil {
		t.Fatal(err)
	}
	prog, err := program.Compile(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	solver, err := program.NewSolver(prog, groups, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { solver.Close() })
	return prog, solver
}

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
	m.prog, m.solver = compileWithSolver(t, g, program.Config{Backend: be, Outputs: []*G.Node{m.loss}, Params: m.params, Inputs: []*G.Node{m.x, m.y}, DropoutSeed: 5}, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 3, Seed: 1}},
		{Rule: optim.AdamConfig{}, LR: 1e-2},
	})
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
