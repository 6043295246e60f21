package optim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/problem"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
)

// stepper is an optimizer with a saveable state.
type stepper[T Float] interface {
	Optimizer[T]
	State() State
	SetState(State) error
}

// TestStateResume checks, for every optimizer, that k steps, State, a fresh
// optimizer, SetState and n-k more steps give the same weight, bit for bit,
// as n steps straight, including a state saved in the middle of an
// RSDM-momentum inner loop and of a covering-block pass.
func TestStateResume(t *testing.T) {
	testStateResume[float64](t)
	testStateResume[float32](t)
}

func testStateResume[T Float](t *testing.T) {
	const n, p, total = 24, 6, 23
	type resumeCase struct {
		name string
		make func(m manifold.Manifold[T]) (stepper[T], error)
	}
	var cases []resumeCase
	for _, s := range Samplers { // RSDM with every sampler, r = 7 not dividing n
		cases = append(cases, resumeCase{"rsdm-" + s.String(), func(m manifold.Manifold[T]) (stepper[T], error) {
			return NewRSDM(m, RSDMConfig{LR: 0.3, SubmanifoldSize: 7, Sampling: s, Seed: 4})
		}})
	}
	cases = append(cases, []resumeCase{
		{"rsdm-momentum-orth", func(m manifold.Manifold[T]) (stepper[T], error) {
			return NewRSDM(m, RSDMConfig{LR: 0.3, SubmanifoldSize: 5, Sampling: Orthogonal, Momentum: 0.8, InnerSteps: 4, Seed: 4})
		}},
		{"rsdm-momentum-perm", func(m manifold.Manifold[T]) (stepper[T], error) {
			return NewRSDM(m, RSDMConfig{LR: 0.3, SubmanifoldSize: 5, Momentum: 0.8, InnerSteps: 4, Seed: 4, ReorthEvery: 6})
		}},
		{"rgd-momentum", func(m manifold.Manifold[T]) (stepper[T], error) {
			return NewRGD(m, RGDConfig{LR: 0.2, Momentum: 0.9})
		}},
		{"riemannian-adam", func(m manifold.Manifold[T]) (stepper[T], error) {
			return NewRiemannianAdam(m, RiemannianAdamConfig{LR: 0.05})
		}},
	}...)
	st, _ := manifold.NewStiefel[T](n, p)
	pr := problem.NewPCA[T](n, p, newRNG(2))
	x0 := make([]T, n*p)
	_ = st.Random(x0, newRNG(3))
	g := make([]T, n*p)
	type run struct {
		o stepper[T]
		x []T
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%T", tc.name, x0[0]), func(t *testing.T) {
			step := func(r run) {
				pr.Grad(g, r.x)
				if err := r.o.Step(r.x, g); err != nil {
					t.Fatal(err)
				}
			}
			fresh := func() stepper[T] {
				o, err := tc.make(st)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			type saved struct {
				state State
				x     []T
			}
			testval.StraightThenResumed(t, total, []int{0, 1, 6, 10}, testval.Resumable[run, saved]{
				Start: func() run { return run{fresh(), slices.Clone(x0)} },
				Step:  func(r run, _ int) { step(r) },
				Save: func(r run) saved {
					s := saved{r.o.State(), slices.Clone(r.x)}
					for range 3 { // the state must be a copy
						step(r)
					}
					return s
				},
				Resume: func(s saved) run {
					o := fresh()
					if err := o.SetState(s.state); err != nil {
						t.Fatalf("SetState: %v", err)
					}
					return run{o, s.x}
				},
				Result: func(r run) any { return r.x },
			})
		})
	}
}

