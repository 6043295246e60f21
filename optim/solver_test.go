package optim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/internal/problem"
	"github.com/orthonet/orthonet/manifold"
)

// stiefelParam returns a Haar-random n x p weight (orthonormal rows when
// n < p) named name, with a zero gradient.
func stiefelParam(name string, n, p int, seed uint64) Param {
	a, b := max(n, p), min(n, p)
	st, _ := manifold.NewStiefel[float64](a, b)
	x := make([]float64, a*b)
	_ = st.Random(x, newRNG(seed))
	w := x
	if n < p {
		w = make([]float64, n*p)
		linalg.Transpose(w, x, a, b)
	}
	return Param{Name: name, Shape: []int{n, p}, Manifold: manifold.StiefelKind{}, Value: Host[float64](w), Grad: Host[float64](make([]float64, n*p))}
}

func plainParam(name string, n int, seed uint64) Param {
	v := make([]float64, n)
	rng := newRNG(seed)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return Param{Name: name, Shape: []int{n}, Value: Host[float64](v), Grad: Host[float64](make([]float64, n))}
}

// TestSolverErrors checks that NewSolver refuses every bad weight, group
// and setting with an error naming it, before any step.
func TestSolverErrors(t *testing.T) {
	good := Group{LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 3}}
	off := stiefelParam("w", 5, 2, 1)
	for i := range off.Value.(Host[float64]) {
		off.Value.(Host[float64])[i] = 1
	}
	kernel := stiefelParam("conv.W", 4, 18, 1) // (4, 2, 3, 3): a wide 4 x 18 matrix
	kernel.Shape = []int{4, 2, 3, 3}
	vector := stiefelParam("w", 5, 1, 1)
	vector.Shape = []int{5}
	grassWide := stiefelParam("w", 2, 5, 1)
	grassWide.Manifold = manifold.GrassmannKind{}
	for _, tc := range []struct {
		name   string
		params []Param
		groups []Group
		o      Options
		want   string
	}{
		{"no-groups", []Param{stiefelParam("w", 5, 2, 1)}, nil, Options{}, "at least one group"},
		{"negative-lr", []Param{stiefelParam("w", 5, 2, 1)}, []Group{{LR: -1}}, Options{}, "learning rate -1, want a finite value >= 0 (group 0)"},
		{"rule", []Param{plainParam("b", 3, 1)}, []Group{{LR: 1, Rule: RSDMConfig{SubmanifoldSize: 2}}}, Options{}, `parameter "b": rule rsdm steps weights on a manifold only`},
		{"plain-rule", []Param{stiefelParam("w", 5, 2, 1)}, []Group{{LR: 1, Rule: AdamWConfig{}}}, Options{}, `weight "w": rule adamw steps unconstrained parameters only`},
		{"no-rule", []Param{stiefelParam("w", 5, 2, 1)}, []Group{{LR: 1}}, Options{}, `weight "w" is on the stiefel manifold, but its group has no rule`},
		{"adam", []Param{plainParam("b", 3, 1)}, []Group{{LR: 1, Rule: AdamConfig{Beta1: 1.5}}}, Options{}, "Adam betas"},
		{"decay", []Param{plainParam("b", 3, 1)}, []Group{{LR: 1, WeightDecay: -1}}, Options{}, "weight decay -1"},
		{"rule-lr", []Param{plainParam("b", 3, 1)}, []Group{{Rule: SGDConfig{LR: 0.1}}}, Options{}, "the group's rule sgd sets LR 0.1, which a Solver does not read: the group's LR (0) is its step size; set Group.LR instead (group 0)"},
		{"rule-lr-rsdm", []Param{stiefelParam("w", 5, 2, 1)}, []Group{{LR: 0.2, Rule: RSDMConfig{LR: 0.1, SubmanifoldSize: 2}}}, Options{}, "sets LR 0.1, which a Solver does not read"},
		{"schedule", []Param{plainParam("b", 3, 1)}, []Group{{LR: 1, Schedule: Cosine{}}}, Options{}, "cosine schedule over 0 steps"},
		{"clip", []Param{plainParam("b", 3, 1)}, []Group{{LR: 1}}, Options{ClipNorm: -1}, "clip norm -1"},
		{"no-group", []Param{plainParam("b", 3, 1)}, []Group{{LR: 1, Select: Param.Constrained}}, Options{}, `parameter "b" belongs to no group`},
		{"off-manifold", []Param{off}, []Group{good}, Options{}, `weight "w": marked as constrained but ||W^T W - I||_F`},
		{"vector", []Param{vector}, []Group{good}, Options{}, `weight "w": marked as constrained but has shape [5], want a matrix or a tensor of 3 or more axes`},
		{"grassmann-wide", []Param{grassWide}, []Group{good}, Options{}, `weight "w": marked Grassmann but is 2 x 5`},
		{"r>n", []Param{stiefelParam("w", 5, 2, 1)}, []Group{{LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 6}}}, Options{}, `weight "w": optim: RSDM submanifold size r = 6 exceeds the 5 rows of the weight (of its transpose, when it is wide): the largest r it takes is 5`},
		{"r>n-kernel", []Param{kernel}, []Group{{LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 19}}}, Options{}, `weight "conv.W": optim: RSDM submanifold size r = 19 exceeds the 18 rows of the weight (of its transpose, when it is wide): the largest r it takes is 18`},
		{"r=1", []Param{stiefelParam("w", 5, 2, 1)}, []Group{{LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 1}}}, Options{}, `weight "w": optim: RSDM submanifold size r = 1, want r >= 2`},
		{"duplicate", []Param{plainParam("b", 3, 1), plainParam("b", 3, 2)}, []Group{good}, Options{}, `two parameters are named "b"`},
		{"gradient", []Param{{Name: "b", Shape: []int{3}, Value: Host[float64]([]float64{1, 2, 3}), Grad: Host[float32]([]float32{1, 2, 3})}}, []Group{good}, Options{}, `parameter "b": value optim.Host[float64] but gradient optim.Host[float32]`},
	} {
		if _, err := NewSolver(tc.params, tc.groups, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestSolverGroups checks that each parameter steps by its group: a
// 1024-row-like and a 32-row-like weight in one solver with r = 12 and
// r = 3, an RGD group and a Riemannian Adam group, and plain parameters by
// SGD and AdamW, each equal bit for bit to its slice optimizer run alone.
func TestSolverGroups(t *testing.T) {
	big, small := stiefelParam("big", 40, 6, 1), stiefelParam("small", 8, 3, 2)
	rgdW, radamW := stiefelParam("rgd", 12, 4, 3), stiefelParam("radam", 12, 4, 4)
	sgdB, adamB := plainParam("sgd", 7, 5), plainParam("adamw", 7, 6)
	params := []Param{big, small, rgdW, radamW, sgdB, adamB}
	groups := []Group{
		{Select: func(p Param) bool { return p.Constrained() && p.Rows() >= 32 }, LR: 0.2, Rule: RSDMConfig{SubmanifoldSize: 12, Seed: 3}},
		{Select: func(p Param) bool { return p.Name == "small" }, LR: 0.3, Rule: RSDMConfig{SubmanifoldSize: 3, Seed: 3}},
		{Select: func(p Param) bool { return p.Name == "rgd" }, Rule: RGDConfig{Momentum: 0.5}, LR: 0.1},
		{Select: func(p Param) bool { return p.Name == "radam" }, Rule: RiemannianAdamConfig{}, LR: 0.05},
		{Select: func(p Param) bool { return p.Name == "sgd" }, LR: 0.1, Rule: SGDConfig{Momentum: 0.9}},
		{Rule: AdamWConfig{}, LR: 0.01, WeightDecay: 0.5},
	}
	// References: the slice optimizers, each on a copy.
	copyOf := func(p Param) []float64 { return append([]float64(nil), p.Value.(Host[float64])...) }
	stOf := func(p Param) *manifold.Stiefel[float64] {
		st, _ := manifold.NewStiefel[float64](p.Shape[0], p.Shape[1])
		return st
	}
	rBig, _ := NewRSDM(stOf(big), RSDMConfig{LR: 0.2, SubmanifoldSize: 12, Seed: WeightSeed(3, 0)})
	rSmall, _ := NewRSDM(stOf(small), RSDMConfig{LR: 0.3, SubmanifoldSize: 3, Seed: WeightSeed(3, 1)})
	rRGD, _ := NewRGD(stOf(rgdW), RGDConfig{LR: 0.1, Momentum: 0.5})
	rRAdam, _ := NewRiemannianAdam(stOf(radamW), RiemannianAdamConfig{LR: 0.05})
	rSGD, _ := NewSGD[float64](7, SGDConfig{LR: 0.1, Momentum: 0.9})
	rAdam, _ := NewAdam[float64](7, AdamConfig{LR: 0.01})
	refs := []Optimizer[float64]{rBig, rSmall, rRGD, rRAdam, rSGD, rAdam}
	refX := make([][]float64, len(params))
	for i, p := range params {
		refX[i] = copyOf(p)
	}
	s, err := NewSolver(params, groups, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := newRNG(11)
	for step := 0; step < 5; step++ {
		for i, p := range params {
			g := p.Grad.(Host[float64])
			for k := range g {
				g[k] = rng.NormFloat64()
			}
			if i == 5 { // AdamW: decoupled decay before the Adam step
				for k := range refX[i] {
					refX[i][k] *= 1 - 0.01*0.5
				}
			}
			if err := refs[i].Step(refX[i], g); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range params {
		if d := firstDiff(p.Value.(Host[float64]), refX[i]); d >= 0 {
			t.Errorf("%s differs from its optimizer run alone at entry %d", p.Name, d)
		}
	}
	if s.Steps() != 5 {
		t.Errorf("Steps() = %d after 5 steps", s.Steps())
	}
}

// TestSolverSchedules checks the schedules' factors, that a group's step
// size follows its schedule with the Solver's step count, that a step size
// of 0 freezes a group, and that SetSteps moves the schedule.
func TestSolverSchedules(t *testing.T) {
	for _, tc := range []struct {
		s    Schedule
		t    int
		want float64
	}{
		{Constant{}, 7, 1},
		{Cosine{Steps: 10}, 0, 1},
		{Cosine{Steps: 10}, 5, 0.5},
		{Cosine{Steps: 10}, 10, 0},
		{Cosine{Steps: 10, Final: 0.1}, 20, 0.1},
		{WarmupCosine{Warmup: 4, Steps: 14}, 0, 0},
		{WarmupCosine{Warmup: 4, Steps: 14}, 2, 0.5},
		{WarmupCosine{Warmup: 4, Steps: 14}, 4, 1},
		{WarmupCosine{Warmup: 4, Steps: 14}, 9, 0.5},
		{StepDecay{Every: 3, Gamma: 0.5}, 7, 0.25},
	} {
		if got := tc.s.Factor(tc.t); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%#v at %d: %v, want %v", tc.s, tc.t, got, tc.want)
		}
	}
	b := plainParam("b", 4, 1)
	frozen := plainParam("frozen", 4, 2)
	s, err := NewSolver([]Param{b, frozen}, []Group{
		{Select: func(p Param) bool { return p.Name == "b" }, LR: 0.5, Schedule: StepDecay{Every: 1, Gamma: 0.5}},
		{LR: 0},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f0 := append([]float64(nil), frozen.Value.(Host[float64])...)
	for step := 0; step < 3; step++ {
		want := append([]float64(nil), b.Value.(Host[float64])...)
		g := b.Grad.(Host[float64])
		for i := range g {
			g[i] = float64(i + 1)
			want[i] -= 0.5 * math.Pow(0.5, float64(step)) * g[i]
		}
		if got := s.LR(0); got != 0.5*math.Pow(0.5, float64(step)) {
			t.Errorf("step %d: LR %v", step, got)
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		if d := firstDiff(b.Value.(Host[float64]), want); d >= 0 {
			t.Errorf("step %d: entry %d %v, want %v", step, d, b.Value.(Host[float64])[d], want[d])
		}
	}
	if firstDiff(frozen.Value.(Host[float64]), f0) >= 0 {
		t.Error("a group with step size 0 moved")
	}
	if err := s.SetSteps(10); err != nil || s.LR(0) != 0.5*math.Pow(0.5, 10) {
		t.Errorf("after SetSteps(10): LR %v, error %v", s.LR(0), err)
	}
}

// TestClipNorm checks that the global norm is the Riemannian one for a
// constrained weight (||P_X(G)||, formed or factored, tall or wide) and the
// Euclidean one for the rest, and that clipping scales every gradient by
// ClipNorm / norm: the clipped step equals a step along the scaled
// gradients.
func TestClipNorm(t *testing.T) {
	rng := newRNG(3)
	w := stiefelParam("w", 9, 4, 1)
	wide := stiefelParam("wide", 3, 7, 2)
	b := plainParam("b", 5, 3)
	fact := stiefelParam("f", 10, 4, 4)
	const k = 3
	fa, fb := make([]float64, k*10), make([]float64, k*4)
	for i := range fa {
		fa[i] = rng.NormFloat64()
	}
	for i := range fb {
		fb[i] = rng.NormFloat64()
	}
	fact.Grad, fact.GradA, fact.GradB, fact.GradK = nil, Host[float64](fa), Host[float64](fb), k
	for _, p := range []Param{w, wide, b} {
		for i := range p.Grad.(Host[float64]) {
			p.Grad.(Host[float64])[i] = 10 * rng.NormFloat64()
		}
	}
	// The norms by definition: ||P_X(G)|| with the manifold's projection.
	proj := func(x, g []float64, n, p int) float64 {
		st, _ := manifold.NewStiefel[float64](n, p)
		out := make([]float64, n*p)
		_ = st.Proj(out, x, g)
		return linalg.Dot(out, out)
	}
	wt, gt := make([]float64, 21), make([]float64, 21)
	linalg.Transpose(wt, wide.Value.(Host[float64]), 3, 7)
	linalg.Transpose(gt, wide.Grad.(Host[float64]), 3, 7)
	full := make([]float64, 40)
	linalg.Gemm(true, false, 10, 4, k, 1, fa, 10, fb, 4, 0, full, 4)
	want := proj(w.Value.(Host[float64]), w.Grad.(Host[float64]), 9, 4) + proj(wt, gt, 7, 3) +
		linalg.Dot(b.Grad.(Host[float64]), b.Grad.(Host[float64])) + proj(fact.Value.(Host[float64]), full, 10, 4)
	norm := math.Sqrt(want)
	params := []Param{w, wide, b, fact}
	s, err := NewSolver(params, []Group{{Select: Param.Constrained, LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 3, Seed: 1}}, {LR: 0.1}}, Options{ClipNorm: norm / 4})
	if err != nil {
		t.Fatal(err)
	}
	// The same norm on a manifold of one's own, which sqNorm measures by
	// its projection: St(n,p) by another name.
	own := append([]Param(nil), params...)
	for i := range own {
		if own[i].Constrained() {
			own[i].Manifold = ownStiefel{}
		}
	}
	so, err := NewSolver(own, []Group{{Select: Param.Constrained, LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 3, Seed: 1}}, {LR: 0.1}}, Options{ClipNorm: norm / 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, sv := range []*Solver{s, so} {
		var got float64
		for i, o := range sv.slots {
			g, _ := params[i].gradient()
			sq, err := o.(normed).sqNorm(g)
			if err != nil {
				t.Fatal(err)
			}
			got += sq
		}
		if math.Abs(got-want) > 1e-9*want {
			t.Fatalf("%v: global squared norm %v, want %v", sv.params[0].Manifold, got, want)
		}
	}
	// The clipped step of b is SGD along G / 4.
	bwant := append([]float64(nil), b.Value.(Host[float64])...)
	for i, g := range b.Grad.(Host[float64]) {
		bwant[i] -= 0.1 * g / 4
	}
	if err := s.Step(); err != nil {
		t.Fatal(err)
	}
	for i, v := range b.Value.(Host[float64]) {
		if math.Abs(v-bwant[i]) > 1e-12 {
			t.Fatalf("clipped SGD step: entry %d %v, want %v", i, v, bwant[i])
		}
	}
}

// TestWideWeights checks that a weight with fewer rows than columns is
// kept row-orthonormal (W W^T = I) by RSDM, RGD and Riemannian Adam, and
// that its steps are those of the same optimizer on W^T.
func TestWideWeights(t *testing.T) {
	pr := problem.NewProcrustes[float64](9, 4, newRNG(2))
	for _, g := range []Group{
		{LR: 0.3, Rule: RSDMConfig{SubmanifoldSize: 5, Seed: 1}},
		{LR: 0.3, Rule: RSDMConfig{SubmanifoldSize: 5, Seed: 1, Sampling: Orthogonal}},
		{Rule: RGDConfig{Momentum: 0.5}, LR: 0.2},
		{Rule: RiemannianAdamConfig{}, LR: 0.05},
	} {
		wide := stiefelParam("w", 4, 9, 5)
		tall := Param{Name: "w", Shape: []int{9, 4}, Manifold: manifold.StiefelKind{}, Value: Host[float64](make([]float64, 36)), Grad: Host[float64](make([]float64, 36))}
		linalg.Transpose(tall.Value.(Host[float64]), wide.Value.(Host[float64]), 4, 9)
		sw, err := NewSolver([]Param{wide}, []Group{g}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stall, err := NewSolver([]Param{tall}, []Group{g}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f0 := pr.Value(tall.Value.(Host[float64]))
		for step := 0; step < 30; step++ {
			pr.Grad(tall.Grad.(Host[float64]), tall.Value.(Host[float64]))
			linalg.Transpose(wide.Grad.(Host[float64]), tall.Grad.(Host[float64]), 9, 4)
			if err := sw.Step(); err != nil {
				t.Fatal(err)
			}
			if err := stall.Step(); err != nil {
				t.Fatal(err)
			}
		}
		back := make([]float64, 36)
		linalg.Transpose(back, wide.Value.(Host[float64]), 4, 9)
		if d := firstDiff(back, tall.Value.(Host[float64])); d >= 0 {
			t.Errorf("%v: the wide weight's steps differ from its transpose's at entry %d", g.Rule, d)
		}
		st, _ := manifold.NewStiefel[float64](9, 4)
		if f := st.Feasibility(back); f > 1e-12 {
			t.Errorf("%v: ||W W^T - I|| = %g", g.Rule, f)
		}
		if f1 := pr.Value(tall.Value.(Host[float64])); !(f1 < f0) {
			t.Errorf("%v: the objective went from %v to %v", g.Rule, f0, f1)
		}
	}
}

// TestSolverAllOrNothing feeds a NaN gradient between good ones: each
// failed step leaves every parameter and every optimizer state bit for bit
// as it was, the error wraps ErrNotFinite and names the weight, and the
// next good step goes on as if the failed one had never been tried.
func TestSolverAllOrNothing(t *testing.T) {
	const n, p = 8, 3
	rng := newRNG(9)
	mk := func() ([]Param, [][]float64) {
		var ps []Param
		var grads [][]float64
		for k := 0; k < 3; k++ {
			w := stiefelParam(fmt.Sprintf("w%d", k), n, p, uint64(k))
			ps = append(ps, w)
			grads = append(grads, w.Grad.(Host[float64]))
		}
		b := plainParam("b", 4, 7)
		ps = append(ps, b)
		return ps, append(grads, b.Grad.(Host[float64]))
	}
	gradSeq := make([][][]float64, 6)
	for s := range gradSeq {
		gradSeq[s] = make([][]float64, 4)
		for k := range gradSeq[s] {
			size := n * p
			if k == 3 {
				size = 4
			}
			gradSeq[s][k] = make([]float64, size)
			for i := range gradSeq[s][k] {
				gradSeq[s][k][i] = rng.NormFloat64()
			}
		}
	}
	cfgs := map[string][]Group{
		"rsdm-momentum": {{Select: Param.Constrained, LR: 0.3, Rule: RSDMConfig{SubmanifoldSize: 4, Momentum: 0.5, InnerSteps: 2, Seed: 2}}, {Rule: SGDConfig{Momentum: 0.9}, LR: 0.1}},
		"rsdm-orth":     {{Select: Param.Constrained, LR: 0.3, Rule: RSDMConfig{SubmanifoldSize: 4, Sampling: Orthogonal, Seed: 2}}, {LR: 0.1, Rule: AdamConfig{}}},
		"rsdm-blocks":   {{Select: Param.Constrained, LR: 0.3, Rule: RSDMConfig{SubmanifoldSize: 3, Sampling: Blocks, Seed: 2}}, {LR: 0.1, Rule: AdamWConfig{}}},
		"rgd-momentum":  {{Select: Param.Constrained, Rule: RGDConfig{Momentum: 0.9}, LR: 0.3}, {LR: 0.1, Rule: AdamConfig{}}},
		"radam":         {{Select: Param.Constrained, Rule: RiemannianAdamConfig{}, LR: 0.1, Schedule: Cosine{Steps: 6}}, {LR: 0.1}},
	}
	for name, groups := range cfgs {
		ref, refG := mk()
		rs, err := NewSolver(ref, groups, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for s := range gradSeq {
			for k := range refG {
				copy(refG[k], gradSeq[s][k])
			}
			if err := rs.Step(); err != nil {
				t.Fatal(err)
			}
		}
		got, gotG := mk()
		gs, _ := NewSolver(got, groups, Options{})
		for s := range gradSeq {
			for k := range gotG {
				copy(gotG[k], gradSeq[s][k])
			}
			before := snapshot(got, gs)
			gotG[2][5] = math.Inf(-1)
			err := gs.Step()
			if !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), `weight "w2"`) {
				t.Fatalf("%s step %d: error %v, want ErrNotFinite naming w2", name, s, err)
			}
			if after := snapshot(got, gs); after != before {
				t.Fatalf("%s step %d: a failed step changed the parameters or the optimizer state", name, s)
			}
			gotG[2][5] = gradSeq[s][2][5]
			if err := gs.Step(); err != nil {
				t.Fatal(err)
			}
		}
		if snapshot(got, gs) != snapshot(ref, rs) {
			t.Errorf("%s: the run with failed steps ended elsewhere than the straight run", name)
		}
	}
}

// failingReorth is a Stiefel manifold whose Orthonormalize fails.
type failingReorth struct{ *manifold.Stiefel[float64] }

func (failingReorth) Orthonormalize([]float64) error { return errors.New("orthonormalize failed") }

// TestRSDMReorthFailure checks that an RSDM step whose re-orthonormalization
// fails leaves the weight and the optimizer's state as they were.
func TestRSDMReorthFailure(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](10, 4)
	for _, sampling := range Samplers {
		o, err := NewRSDM[float64](failingReorth{st}, RSDMConfig{LR: 0.2, SubmanifoldSize: 4, Sampling: sampling, ReorthEvery: 3, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, 40)
		_ = st.Random(x, newRNG(2))
		g := make([]float64, 40)
		for i := range g {
			g[i] = float64(i%7) - 3
		}
		for k := 0; k < 2; k++ {
			if err := o.Step(x, g); err != nil {
				t.Fatal(err)
			}
		}
		xb := append([]float64(nil), x...)
		sb := fmt.Sprint(o.State())
		if err := o.Step(x, g); err == nil || !strings.Contains(err.Error(), "orthonormalize failed") {
			t.Fatalf("%v: error %v", sampling, err)
		}
		if fmt.Sprint(o.State()) != sb || firstDiff(x, xb) >= 0 {
			t.Errorf("%v: the failed step moved the weight or the state", sampling)
		}
	}
}

func firstDiff(a, b []float64) int {
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	return -1
}

// snapshot renders every parameter's value bits and the solver's state.
func snapshot(ps []Param, s *Solver) string {
	var b strings.Builder
	for _, p := range ps {
		for _, v := range p.Value.(Host[float64]) {
			fmt.Fprintf(&b, "%x,", math.Float64bits(v))
		}
	}
	fmt.Fprint(&b, s.State(), s.Steps())
	return b.String()
}

// TestSolverAbortsPrepared checks that when the second weight's step fails
// after the first weight's step was prepared (its sampler advanced), the
// Solver leaves both weights and both states as they were.
func TestSolverAbortsPrepared(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](10, 4)
	var ps []Param
	for k := 0; k < 2; k++ {
		w := stiefelParam(fmt.Sprintf("w%d", k), 10, 4, uint64(k))
		for i := range w.Grad.(Host[float64]) {
			w.Grad.(Host[float64])[i] = float64((i+k)%5) - 2
		}
		ps = append(ps, w)
	}
	s, err := NewSolver(ps, []Group{{LR: 0.2, Rule: RSDMConfig{SubmanifoldSize: 4, Seed: 1}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := NewRSDM[float64](failingReorth{st}, RSDMConfig{LR: 0.2, SubmanifoldSize: 4, ReorthEvery: 1, Seed: 7})
	x1 := ps[1].Value.(Host[float64])
	s.slots[1] = &typedSlot[float64]{Stepper: &optStepper[float64]{o: bad, x: x1, lr: 0.2}, x: x1, m: st, rows: 10, cols: 4}
	before := snapshot(ps, s)
	if err := s.Step(); err == nil || !strings.Contains(err.Error(), `weight "w1"`) || !strings.Contains(err.Error(), "no parameter was updated") {
		t.Fatalf("error %v", err)
	}
	if snapshot(ps, s) != before {
		t.Error("the failed step moved a weight or advanced a sampler")
	}
}

// TestSolverKernels steps convolution kernels, tensors of shape (out, in,
// kh, kw) on the Stiefel manifold as their out x (in kh kw) matrix view,
// wide and tall, with RSDM, RGD and Riemannian Adam: each step descends
// the loss and keeps the kernel on the manifold, in float64, as the same
// rule does on the matrix itself (bit for bit).
func TestSolverKernels(t *testing.T) {
	for _, shape := range [][]int{{4, 2, 3, 3}, {20, 1, 3, 3}} {
		rows, cols, _ := manifold.MatrixOf(shape)
		for _, rule := range []Rule{RSDMConfig{SubmanifoldSize: min(rows, cols, 3) + 1, Seed: 2}, RGDConfig{}, RiemannianAdamConfig{}} {
			// The same weight twice: as a kernel and as its matrix view.
			k, m := stiefelParam("k", rows, cols, 3), stiefelParam("m", rows, cols, 3)
			k.Shape = shape
			target := stiefelParam("t", rows, cols, 4).Value.(Host[float64])
			var losses []float64
			solvers := make([]*Solver, 2)
			for i, p := range []Param{k, m} {
				w, g := p.Value.(Host[float64]), p.Grad.(Host[float64])
				p.GradFunc = func() (Value, error) { // the gradient of ||W - T||^2 / 2
					for j := range g {
						g[j] = w[j] - target[j]
					}
					return g, nil
				}
				var err error
				if solvers[i], err = NewSolver([]Param{p}, []Group{{LR: 0.1, Rule: rule}}, Options{}); err != nil {
					t.Fatalf("%v %v: %v", shape, rule, err)
				}
			}
			loss := func(w []float64) float64 {
				var s float64
				for j := range w {
					s += (w[j] - target[j]) * (w[j] - target[j]) / 2
				}
				return s
			}
			kw := k.Value.(Host[float64])
			losses = append(losses, loss(kw))
			for step := 0; step < 20; step++ {
				for _, s := range solvers {
					if err := s.Step(); err != nil {
						t.Fatal(err)
					}
				}
			}
			losses = append(losses, loss(kw))
			if !(losses[1] < losses[0]) {
				t.Errorf("%v %v: loss %v after 20 steps, from %v", shape, rule, losses[1], losses[0])
			}
			if f, err := k.Feasibility(); err != nil || f > 1e-12 {
				t.Errorf("%v %v: %.3g from the manifold (%v)", shape, rule, f, err)
			}
			for j, v := range m.Value.(Host[float64]) {
				if kw[j] != v {
					t.Fatalf("%v %v: the kernel and its matrix view part at entry %d: %v, %v", shape, rule, j, kw[j], v)
				}
			}
		}
	}
}

// TestRuleLRAgreeing checks that a rule whose own LR equals its group's
// is accepted: only a step size the Solver would ignore is refused.
func TestRuleLRAgreeing(t *testing.T) {
	if _, err := NewSolver([]Param{plainParam("b", 3, 1)}, []Group{{LR: 0.1, Rule: SGDConfig{LR: 0.1}}}, Options{}); err != nil {
		t.Errorf("a rule's LR equal to its group's: %v", err)
	}
}
