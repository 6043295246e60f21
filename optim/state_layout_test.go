package optim_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/optim"
)

// writeLayout makes TestWriteLayoutCheckpoint write layoutFile anew
// (go test ./optim -run TestWriteLayoutCheckpoint -write-layout).
var writeLayout = flag.Bool("write-layout", false, "write testdata/"+layoutFile+" from this build's solver")

// layoutFile is a checkpoint of layoutSolver after layoutSteps steps,
// written by the code of commit a13cb2a, before a sampler's entries had a
// namespace of their own in RSDM's State: every rule's and sampler's
// entries sit side by side in its maps.
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
			p.Manifold = optim.Stiefel{}
		}
		if s.float32 {
			w32, g32 := make([]float32, size), make([]float32, size)
			for i, v := range w {
				w32[i] = float32(v)
			}
			p.Value, p.Grad = w32, g32
			sets = append(sets, func() {
				for i := range w32 {
					g32[i] = w32[i] - float32(target[i])
				}
			})
		} else {
			g := make([]float64, size)
			p.Value, p.Grad = w, g
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

// TestWriteLayoutCheckpoint writes layoutFile with -write-layout.
func TestWriteLayoutCheckpoint(t *testing.T) {
	if !*writeLayout {
		t.Skip("writes testdata with -write-layout")
	}
	solver, params, grads := layoutSolver(t)
	for range layoutSteps {
		grads()
		if err := solver.Step(); err != nil {
			t.Fatal(err)
		}
	}
	f := checkpoint.New()
	for _, p := range params {
		f.Tensors["weight/"+p.Name] = checkpoint.Tensor{Shape: p.Shape, Data: p.Value}
	}
	if err := f.PutSolver("opt/", solver); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Write("testdata/"+layoutFile, f); err != nil {
		t.Fatal(err)
	}
}
