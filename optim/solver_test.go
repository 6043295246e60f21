package optim

import (
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
			s, err := NewSolver(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			params := []G.ValueGrad{Stiefel(pg.w)}
			var gap float64
			for step := 0; step < 6000; step++ {
				if err := pg.vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				if gap = math.Abs(pg.lossValue()-fstar) / math.Abs(fstar); gap < tc.tol {
					break
				}
				if err := s.Step(params); err != nil {
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
	for _, rule := range []Rule{SGD, Adam} {
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
		s, err := NewSolver(SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 4}, Other: OtherConfig{Rule: rule, LR: 0.01}})
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		gb, _ := b.Grad()
		wantB := append([]float64(nil), b.Value().Data().([]float64)...)
		for i, gi := range gb.Data().([]float64) {
			if rule == SGD {
				wantB[i] -= 0.01 * gi
			} else {
				wantB[i] -= 0.01 * gi / (math.Abs(gi) + 1e-8)
			}
		}
		if err := s.Step([]G.ValueGrad{Stiefel(w), b}); err != nil {
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
// and gradients, and that a failing step changes no parameter.
func TestSolverErrors(t *testing.T) {
	good := SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 3}, Other: OtherConfig{LR: 0.1}}
	for _, tc := range []struct {
		name string
		cfg  SolverConfig
		want string
	}{
		{"other-lr", SolverConfig{RSDM: good.RSDM}, "(unconstrained parameters)"},
		{"rsdm-lr", SolverConfig{Other: good.Other}, "> 0 (RSDM)"},
		{"rule", SolverConfig{RSDM: good.RSDM, Other: OtherConfig{LR: 1, Rule: 7}}, "unknown update rule"},
		{"adam", SolverConfig{RSDM: good.RSDM, Other: OtherConfig{LR: 1, Rule: Adam, Beta1: 1.5}}, "Adam betas"},
	} {
		if _, err := NewSolver(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}

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
		{"off-manifold", []int{5, 2}, off, good, `weight "w": marked as constrained but ||W^T W - I||_F`},
		{"3-d", []int{5, 2, 1}, on, good, "has shape (5, 2, 1), want a matrix"},
		{"wide", []int{2, 5}, on, good, "n = 2 < p = 5"},
		{"r>n", []int{5, 2}, on, SolverConfig{RSDM: RSDMConfig{LR: 0.1, SubmanifoldSize: 6}, Other: good.Other}, "r = 6 exceeds the 5 rows"},
	} {
		w, vm := build(tc.shape, append([]float64(nil), tc.val...))
		s, _ := NewSolver(tc.cfg)
		if err := s.Step([]G.ValueGrad{Stiefel(w)}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		vm.Close()
	}

	// A NaN gradient stops the step before anything moves.
	w, vm := build([]int{5, 2}, append([]float64(nil), on...))
	defer vm.Close()
	p, pvm := build([]int{3}, []float64{1, 2, 3})
	defer pvm.Close()
	s, _ := NewSolver(good)
	params := []G.ValueGrad{p, Stiefel(w)}
	gw, _ := w.Grad()
	gw.Data().([]float64)[3] = math.NaN()
	before := append([]float64(nil), p.Value().Data().([]float64)...)
	if err := s.Step(params); err == nil || !strings.Contains(err.Error(), `gradient of weight "w" has a NaN`) {
		t.Errorf("NaN gradient: error %v", err)
	}
	for i, v := range p.Value().Data().([]float64) {
		if v != before[i] {
			t.Fatal("a failed step updated a parameter")
		}
	}
	gw.Data().([]float64)[3] = 0
	if err := s.Step(params); err != nil {
		t.Fatal(err)
	}
	if err := s.Step(params[:1]); err == nil || !strings.Contains(err.Error(), "built for 2 parameters") {
		t.Errorf("shorter list: error %v", err)
	}
	if err := s.Step([]G.ValueGrad{Stiefel(w), p}); err == nil || !strings.Contains(err.Error(), "not the one the solver was built with") {
		t.Errorf("reordered list: error %v", err)
	}
}
