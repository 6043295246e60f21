package paramopt

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 3)) }

// procrustesGraph builds loss = ||W C - D||^2 / 2 in Gorgonia for an n x p
// weight W started at w0; its optimum over St(n,p) is U V^T from the SVD of
// D C^T, with the value returned as fstar.
type procrustesGraph struct {
	g    *G.ExprGraph
	w    *G.Node
	loss *G.Node
	vm   G.VM
}

func newProcrustesGraph[T optim.Float](t *testing.T, n, p int, seed uint64) (*procrustesGraph, float64) {
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
		g    optim.Group
		tol  float64
		m    manifold.Kind // the weight's manifold; nil: OnStiefel
	}{
		{"rsdm-f64", false, optim.Group{LR: 0.05, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Seed: 1}}, 1e-8, nil},
		{"rsdm-o-f64", false, optim.Group{LR: 0.05, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Sampling: optim.Orthogonal, Seed: 1}}, 1e-8, nil},
		{"rgd-f64", false, optim.Group{Rule: optim.RGDConfig{Momentum: 0.5}, LR: 0.02}, 1e-8, manifold.StiefelKind{Retraction: manifold.Cayley}},
		{"radam-f64", false, optim.Group{Rule: optim.RiemannianAdamConfig{}, LR: 0.02, Schedule: optim.Cosine{Steps: 6000}}, 1e-6, nil},
		{"rsdm-f32", true, optim.Group{LR: 0.05, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Seed: 1}}, 1e-5, nil},
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
			w := param.OnStiefel(pg.w)
			if tc.m != nil {
				w = param.On(pg.w, tc.m)
			}
			s, err := NewSolver([]param.Param{w}, []optim.Group{tc.g}, optim.Options{})
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
	for _, rule := range []optim.Rule{optim.SGDConfig{}, optim.AdamConfig{}} {
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
		s, err := NewSolver([]param.Param{param.OnStiefel(w), param.Plain(b)}, []optim.Group{{Select: optim.Param.Constrained, LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 4}}, {Rule: rule, LR: 0.01}}, optim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		gb, _ := b.Grad()
		wantB := append([]float64(nil), b.Value().Data().([]float64)...)
		for i, gi := range gb.Data().([]float64) {
			if rule == optim.Rule(optim.SGDConfig{}) {
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

// TestSolverZeroesAfterFailure checks that a failed Step (a NaN gradient)
// still clears the gradients, as a good one does: the tape machine would
// add the next run's gradients to them.
func TestSolverZeroesAfterFailure(t *testing.T) {
	const n, p = 8, 3
	st, _ := manifold.NewStiefel[float64](n, p)
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
	s, err := NewSolver([]param.Param{param.OnStiefel(w)}, []optim.Group{{LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 3}}}, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	gw, _ := w.Grad()
	gw.Data().([]float64)[0] = math.NaN()
	if err := s.Step(); !errors.Is(err, optim.ErrNotFinite) || !strings.Contains(err.Error(), `weight "w"`) {
		t.Errorf("NaN gradient: error %v, want ErrNotFinite naming w", err)
	}
	if gz, _ := w.Grad(); linalg.Norm(gz.Data().([]float64)) != 0 {
		t.Error("a failed Step left the gradient in place: the next run would add to it")
	}
}

// TestParams checks that Params's parameters carry the constraint, the
// node's value slice and a gradient read through the node.
func TestParams(t *testing.T) {
	g := G.NewGraph()
	a := G.NewMatrix(g, tensor.Float32, G.WithShape(4, 2), G.WithName("a"), G.WithInit(G.Zeroes()))
	b := G.NewMatrix(g, tensor.Float32, G.WithShape(4, 2), G.WithName("b"), G.WithInit(G.Zeroes()))
	c := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 2), G.WithName("c"), G.WithInit(G.Zeroes()))
	ps := []param.Param{param.OnStiefel(a), param.Plain(b), param.OnGrassmann(c)}
	op, err := Params(ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []manifold.Kind{manifold.StiefelKind{}, nil, manifold.GrassmannKind{}} {
		if op[i].Manifold != want || op[i].Name != ps[i].Name() {
			t.Errorf("parameter %d: %+v", i, op[i])
		}
	}
	op[0].Value.(optim.Host[float32])[3] = 5
	if a.Value().Data().([]float32)[3] != 5 {
		t.Error("Params's value is not the node's own slice")
	}
	if _, err := op[0].GradFunc(); err == nil || !strings.Contains(err.Error(), "BindDualValues") {
		t.Errorf("gradient of a node never run: error %v", err)
	}
}
