package device_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/device"
)

// deviceBackends start the backends the device steppers are checked on: the CPU
// backend here, the CUDA backend on the host model of the device where cgo is on.
var deviceBackends = []func() backend.Backend{func() backend.Backend { return cpu.New(cpu.Options{Threads: 2}) }}

// deviceSpec is a parameter of the device tests.
type deviceSpec struct {
	name     string
	shape    []int
	manifold manifold.Kind
}

var deviceSpecs = []deviceSpec{
	{"tall", []int{12, 5}, manifold.StiefelKind{}},
	{"wide", []int{4, 9}, manifold.StiefelKind{}},
	{"bias", []int{7}, nil},
	{"plain", []int{3, 4}, nil},
}

func deviceConfigs() map[string][]optim.Group {
	rest := func(g optim.Group) optim.Group { return g } // the unconstrained parameters' group
	constrained := func(p optim.Param) bool { return p.Constrained() }
	two := func(c, u optim.Group) []optim.Group {
		c.Select = constrained
		return []optim.Group{c, rest(u)}
	}
	cfgs := map[string][]optim.Group{
		"rsdm-blocks+sgd-momentum-decay": two(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 3, Sampling: optim.Blocks, Seed: 2}},
			optim.Group{Rule: optim.SGDConfig{Momentum: 0.9}, LR: 0.1, WeightDecay: 0.01}),
		"rsdm-reorth+adam-schedule": two(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 4, ReorthEvery: 2}},
			optim.Group{Rule: optim.AdamConfig{}, LR: 0.01, Schedule: optim.Cosine{Steps: 5}}),
		"rgd+adamw": two(optim.Group{Rule: optim.RGDConfig{}, LR: 0.2},
			optim.Group{Rule: optim.AdamWConfig{}, LR: 0.01}),
		"rgd-momentum+sgd": two(optim.Group{Rule: optim.RGDConfig{Momentum: 0.8}, LR: 0.2},
			optim.Group{Rule: optim.SGDConfig{}, LR: 0.05}),
	}
	for _, sm := range optim.Samplers { // every sampler of rows, which a device runs
		if sm.Rows() {
			cfgs["rsdm-"+sm.String()+"+sgd"] = two(optim.Group{LR: 0.4, Rule: optim.RSDMConfig{SubmanifoldSize: 3, Sampling: sm, Seed: 5}},
				optim.Group{Rule: optim.SGDConfig{}, LR: 0.1})
		}
	}
	return cfgs
}

// deviceRun is one set of parameters stepped on the host and on a device.
type deviceRun[T float32 | float64] struct {
	t      *testing.T
	be     backend.Backend
	values [][]T // the host's
	grads  [][]T
	host   *optim.Solver
	dev    *optim.Solver
	bufs   [][2]backend.Buffer
	rng    *rand.Rand
}

