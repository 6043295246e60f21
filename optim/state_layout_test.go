package optim_test

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// layoutFile is a checkpoint of layoutSolver after layoutSteps steps (the
// weights as tensors "weight/<name>", the solver by PutSolver under
// "opt/"), written in the pure-Go build on amd64 by the optim of commit
// a13cb2a, before a sampler's entries had a namespace of their own in
// RSDM's State: every rule's and sampler's entries sit side by side in its
// maps. Commit 511188d holds the test that wrote it.
const layoutFile = "state-before-sampler-namespace.ckpt"

// layoutSteps is how many steps layoutFile's solver took: odd, so that the
// weights with InnerSteps 2 are inside an inner loop.
const layoutSteps = 7

// strided is a sampler of one's own that saves its position under a name
// of its own: it draws r rows starting at next, next advancing by 3.
type strided struct{}

func (strided) String() string { return "strided" }
func (strided) Rows() bool     { return true }
func (strided) Start(n, r int) (optim.Draws, error) {
	return &stridedDraws{n: n}, nil
}

type stridedDraws struct{ n, next, prev int }

func (d *stridedDraws) Draw(_ *rand.Rand, p *optim.Submanifold) error {
	d.prev = d.next
	for i := range p.Rows {
		p.Rows[i] = (d.next + i) % d.n
	}
	d.next = (d.next + 3) % d.n
	return nil
}
func (d *stridedDraws) Undraw()             { d.next = d.prev }
func (d *stridedDraws) Save(st optim.State) { st.Counters["strided_next"] = int64(d.next) }
func (d *stridedDraws) Load(st optim.State) (func(), error) {
	v, ok := st.Counters["strided_next"]
	if !ok || v < 0 || v >= int64(d.n) {
		return nil, fmt.Errorf("strided: state has no position in 0 to %d", d.n-1)
	}
	return func() { d.next = int(v) }, nil
}

// layoutSolver returns a solver over one parameter of every rule and
// sampler, each in a group of its own, started from seeded values, and
// the function that sets every gradient to W - T for fixed targets T.
func layoutSolver(t *testing.T) (*optim.Solver, []optim.Param, func()) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	type spec struct {
		name    string
		shape   []int
		float32 bool
		rule    optim.Rule
	}
	specs := []spec{
		{"blocks", []int{10, 4}, false, optim.RSDMConfig{SubmanifoldSize: 3, Sampling: optim.Blocks, InnerSteps: 2, Momentum: 0.5, Seed: 11}},
		{"perm", []int{4, 9}, true, optim.RSDMConfig{SubmanifoldSize: 2, Seed: 12}},
		{"strided", []int{8, 2}, false, optim.RSDMConfig{SubmanifoldSize: 3, Sampling: strided{}, InnerSteps: 3, Seed: 13}},
		{"orth", []int{12, 3}, false, optim.RSDMConfig{SubmanifoldSize: 4, Sampling: optim.Orthogonal, InnerSteps: 2, Seed: 14}},
		{"rgd", []int{6, 3}, false, optim.RGDConfig{Momentum: 0.9}},
		{"radam", []int{6, 2}, true, optim.RiemannianAdamConfig{}},
		{"adam", []int{5}, true, optim.AdamConfig{}},
		{"sgd", []int{2, 3}, false, optim.SGDConfig{Momentum: 0.8}},
	}
	var params []optim.Param
	var groups []optim.Group
	var sets []func()
	for _, s := range specs {
		size := 1
		for _, d := range s.shape {
			size *= d
		}
		w, target := make([]float64, size), make([]float64, size)
		for i := range w {
			w[i], target[i] = rng.NormFloat64(), rng.NormFloat64()
		}
		p := optim.Param{Name: s.name, Shape: s.shape}
		if s.rule.Constrained() {
			p.Manifold = manifold.StiefelKind{}
		}
		if s.float32 {
			w32, g32 := make([]float32, size), make([]float32, size)
			for i, v := range w {
				w32[i] = float32(v)
			}
			p.Value, p.Grad = optim.Host[float32](w32), optim.Host[float32](g32)
			sets = append(sets, func() {
				for i := range w32 {
					g32[i] = w32[i] - float32(target[i])
				}
			})
		} else {
			g := make([]float64, size)
			p.Value, p.Grad = optim.Host[float64](w), optim.Host[float64](g)
			sets = append(sets, func() {
				for i := range w {
					g[i] = w[i] - target[i]
				}
			})
		}
		if p.Manifold != nil {
			if err := p.Orthonormalize(); err != nil {
				t.Fatal(err)
			}
		}
		name := s.name
		params = append(params, p)
		groups = append(groups, optim.Group{Select: func(p optim.Param) bool { return p.Name == name }, Rule: s.rule, LR: 0.1})
	}
	solver, err := optim.NewSolver(params, groups, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return solver, params, func() {
		for _, set := range sets {
			set()
		}
	}
}

// clashing is a sampler of one's own whose position is saved under names
// RSDM uses for its own state: "steps" (how many draws it made) and
// "rows" (the rows of its next draw). It draws r consecutive rows, the
// start advancing by one each draw.
type clashing struct{}

