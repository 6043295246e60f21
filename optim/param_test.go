package optim

import (
	"math"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// TestOrthonormalize checks that NewSolver refuses a Gaussian weight,
// naming Param.Orthonormalize, and takes it once that call has put it on
// its manifold: tall and wide Stiefel weights, a Grassmann one and one on a
// manifold of the tests' own (oblique, frames_test.go).
func TestOrthonormalize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		m     manifold.Kind
	}{
		{"tall", []int{7, 3}, manifold.StiefelKind{}},
		{"wide", []int{3, 7}, manifold.StiefelKind{}},
		{"grassmann", []int{6, 2}, manifold.GrassmannKind{}},
		{"oblique", []int{6, 2}, oblique{}},
	} {
		rng := newRNG(3)
		n := tc.shape[0] * tc.shape[1]
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		p := Param{Name: "w", Shape: tc.shape, Manifold: tc.m, Value: Host[float64](v), Grad: Host[float64](make([]float64, n))}
		groups := []Group{{LR: 0.1, Rule: RGDConfig{}}}
		if _, err := NewSolver([]Param{p}, groups, Options{}); err == nil || !strings.Contains(err.Error(), "optim.Param.Orthonormalize") {
			t.Errorf("%s: a Gaussian weight: error %v, want one naming optim.Param.Orthonormalize", tc.name, err)
		}
		if err := p.Orthonormalize(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m, wide, err := ManifoldOf[float64](p)
		if err != nil {
			t.Fatal(err)
		}
		x := v
		if wide {
			x = make([]float64, n)
			linalg.Transpose(x, v, tc.shape[0], tc.shape[1])
		}
		if f := m.Feasibility(x); f > 1e-12 {
			t.Errorf("%s: distance %g from the manifold after Orthonormalize", tc.name, f)
		}
		s, err := NewSolver([]Param{p}, groups, Options{})
		if err != nil {
			t.Fatalf("%s: after Orthonormalize: %v", tc.name, err)
		}
		for i := range p.Grad.(Host[float64]) {
			p.Grad.(Host[float64])[i] = float64(i%3) - 1
		}
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
		if wide {
			linalg.Transpose(x, v, tc.shape[0], tc.shape[1])
		}
		if f := m.Feasibility(x); f > 1e-12 {
			t.Errorf("%s: distance %g from the manifold after a step", tc.name, f)
		}
	}
	bad := Param{Name: "z", Shape: []int{4, 2}, Manifold: manifold.StiefelKind{}, Value: Host[float32](make([]float32, 8))}
	bad.Value.(Host[float32])[3] = float32(math.NaN())
	if err := bad.Orthonormalize(); err == nil || !strings.Contains(err.Error(), `weight "z"`) {
		t.Errorf("a weight with a NaN: error %v", err)
	}
	plain := Param{Name: "b", Shape: []int{4}, Value: Host[float32](make([]float32, 4))}
	if err := plain.Orthonormalize(); err == nil || !strings.Contains(err.Error(), "not constrained") {
		t.Errorf("an unconstrained parameter: error %v", err)
	}
}
