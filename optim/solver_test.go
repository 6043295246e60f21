package optim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// procrustesGraph builds loss = ||W C - D||^2 / 2 in Gorgonia for an n x p
// weight W started at w0; its optimum over St(n,p) is U V^T from the SVD of
// D C^T, with the value returned as fstar.
type procrustesGraph struct {
	g    *G.ExprGraph
	w    *G.Node
	loss *G.Node
	vm   G.VM
}

func newProcrustesGraph[T Float](t *testing.T, n, p int, seed uint64) (*procrustesGraph, float64) {
	t.Helper()
	rng := newRNG(seed)
	c := make([]float64, p*p)
	d := make([]float64, n*p)
	for i := range c {
		c[i] = rng.NormFloat64()
	}
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	dc := mat.NewDense(n, p, nil)
	dc.Mul(mat.NewDense(n, p, d), mat.NewDense(p, p, c).T())
	var svd mat.SVD
	svd.Factorize(dc, mat.SVDThin)
	var tr float64
	for _, s := range svd.Values(nil) {
		tr += s
	}
	fstar := (linalg.Dot(c, c) + linalg.Dot(d, d) - 2*tr) / 2
	if n == p {
		t.Fatal("use n > p: O(n) has two components")
	}
	st, _ := manifold.NewStiefel[T](n, p)
	w0 := make([]T, n*p)
	_ = st.Random(w0, rng)
	dt := tensor.Float64
	if linalg.Is32[T]() {
		dt = tensor.Float32
	}
	conv := func(a []float64) []T { b := make([]T, len(a)); linalg.Convert(b, a); return b }
	g := G.NewGraph()
	w := G.NewMatrix(g, dt, G.WithShape(n, p), G.WithName("W"), G.WithValue(tensor.New(tensor.WithShape(n, p), tensor.WithBacking(w0))))
	cn := G.NewMatrix(g, dt, G.WithShape(p, p), G.WithName("C"), G.WithValue(tensor.New(tensor.WithShape(p, p), tensor.WithBacking(conv(c)))))
	dn := G.NewMatrix(g, dt, G.WithShape(n, p), G.WithName("D"), G.WithValue(tensor.New(tensor.WithShape(n, p), tensor.WithBacking(conv(d)))))
	half := G.NewConstant(T(0.5))
	loss := G.Must(G.Mul(half, G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(w, cn)), dn))))))))
	if _, err := G.Grad(loss, w); err != nil {
		t.Fatal(err)
	}
	return &procrustesGraph{g: g, w: w, loss: loss, vm: G.NewTapeMachine(g, G.BindDualValues(w))}, fstar
}

func (pg *procrustesGraph) lossValue() float64 {
	switch v := pg.loss.Value().Data().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	return math.NaN()
}

// TestSolverConverges trains a Gorgonia graph to the closed-form Procrustes
// optimum with RSDM-P and RGD, in float64 and float32.
func TestSolverConverges(t *testing.T) {
	for _, tc := range []struct {
		name string
		f32  bool
		cfg  SolverConfig
		tol  float64
	}{
		{"rsdm-f64", false, SolverConfig{RSDM: RSDMConfig{LR: 0.05, SubmanifoldSize: 8, Seed: 1}, Other: OtherConfig{LR: 0.1}}, 1e-8},
		{"rsdm-o-f64", false, SolverConfig{RSDM: RSDMConfig{LR: 0.05, SubmanifoldSize: 8, Sampling: Orthogonal, Seed: 1}, Other: OtherConfig{LR: 0.1}}, 1e-8},
		{"rgd-f64", false, SolverConfig{Method: MethodRGD, RGD: RGDConfig{LR: 0.02, Momentum: 0.5}, RGDRetraction: manifold.Cayley, Other: OtherConfig{LR: 0.1}}, 1e-8},
		{"rsdm-f32", true, SolverConfig{RSDM: RSDMConfig{LR: 0.05, SubmanifoldSize: 8, Seed: 1}, Other: OtherConfig{LR: 0.1}}, 1e-5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pg *procrustesGraph
			var fstar float64
			if tc.f32 {
				pg, fstar = newProcrustesGraph[float32](t, 12, 5, 3)
			} else {
				pg, fstar = newProcrustesGraph[float64](t, 12, 5, 3)
			}
			defer pg.vm.Close()
			s, err := NewSolver([]G.ValueGrad{Stiefel(pg.w)}, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var gap float64
			for step := 0; step < 6000; step++ {
				if err := pg.vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				if gap = math.Abs(pg.lossValue()-fstar) / math.Abs(fstar); gap < tc.tol {
					break
				}
				if err := s.Step(); err != nil {
					t.Fatal(err)
				}
				pg.vm.Reset()
			}
			if gap >= tc.tol {
				t.Errorf("gap %.3g, want < %g", gap, tc.tol)
			}
		})
	}
}