// TestDescribedResume checks, for every rule of Rules written in
// StepBlocks (Described), as ParseRuleFlags builds it with its settings'
// defaults, that a Solver stopped mid-run, whose State a fresh Solver takes
// (SetState), ends bit for bit where one that never stopped does, in
// float32 and float64.
func TestDescribedResume(t *testing.T) {
	described := 0
	for _, r := range Rules {
		if _, ok := r.(Described); !ok {
			continue
		}
		described++
		rule, err := ParseRuleFlags(r.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(r.String()+"/float64", func(t *testing.T) { describedResume[float64](t, rule) })
		t.Run(r.String()+"/float32", func(t *testing.T) { describedResume[float32](t, rule) })
	}
	if described == 0 {
		t.Error("no rule of Rules is Described")
	}
}

// describedResume runs rule on a Stiefel weight with as many rows as the
// rule's step needs (FactoredRule), or on a bias with its group's weight
// decay, pulled towards a fixed target.
func describedResume[T Float](t *testing.T, rule Rule) {
	const total, cols = 9, 3
	rng := newRNG(7)
	group := Group{Rule: rule, LR: 0.05, WeightDecay: 0.01}
	shape := []int{11}
	x0 := make([]T, 11)
	for i := range x0 {
		x0[i] = T(rng.NormFloat64())
	}
	var m manifold.Kind
	if rule.Constrained() {
		rows := 2 * cols
		if f, ok := rule.(FactoredRule); ok {
			if r, ok := f.FactorsGradients(); ok {
				rows = max(rows, r)
			}
		}
		st, err := manifold.NewStiefel[T](rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		shape, x0, m, group.WeightDecay = []int{rows, cols}, make([]T, rows*cols), manifold.StiefelKind{}, 0
		if err := st.Random(x0, rng); err != nil {
			t.Fatal(err)
		}
	}
	target := make([]T, len(x0))
	for i := range target {
		target[i] = T(rng.NormFloat64())
	}
	type run struct {
		s    *Solver
		x, g []T
	}
	start := func(x []T) run {
		r := run{x: slices.Clone(x), g: make([]T, len(x))}
		p := Param{Name: "w", Shape: shape, Manifold: m, Value: Host[T](r.x), Grad: Host[T](r.g)}
		var err error
		if r.s, err = NewSolver([]Param{p}, []Group{group}, Options{}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	step := func(r run, _ int) {
		for i := range r.g {
			r.g[i] = r.x[i] - target[i]
		}
		if err := r.s.Step(); err != nil {
			t.Fatal(err)
		}
	}
	type saved struct {
		states []State
		x      []T
	}
	testval.StraightThenResumed(t, total, []int{0, 1, 4}, testval.Resumable[run, saved]{
		Start: func() run { return start(x0) },
		Step:  step,
		Save: func(r run) saved {
			s := saved{r.s.State(), slices.Clone(r.x)}
			for i := range 3 { // the state must be a copy
				step(r, i)
			}
			return s
		},
		Resume: func(s saved) run {
			r := start(s.x)
			if err := r.s.SetState(s.states); err != nil {
				t.Fatalf("SetState: %v", err)
			}
			return r
		},
		Result: func(r run) any { return r.x },
	})
}

// TestStateErrors checks that a state of another kind or shape is refused
// with an error naming the fault, and leaves the optimizer as it was.
func TestStateErrors(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](12, 4)
	rsdmCfg := RSDMConfig{LR: 0.1, SubmanifoldSize: 4, Momentum: 0.5, InnerSteps: 3, Seed: 1}
	o, _ := NewRSDM(st, rsdmCfg)
	x := make([]float64, 48)
	_ = st.Random(x, newRNG(1))
	g := make([]float64, 48)
	pr := problem.NewPCA[float64](12, 4, newRNG(2))
	pr.Grad(g, x)
	_ = o.Step(x, g)
	good := o.State()
	mutate := func(f func(s *State)) State {
		s := State{Kind: good.Kind, Counters: map[string]int64{}, Random: map[string][]byte{}, Buffers: map[string]any{}}
		for k, v := range good.Counters {
			s.Counters[k] = v
		}
		for k, v := range good.Random {
			s.Random[k] = v
		}
		for k, v := range good.Buffers {
			s.Buffers[k] = v
		}
		f(&s)
		return s
	}
	rgd, _ := NewRGD(st, RGDConfig{LR: 0.1})
	for _, tc := range []struct {
		name  string
		state State
		want  string
	}{
		{"kind", mutate(func(s *State) { s.Kind = "adam" }), `"adam" optimizer cannot restore a "rsdm"`},
		{"phase", mutate(func(s *State) { s.Counters["phase"] = 2 }), `counter "phase" = 2, want 1 (steps 1 mod inner steps 3)`},
		{"steps", mutate(func(s *State) { s.Counters["steps"] = -1 }), `counter "steps" = -1`},
		{"block", mutate(func(s *State) { s.Counters[samplerPrefix+"block"] = 2 }), "block 2 but the sampling is perm"},
		{"block before namespaces", mutate(func(s *State) { delete(s.Counters, samplerPrefix+"block"); s.Counters["block"] = 2 }), "block 2 but the sampling is perm"},
		{"missing buffer", mutate(func(s *State) { delete(s.Buffers, "y") }), `no buffer "y"`},
		{"short buffer", mutate(func(s *State) { s.Buffers["px0"] = make([]float64, 5) }), `"px0" has 5 entries, want 16`},
		{"buffer type", mutate(func(s *State) { s.Buffers["px0"] = make([]float32, 16) }), `"px0" is []float32`},
		{"row", mutate(func(s *State) { s.Buffers["rows"] = []int64{0, 1, 2, 12} }), "sampled row 12"},
		{"random", mutate(func(s *State) { s.Random["sampler"] = []byte("junk") }), `random source "sampler"`},
	} {
		before := o.State()
		err := o.SetState(tc.state)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.name, err, tc.want)
		}
		if after := o.State(); after.Counters["steps"] != before.Counters["steps"] || string(after.Random["sampler"]) != string(before.Random["sampler"]) {
			t.Errorf("%s: a refused state changed the optimizer", tc.name)
		}
	}
	if err := rgd.SetState(good); err == nil {
		t.Error("RGD accepted an RSDM state")
	}
}

// TestStatePhase checks that State does not store RSDM's inner step, which
// is the step count modulo InnerSteps, and that states written when it did
// (with a counter "phase") restore to the same steps as the state without it.
func TestStatePhase(t *testing.T) {
	const n, p, inner, total = 15, 4, 3, 11
	st, _ := manifold.NewStiefel[float64](n, p)
	pr := problem.NewPCA[float64](n, p, newRNG(2))
	x0 := make([]float64, n*p)
	_ = st.Random(x0, newRNG(3))
	g := make([]float64, n*p)
	for _, sampling := range Samplers {
		cfg := RSDMConfig{LR: 0.3, SubmanifoldSize: 4, Sampling: sampling, Momentum: 0.7, InnerSteps: inner, Seed: 9}
		steps := func(o *RSDM[float64], x []float64, count int) {
			for i := 0; i < count; i++ {
				pr.Grad(g, x)
				if err := o.Step(x, g); err != nil {
					t.Fatalf("%v: %v", sampling, err)
				}
			}
		}
		straight, _ := NewRSDM(st, cfg)
		want := append([]float64(nil), x0...)
		steps(straight, want, total)
		for k := 0; k < 2*inner; k++ {
			first, _ := NewRSDM(st, cfg)
			got := append([]float64(nil), x0...)
			steps(first, got, k)
			s := first.State()
			if _, ok := s.Counters["phase"]; ok {
				t.Fatalf("%v k=%d: State stores the phase", sampling, k)
			}
			s.Counters["phase"] = int64(k % inner) // as written before
			second, _ := NewRSDM(st, cfg)
			if err := second.SetState(s); err != nil {
				t.Fatalf("%v k=%d: SetState of a state with a phase: %v", sampling, k, err)
			}
			steps(second, got, total-k)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%v k=%d: entry %d is %v resumed, %v straight", sampling, k, i, got[i], want[i])
				}
			}
			s.Counters["phase"] = int64(k%inner+1) % inner
			if err := second.SetState(s); err == nil || !strings.Contains(err.Error(), `"phase"`) {
				t.Errorf("%v k=%d: SetState with phase %d: got error %v, want one naming the phase", sampling, k, s.Counters["phase"], err)
			}
		}
	}
}