func newDeviceRun[T float32 | float64](t *testing.T, be backend.Backend, groups []optim.Group) *deviceRun[T] {
	r := &deviceRun[T]{t: t, be: be, rng: rand.New(rand.NewPCG(1, 2))}
	dt := backend.Float64
	if _, ok := any(T(0)).(float32); ok {
		dt = backend.Float32
	}
	var hp []optim.Param
	var dp []optim.Param
	for _, s := range deviceSpecs {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		v := make([]T, n)
		if s.manifold != nil {
			rows, cols := s.shape[0], s.shape[1]
			tr := rows < cols
			if tr {
				rows, cols = cols, rows
			}
			st, err := manifold.NewStiefel[float64](rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float64, n)
			if err := st.Random(x, r.rng); err != nil {
				t.Fatal(err)
			}
			for i := range rows {
				for j := range cols {
					if tr {
						v[j*rows+i] = T(x[i*cols+j])
					} else {
						v[i*cols+j] = T(x[i*cols+j])
					}
				}
			}
		} else {
			for i := range v {
				v[i] = T(r.rng.NormFloat64())
			}
		}
		g := make([]T, n)
		r.values, r.grads = append(r.values, v), append(r.grads, g)
		hp = append(hp, optim.Param{Name: s.name, Shape: s.shape, Manifold: s.manifold, Value: optim.Host[T](v), Grad: optim.Host[T](g)})
		vb, err := be.Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := be.Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.CopyIn(vb, 0, v); err != nil {
			t.Fatal(err)
		}
		r.bufs = append(r.bufs, [2]backend.Buffer{vb, gb})
		dp = append(dp, optim.Param{Name: s.name, Shape: s.shape, Manifold: s.manifold, Value: device.On(backend.At(vb, 0), n), Grad: device.On(backend.At(gb, 0), n)})
	}
	var err error
	if r.host, err = optim.NewSolver(hp, groups, optim.Options{}); err != nil {
		t.Fatal(err)
	}
	if r.dev, err = optim.NewSolver(dp, groups, optim.Options{Device: device.New(be)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.dev.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// step draws gradients, and steps both.
func (r *deviceRun[T]) step() {
	r.t.Helper()
	for i, g := range r.grads {
		for j := range g {
			g[j] = T(r.rng.NormFloat64())
		}
		if err := r.be.CopyIn(r.bufs[i][1], 0, g); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.host.Step(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.dev.Step(); err != nil {
		r.t.Fatal(err)
	}
}

// compare checks the device's values against the host's.
func (r *deviceRun[T]) compare(what string, tol float64) {
	r.t.Helper()
	if err := r.be.Sync(); err != nil {
		r.t.Fatal(err)
	}
	for i, v := range r.values {
		got := make([]T, len(v))
		if err := r.be.CopyOut(got, r.bufs[i][0], 0); err != nil {
			r.t.Fatal(err)
		}
		var d, s float64
		at := 0
		for j := range v {
			if e := math.Abs(float64(got[j]) - float64(v[j])); e > d || math.IsNaN(e) && !math.IsNaN(d) {
				d, at = e, j
			}
			s = max(s, math.Abs(float64(v[j])))
		}
		if !(d <= tol*max(s, 1)) {
			r.t.Errorf("%s: %s differs from the host's by %.3g (scale %.3g), most at element %d of %d: %v against the host's %v",
				what, deviceSpecs[i].name, d, s, at, len(v), got[at], v[at])
		}
	}
}

// TestDeviceAgrees steps the same parameters from the same gradients
// with the Solver on the host and on each backend's memory, and checks the
// values after each step and the states (same counters and random sources,
// buffers that agree); then each restores the other's state and both go on
// alike.
func TestDeviceAgrees(t *testing.T) {
	for bi, newBackend := range deviceBackends {
		be := newBackend()
		defer be.Close()
		for name, groups := range deviceConfigs() {
			t.Run(fmt.Sprintf("backend%d/%s/float64", bi, name), func(t *testing.T) { deviceAgree[float64](t, be, groups, 1e-10) })
			t.Run(fmt.Sprintf("backend%d/%s/float32", bi, name), func(t *testing.T) { deviceAgree[float32](t, be, groups, 2e-5) })
		}
	}
}

func deviceAgree[T float32 | float64](t *testing.T, be backend.Backend, groups []optim.Group, tol float64) {
	r := newDeviceRun[T](t, be, groups)
	for s := range 3 {
		r.step()
		r.compare(fmt.Sprintf("step %d", s+1), tol)
	}
	hs, ds := r.host.State(), r.dev.State()
	for i := range hs {
		if err := sameState(hs[i], ds[i], tol); err != nil {
			t.Errorf("%s: %v", deviceSpecs[i].name, err)
		}
	}
	// Swap the states: each goes on from the other's.
	if err := r.host.SetState(ds); err != nil {
		t.Fatal(err)
	}
	if err := r.dev.SetState(hs); err != nil {
		t.Fatal(err)
	}
	for s := range 2 {
		r.step()
		r.compare(fmt.Sprintf("step %d after swapping states", s+4), tol)
	}
	if r.dev.Steps() != 5 || r.host.Steps() != 5 {
		t.Errorf("steps %d and %d, want 5", r.dev.Steps(), r.host.Steps())
	}
}

// sameState reports how two states differ.
func sameState(a, b optim.State, tol float64) error {
	if a.Kind != b.Kind {
		return fmt.Errorf("kinds %q and %q", a.Kind, b.Kind)
	}
	if fmt.Sprint(a.Counters) != fmt.Sprint(b.Counters) {
		return fmt.Errorf("counters %v and %v", a.Counters, b.Counters)
	}
	if fmt.Sprint(a.Random) != fmt.Sprint(b.Random) {
		return fmt.Errorf("random sources differ")
	}
	if len(a.Buffers) != len(b.Buffers) {
		return fmt.Errorf("buffers %d and %d", len(a.Buffers), len(b.Buffers))
	}
	for k, va := range a.Buffers {
		x, y := testval.Floats(va), testval.Floats(b.Buffers[k])
		if len(x) != len(y) {
			return fmt.Errorf("buffer %q of %d and %d entries", k, len(x), len(y))
		}
		for i := range x {
			if !(math.Abs(x[i]-y[i]) <= tol*max(1, math.Abs(x[i]))) {
				return fmt.Errorf("buffer %q entry %d: %v and %v", k, i, x[i], y[i])
			}
		}
	}
	return nil
}

// TestDeviceRefuses checks that the settings the device steppers do not
// run are refused by the Solver, naming them, with the same message on
// every backend.
func TestDeviceRefuses(t *testing.T) {
	type refusal struct {
		name   string
		groups []optim.Group
		o      optim.Options
		want   string
		m      manifold.Kind // nil: Stiefel, or none for an unconstrained rule
	}
	var refusals []refusal
	for _, r := range notDescribed() {
		refusals = append(refusals, refusal{name: r.String(), groups: []optim.Group{{Rule: r, LR: 0.1}},
			want: "the " + r.String() + " rule does not run on a device"})
	}
	for _, c := range append(refusals, []refusal{
		{"orthogonal", []optim.Group{{LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 2, Sampling: optim.Orthogonal}}}, optim.Options{}, "orth sampling", nil},
		{"inner steps", []optim.Group{{LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 2, InnerSteps: 3, Momentum: 0.5}}}, optim.Options{}, "inner steps", nil},
		{"cayley", []optim.Group{{Rule: optim.RGDConfig{}, LR: 0.1}}, optim.Options{}, "stiefel (cayley retraction) manifold", manifold.StiefelKind{Retraction: manifold.Cayley}},
		{"grassmann", []optim.Group{{Rule: optim.RGDConfig{}, LR: 0.1}}, optim.Options{}, "grassmann manifold", manifold.GrassmannKind{}},
		{"clip", []optim.Group{{LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 2}}}, optim.Options{ClipNorm: 1}, "clipping", nil},
		{"r > n", []optim.Group{{LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 5}}}, optim.Options{}, "exceeds", nil},
		{"own rule", []optim.Group{{LR: 0.1, Rule: ownRule{}}}, optim.Options{}, "the own rule does not run on a device", nil},
		{"factored", []optim.Group{{LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 2}}}, optim.Options{}, `weight "w" has a factored gradient, which the steppers on a device do not take`, nil},
	}...) {
		if c.m == nil && c.groups[0].Rule.Constrained() {
			c.m = manifold.StiefelKind{}
		}
		var first string
		for bi, newBackend := range deviceBackends {
			be := newBackend()
			w, _ := be.Alloc(backend.Float64, 12)
			g, _ := be.Alloc(backend.Float64, 12)
			params := []optim.Param{{Name: "w", Shape: []int{4, 3}, Manifold: c.m, Value: device.On(backend.At(w, 0), 12), Grad: device.On(backend.At(g, 0), 12)}}
			if c.name == "factored" {
				params[0].Grad, params[0].GradA, params[0].GradB, params[0].GradK = nil, device.On(backend.At(g, 0), 4), device.On(backend.At(g, 4), 3), 1
			}
			c.o.Device = device.New(be)
			_, err := optim.NewSolver(params, c.groups, c.o)
			// A setting the host runs is optim.ErrNotOnDevice (cmd/train's
			// -device auto takes the CPU for it); a bad r or a program
			// compiled for the host is not.
			hostRuns := c.name != "r > n" && c.name != "factored"
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: backend %d: got %v, want an error naming %q", c.name, bi, err, c.want)
			} else if errors.Is(err, optim.ErrNotOnDevice) != hostRuns {
				t.Errorf("%s: backend %d: %v: errors.Is ErrNotOnDevice is %v, want %v", c.name, bi, err, !hostRuns, hostRuns)
			} else if bi == 0 {
				first = err.Error()
			} else if err.Error() != first {
				t.Errorf("%s: backend %d says %q, backend 0 %q", c.name, bi, err, first)
			}
			be.Close()
		}
	}
}

// notDescribed returns the rules of optim.Rules that are not
// optim.Described: those a device refuses (it steps the Described rules
// from their descriptions, and its own table of rules with steppers of
// their own is empty).
func notDescribed() []optim.Rule {
	var out []optim.Rule
	for _, r := range optim.Rules {
		if _, ok := r.(optim.Described); !ok {
			out = append(out, r)
		}
	}
	return out
}

// ownRule is a rule of the test's own, which the device does not run.
type ownRule struct{ optim.RGDConfig }

func (ownRule) String() string { return "own" }