// TestSolverPlainAndConstrained checks that an unmarked parameter gets
// exactly w - lr g (SGD), that a marked one stays on the manifold, and that
// Adam's first step is lr * g / (|g| + eps) per entry.
func TestSolverPlainAndConstrained(t *testing.T) {
	for _, rule := range []Rule{RuleSGD, RuleAdam} {
		g := G.NewGraph()
		rng := newRNG(4)
		st, _ := manifold.NewStiefel[float64](6, 3)
		w0 := make([]float64, 18)
		_ = st.Random(w0, rng)
		b0 := make([]float64, 18)
		for i := range b0 {
			b0[i] = rng.NormFloat64()
		}
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 3), G.WithName("w"), G.WithValue(tensor.New(tensor.WithShape(6, 3), tensor.WithBacking(append([]float64(nil), w0...)))))
		b := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 3), G.WithName("b"), G.WithValue(tensor.New(tensor.WithShape(6, 3), tensor.WithBacking(b0))))
		// loss = sum(w * b * 3) + sum(b^2): gradients 3b and 3w + 2b.
		three := G.NewConstant(3.0)
		loss := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Mul(three, G.Must(G.HadamardProd(w, b)))))), G.Must(G.Sum(G.Must(G.Square(b))))))
		if _, err := G.Grad(loss, w, b); err != nil {
			t.Fatal(err)
		}
		vm := G.NewTapeMachine(g, G.BindDualValues(w, b))
		s, err := NewSolver([]G.ValueGrad{Stiefel(w), b}, SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 4}, Other: OtherConfig{Rule: rule, LR: 0.01}})
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		gb, _ := b.Grad()
		wantB := append([]float64(nil), b.Value().Data().([]float64)...)
		for i, gi := range gb.Data().([]float64) {
			if rule == RuleSGD {
				wantB[i] -= 0.01 * gi
			} else {
				wantB[i] -= 0.01 * gi / (math.Abs(gi) + 1e-8)
			}
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		for i, v := range b.Value().Data().([]float64) {
			if math.Abs(v-wantB[i]) > 1e-12 {
				t.Fatalf("rule %v: plain parameter entry %d = %g, want %g", rule, i, v, wantB[i])
			}
		}
		wv := w.Value().Data().([]float64)
		if f := st.Feasibility(wv); f > 1e-12 {
			t.Errorf("constrained weight left the manifold: %g", f)
		}
		moved := false
		for i := range wv {
			moved = moved || wv[i] != w0[i]
		}
		if !moved {
			t.Error("constrained weight did not move")
		}
		if gz, _ := b.Grad(); linalg.Norm(gz.Data().([]float64)) != 0 {
			t.Error("Step left the gradient in place: the next run would add to it")
		}
		vm.Close()
	}
}