// TestSetLR checks that a changed step size takes effect: RSDM with lr set
// from 0.1 to 0.2 takes the step a fresh RSDM with lr 0.2 takes, and a bad
// step size is refused.
func TestSetLR(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](10, 3)
	pr := problem.NewPCA[float64](10, 3, newRNG(1))
	x0 := make([]float64, 30)
	_ = st.Random(x0, newRNG(2))
	g := make([]float64, 30)
	pr.Grad(g, x0)
	a, _ := NewRSDM(st, RSDMConfig{LR: 0.1, SubmanifoldSize: 4, Seed: 1})
	b, _ := NewRSDM(st, RSDMConfig{LR: 0.2, SubmanifoldSize: 4, Seed: 1})
	if err := a.SetLR(0.2); err != nil {
		t.Fatal(err)
	}
	xa, xb := append([]float64(nil), x0...), append([]float64(nil), x0...)
	_ = a.Step(xa, g)
	_ = b.Step(xb, g)
	for i := range xa {
		if xa[i] != xb[i] {
			t.Fatalf("after SetLR(0.2) entry %d is %v, a fresh lr 0.2 gives %v", i, xa[i], xb[i])
		}
	}
	for _, lr := range []float64{-1, math.NaN(), math.Inf(1)} {
		if a.SetLR(lr) == nil {
			t.Errorf("SetLR(%v) accepted", lr)
		}
	}
	s, _ := NewSolver([]Param{{Name: "b", Shape: []int{2}, Value: Host[float64]([]float64{1, 2}), Grad: Host[float64]([]float64{0, 0})}}, []Group{{LR: 1}}, Options{})
	if s.SetLR(0, -0.1) == nil || s.SetLR(1, 0.1) == nil {
		t.Error("Solver.SetLR accepted a negative step size or a group that does not exist")
	}
}
