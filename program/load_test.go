package program_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
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
	if _, err := G.Grad(m.loss, m.w1, m.w2); err != nil {
		t.Fatal(err)
	}
	var err error
	m.prog, err = program.Compile(g, program.Config{Backend: be, Outputs: []*G.Node{m.loss}, Params: m.params, Inputs: []*G.Node{m.x, m.y}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.prog.Close() })
	m.solver, err = program.NewSolver(m.prog, []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.5, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}},
		{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1},
	}, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.solver.Close() })
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
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			const half, steps = 100, 200
			straight, path, wantLoss := straightRun(t, be, dt, half, steps, func(m *teacherNet, path string) { m.save(t, path) })

			resumed := resumedNet(t, be, dt, path, func(f *checkpoint.File, m *teacherNet) error {
				if err := f.LoadNodes("model.", param.Nodes(m.params)); err != nil {
					return err
				}
				return f.LoadSolver("optim.", m.solver) // and no m.prog.LoadParams()
			})
			gotLoss, err := resumed.train(half, steps)
			if errors.Is(err, program.ErrParamsChanged) {
				return // refused loudly: acceptable
			}
			if err != nil {
				t.Fatal(err)
			}
			endsAsStraight(t, "without LoadParams (trained on other weights than the checkpoint's?)", resumed, straight, gotLoss, wantLoss)
		})
	}
}

// TestLoadProgramResumes resumes a compiled program with one call,
// checkpoint.File.LoadProgram, from a checkpoint PutProgram wrote: the run
// ends where a straight one does, bit for bit, in float64 and float32.
func TestLoadProgramResumes(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			const half, steps = 100, 200
			straight, path, wantLoss := straightRun(t, be, dt, half, steps, func(m *teacherNet, path string) {
				f := checkpoint.New()
				if err := f.PutProgram("model.", "optim.", m.prog, m.solver); err != nil {
					t.Fatal(err)
				}
				if err := checkpoint.Write(path, f); err != nil {
					t.Fatal(err)
				}
			})
			resumed := resumedNet(t, be, dt, path, func(f *checkpoint.File, m *teacherNet) error {
				return f.LoadProgram("model.", "optim.", m.prog, m.solver)
			})
			gotLoss, err := resumed.train(half, steps)
			if err != nil {
				t.Fatal(err)
			}
			endsAsStraight(t, "with LoadProgram", resumed, straight, gotLoss, wantLoss)
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