// TestSolverErrors checks the errors of bad markings, shapes, configuration
// and gradients: each names the weight, and comes from NewSolver, before any
// step.
func TestSolverErrors(t *testing.T) {
	good := SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 3}, Other: OtherConfig{LR: 0.1}}
	build := func(shape []int, val []float64) (*G.Node, G.VM) {
		g := G.NewGraph()
		w := G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName("w"), G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(val))))
		loss := G.Must(G.Sum(G.Must(G.Square(w))))
		if _, err := G.Grad(loss, w); err != nil {
			t.Fatal(err)
		}
		vm := G.NewTapeMachine(g, G.BindDualValues(w))
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return w, vm
	}
	st, _ := manifold.NewStiefel[float64](5, 2)
	on := make([]float64, 10)
	_ = st.Random(on, newRNG(1))
	off := make([]float64, 10)
	for i := range off {
		off[i] = 1
	}
	for _, tc := range []struct {
		name  string
		shape []int
		val   []float64
		cfg   SolverConfig
		want  string
	}{
		{"other-lr", []int{5, 2}, on, SolverConfig{RSDM: good.RSDM}, "(unconstrained parameters)"},
		{"rsdm-lr", []int{5, 2}, on, SolverConfig{Other: good.Other}, "> 0 (RSDM)"},
		{"rule", []int{5, 2}, on, SolverConfig{RSDM: good.RSDM, Other: OtherConfig{LR: 1, Rule: 7}}, "unknown update rule"},
		{"adam", []int{5, 2}, on, SolverConfig{RSDM: good.RSDM, Other: OtherConfig{LR: 1, Rule: RuleAdam, Beta1: 1.5}}, "Adam betas"},
		{"off-manifold", []int{5, 2}, off, good, `weight "w": marked as constrained but ||W^T W - I||_F`},
		{"3-d", []int{5, 2, 1}, on, good, `weight "w": marked as constrained but has shape (5, 2, 1), want a matrix`},
		{"wide", []int{2, 5}, on, good, `weight "w": marked as constrained but is 2 x 5: n = 2 < p = 5`},
		{"r>n", []int{5, 2}, on, SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 6}, Other: good.Other}, `weight "w": optim: RSDM submanifold size r = 6 exceeds the 5 rows`},
		{"r=1", []int{5, 2}, on, SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 1}, Other: good.Other}, `weight "w": optim: RSDM submanifold size r = 1, want r >= 2`},
	} {
		w, vm := build(tc.shape, append([]float64(nil), tc.val...))
		if _, err := NewSolver([]G.ValueGrad{Stiefel(w)}, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		vm.Close()
	}
	w, vm := build([]int{5, 2}, append([]float64(nil), on...))
	defer vm.Close()
	if _, err := NewSolver([]G.ValueGrad{Stiefel(w), w}, good); err == nil || !strings.Contains(err.Error(), `two parameters are named "w"`) {
		t.Errorf("duplicate: error %v", err)
	}
}