func (clashing) String() string { return "clashing" }
func (clashing) Rows() bool     { return true }
func (clashing) Start(n, r int) (optim.Draws, error) {
	return &clashingDraws{n: n, r: r}, nil
}

type clashingDraws struct{ n, r, draws int }

func (d *clashingDraws) Draw(_ *rand.Rand, p *optim.Submanifold) error {
	for i := range p.Rows {
		p.Rows[i] = (d.draws + i) % d.n
	}
	d.draws++
	return nil
}
func (d *clashingDraws) Undraw() { d.draws-- }
func (d *clashingDraws) Save(st optim.State) {
	st.Counters["steps"] = int64(d.draws)
	next := make([]int64, d.r)
	for i := range next {
		next[i] = int64((d.draws + i) % d.n)
	}
	st.Buffers["rows"] = next
}
func (d *clashingDraws) Load(st optim.State) (func(), error) {
	v, ok := st.Counters["steps"]
	if !ok || v < 0 {
		return nil, fmt.Errorf("clashing: state has no draw count")
	}
	return func() { d.draws = int(v) }, nil
}

// TestSamplerStateNamespace checks that a sampler of one's own that saves
// its position under the names of RSDM's own entries ("steps", "rows")
// leaves RSDM's state intact: the State counts RSDM's steps, not the
// sampler's draws, and k steps, State, a fresh solver, SetState and n - k
// more steps give the weight of n steps straight, bit for bit, at every k
// (inside and between RSDM-momentum inner loops of 3 steps, where the
// sampler's draws are fewer than RSDM's steps).
func TestSamplerStateNamespace(t *testing.T) {
	const n, total = 9, 10
	run := func(k int) ([]float64, optim.State) {
		rng := rand.New(rand.NewPCG(1, 2))
		w, target := make([]float64, n*3), make([]float64, n*3)
		for i := range w {
			w[i], target[i] = rng.NormFloat64(), rng.NormFloat64()
		}
		g := make([]float64, len(w))
		p := optim.Param{Name: "w", Shape: []int{n, 3}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](w), Grad: optim.Host[float64](g)}
		if err := p.Orthonormalize(); err != nil {
			t.Fatal(err)
		}
		rule := optim.RSDMConfig{SubmanifoldSize: 3, Sampling: clashing{}, InnerSteps: 3, Momentum: 0.5, Seed: 3}
		build := func() *optim.Solver {
			s, err := optim.NewSolver([]optim.Param{p}, []optim.Group{{Rule: rule, LR: 0.2}}, optim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		s := build()
		var saved optim.State
		for i := range total {
			if i == k {
				saved = s.State()[0]
				s = build()
				if err := s.SetState([]optim.State{saved}); err != nil {
					t.Fatalf("k=%d: SetState: %v", k, err)
				}
			}
			for j := range w {
				g[j] = w[j] - target[j]
			}
			if err := s.Step(); err != nil {
				t.Fatalf("k=%d: step %d: %v", k, i, err)
			}
		}
		return w, saved
	}
	straight, _ := run(-1)
	for k := 1; k < total; k++ {
		w, st := run(k)
		if steps := st.Counters["steps"]; steps != int64(k) {
			t.Errorf("k=%d: the state's steps = %d, want RSDM's %d", k, steps, k)
		}
		for i := range w {
			if w[i] != straight[i] {
				t.Errorf("k=%d: resumed weight differs from the straight run at %d: %v, want %v", k, i, w[i], straight[i])
				break
			}
		}
	}
}

// TestStateBeforeSamplerNamespace loads layoutFile, a checkpoint written
// before a sampler's entries had a namespace of their own, into a solver of
// this build: every state restores, and the solver's State then holds the
// checkpoint's entries, each sampler's under State.Sampler, RSDM's own and
// every other rule's as they were. In the build that wrote the file (pure
// Go on amd64) it also checks that a straight run reaches the checkpoint's
// weights and that steps on from the checkpoint are the straight run's, bit
// for bit; TestResumeBeforeSamplerNamespace checks that in every build.
func TestStateBeforeSamplerNamespace(t *testing.T) {
	f, err := checkpoint.Read("testdata/" + layoutFile)
	if err != nil {
		t.Fatal(err)
	}
	solver, params, grads := layoutSolver(t)
	for _, p := range params {
		w, ok := f.Tensors["weight/"+p.Name]
		if !ok {
			t.Fatalf("%s has no weight %q", layoutFile, p.Name)
		}
		switch v := p.Value.(type) {
		case optim.Host[float32]:
			copy(v, w.Data.([]float32))
		case optim.Host[float64]:
			copy(v, w.Data.([]float64))
		}
	}
	if err := f.LoadSolver("opt/", solver); err != nil {
		t.Fatalf("loading %s: %v", layoutFile, err)
	}
	old := oldStates(t, f)
	for i, got := range solver.State() {
		if want := namespaced(old[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: state after loading\n%+v\nwant the checkpoint's, its sampler's entries under %q\n%+v", params[i].Name, got, "sampler.", want)
		}
	}
	if _, pure := blas64.Implementation().(gonum.Implementation); !pure || runtime.GOARCH != "amd64" {
		t.Logf("the straight run is compared in the pure-Go build on amd64, which wrote %s", layoutFile)
		return
	}
	straight, sparams, sgrads := layoutSolver(t)
	for range layoutSteps {
		sgrads()
		if err := straight.Step(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range params {
		if !reflect.DeepEqual(sparams[i].Value, f.Tensors["weight/"+params[i].Name].Data) {
			t.Fatalf("%s: %d steps do not give the checkpoint's weight", params[i].Name, layoutSteps)
		}
	}
	for range 5 {
		grads()
		sgrads()
		if err := solver.Step(); err != nil {
			t.Fatal(err)
		}
		if err := straight.Step(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range params {
		if !reflect.DeepEqual(params[i].Value, sparams[i].Value) {
			t.Errorf("%s: resumed from %s, the weight differs from the straight run's", params[i].Name, layoutFile)
		}
	}
}

// TestResumeBeforeSamplerNamespace checks, for every rule and sampler of
// layoutSolver, that k steps, State put into the layout before sampler
// namespaces (every sampler's entries beside RSDM's), SetState and 12 - k
// more steps give the weights of 12 steps straight, bit for bit.
func TestResumeBeforeSamplerNamespace(t *testing.T) {
	const total = 12
	straight, sparams, sgrads := layoutSolver(t)
	for range total {
		sgrads()
		if err := straight.Step(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []int{1, 4, 7} {
		solver, params, grads := layoutSolver(t)
		for i := range total {
			if i == k {
				states := solver.State()
				for j, st := range states {
					states[j] = flattened(st)
				}
				if err := solver.SetState(states); err != nil {
					t.Fatalf("k=%d: SetState of the layout before sampler namespaces: %v", k, err)
				}
			}
			grads()
			if err := solver.Step(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range params {
			if !reflect.DeepEqual(params[i].Value, sparams[i].Value) {
				t.Errorf("k=%d: %s: the resumed weight differs from the straight run's", k, params[i].Name)
			}
		}
	}
}

// flattened returns an RSDM state in the layout before sampler
// namespaces: its sampler's entries beside RSDM's own.
func flattened(s optim.State) optim.State {
	if s.Kind != "rsdm" {
		return s
	}
	out := optim.State{Kind: s.Kind, Counters: map[string]int64{}, Random: map[string][]byte{}, Buffers: map[string]any{}}
	for k, v := range s.Counters {
		out.Counters[strings.TrimPrefix(k, "sampler.")] = v
	}
	for k, v := range s.Random {
		out.Random[strings.TrimPrefix(k, "sampler.")] = v
	}
	for k, v := range s.Buffers {
		out.Buffers[strings.TrimPrefix(k, "sampler.")] = v
	}
	return out
}

// rsdmOwn are the names of RSDM's own entries in its States.
var rsdmOwn = map[string]bool{"steps": true, "phase": true, "rows": true, "haar_rows": true, "px0": true, "y": true, "yprev": true}

// namespaced returns an RSDM state of the layout before sampler namespaces
// in today's: every entry but RSDM's own under "sampler.". Other rules'
// states are as they were.
func namespaced(s optim.State) optim.State {
	if s.Kind != "rsdm" {
		return s
	}
	out := optim.State{Kind: s.Kind, Counters: map[string]int64{}, Random: map[string][]byte{}, Buffers: map[string]any{}}
	for k, v := range s.Counters {
		if !rsdmOwn[k] {
			k = "sampler." + k
		}
		out.Counters[k] = v
	}
	for k, v := range s.Random {
		if k != "sampler" {
			k = "sampler." + k
		}
		out.Random[k] = v
	}
	for k, v := range s.Buffers {
		if !rsdmOwn[k] {
			k = "sampler." + k
		}
		out.Buffers[k] = v
	}
	return out
}

// oldStates reads the states of the solver in f as they were written, from
// the checkpoint's metadata and tensors (the layout of checkpoint.PutSolver).
func oldStates(t *testing.T, f *checkpoint.File) []optim.State {
	t.Helper()
	var entries []struct {
		Name     string            `json:"name"`
		Kind     string            `json:"kind"`
		Counters map[string]int64  `json:"counters"`
		Random   map[string]string `json:"random"`
		Buffers  []string          `json:"buffers"`
	}
	if err := f.JSON("opt/solver", &entries); err != nil {
		t.Fatal(err)
	}
	out := make([]optim.State, len(entries))
	for i, e := range entries {
		st := optim.State{Kind: e.Kind, Counters: map[string]int64{}, Random: map[string][]byte{}, Buffers: map[string]any{}}
		maps.Copy(st.Counters, e.Counters)
		for k, v := range e.Random {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				t.Fatal(err)
			}
			st.Random[k] = b
		}
		for _, k := range e.Buffers {
			st.Buffers[k] = f.Tensors["opt/"+e.Name+"/"+k].Data
		}
		out[i] = st
	}
	return out
}