// TestSolverAllOrNothing feeds a NaN gradient between good ones, and a step
// whose last weight fails to re-orthonormalize: each failed step leaves
// every parameter and every optimizer state bit for bit as it was, the error
// wraps ErrNotFinite where that is the cause, the gradients are cleared as
// after a good step, and the next good step goes on as if the failed one had
// never been tried.
func TestSolverAllOrNothing(t *testing.T) {
	const n, p = 8, 3
	rng := newRNG(9)
	st, _ := manifold.NewStiefel[float64](n, p)
	mk := func() ([]Param, [][]float64) {
		var ps []Param
		var grads [][]float64
		for k := 0; k < 3; k++ {
			w := make([]float64, n*p)
			_ = st.Random(w, newRNG(uint64(k)))
			g := make([]float64, n*p)
			ps = append(ps, Param{Name: fmt.Sprintf("w%d", k), Shape: []int{n, p}, Constraint: OnStiefel, Value: w, Grad: g})
			grads = append(grads, g)
		}
		b, g := make([]float64, 4), make([]float64, 4)
		ps = append(ps, Param{Name: "b", Shape: []int{4}, Value: b, Grad: g})
		return ps, append(grads, g)
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
	cfgs := map[string]SolverConfig{
		"rsdm-momentum": {RSDM: RSDMConfig{LR: 0.3, SubmanifoldSize: 4, Momentum: 0.5, InnerSteps: 2, Seed: 2}, Other: OtherConfig{LR: 0.1, Momentum: 0.9}},
		"rsdm-orth":     {RSDM: RSDMConfig{LR: 0.3, SubmanifoldSize: 4, Sampling: Orthogonal, Seed: 2}, Other: OtherConfig{LR: 0.1, Rule: RuleAdam}},
		"rsdm-blocks":   {RSDM: RSDMConfig{LR: 0.3, SubmanifoldSize: 3, Sampling: Blocks, Seed: 2}, Other: OtherConfig{LR: 0.1}},
		"rgd-momentum":  {Method: MethodRGD, RGD: RGDConfig{LR: 0.3, Momentum: 0.9}, Other: OtherConfig{LR: 0.1, Rule: RuleAdam}},
	}
	for name, cfg := range cfgs {
		// Straight: steps 0..5 with good gradients.
		ref, refG := mk()
		rs, err := NewSliceSolver(ref, cfg)
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
		// Interrupted: a NaN gradient in the last parameter before every step.
		got, gotG := mk()
		gs, _ := NewSliceSolver(got, cfg)
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

	// A Gorgonia solver clears the gradients after a failed step too.
	g := G.NewGraph()
	w0 := make([]float64, n*p)
	_ = st.Random(w0, newRNG(1))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(n, p), G.WithName("w"), G.WithValue(tensor.New(tensor.WithShape(n, p), tensor.WithBacking(w0))))
	loss := G.Must(G.Sum(G.Must(G.Square(w))))
	if _, err := G.Grad(loss, w); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(w))
	defer vm.Close()
	s, err := NewSolver([]G.ValueGrad{Stiefel(w)}, SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 3}, Other: OtherConfig{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	gw, _ := w.Grad()
	gw.Data().([]float64)[0] = math.NaN()
	if err := s.Step(); !errors.Is(err, ErrNotFinite) {
		t.Errorf("NaN gradient: error %v, want ErrNotFinite", err)
	}
	if gz, _ := w.Grad(); linalg.Norm(gz.Data().([]float64)) != 0 {
		t.Error("a failed Step left the gradient in place: the next run would add to it")
	}
}

// failingReorth is a Stiefel manifold whose Orthonormalize fails.
type failingReorth struct{ *manifold.Stiefel[float64] }

func (failingReorth) Orthonormalize([]float64) error { return errors.New("orthonormalize failed") }

// TestRSDMReorthFailure checks that an RSDM step whose re-orthonormalization
// fails leaves the weight and the optimizer's state as they were.
func TestRSDMReorthFailure(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](10, 4)
	for _, sampling := range []Sampling{Permutation, Orthogonal, Blocks} {
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
		for _, v := range p.Value.([]float64) {
			fmt.Fprintf(&b, "%x,", math.Float64bits(v))
		}
	}
	fmt.Fprint(&b, s.State())
	return b.String()
}

// TestSolverAbortsPrepared checks that when the second weight's step fails
// after the first weight's step was prepared (its sampler advanced), the
// Solver leaves both weights and both states as they were.
func TestSolverAbortsPrepared(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](10, 4)
	var ps []Param
	for k := 0; k < 2; k++ {
		w := make([]float64, 40)
		_ = st.Random(w, newRNG(uint64(k)))
		g := make([]float64, 40)
		for i := range g {
			g[i] = float64((i+k)%5) - 2
		}
		ps = append(ps, Param{Name: fmt.Sprintf("w%d", k), Shape: []int{10, 4}, Constraint: OnStiefel, Value: w, Grad: g})
	}
	cfg := SolverConfig{RSDM: RSDMConfig{LR: 0.2, SubmanifoldSize: 4, Seed: 1}, Other: OtherConfig{LR: 0.1}}
	s, err := NewSliceSolver(ps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := NewRSDM[float64](failingReorth{st}, RSDMConfig{LR: 0.2, SubmanifoldSize: 4, ReorthEvery: 1, Seed: 7})
	s.opts[1] = &typedOpt[float64]{o: bad, constrained: true}
	before := snapshot(ps, s)
	if err := s.Step(); err == nil || !strings.Contains(err.Error(), `weight "w1"`) || !strings.Contains(err.Error(), "no parameter was updated") {
		t.Fatalf("error %v", err)
	}
	if snapshot(ps, s) != before {
		t.Error("the failed step moved a weight or advanced a sampler")
	}
}
