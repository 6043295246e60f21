package param

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
)

// TestMarking checks that the marking travels with the parameter: Nodes
// and Constrained, and the kind each marking records.
func TestMarking(t *testing.T) {
	g := G.NewGraph()
	a := G.NewMatrix(g, tensor.Float32, G.WithShape(4, 2), G.WithName("a"), G.WithInit(G.Zeroes()))
	b := G.NewMatrix(g, tensor.Float32, G.WithShape(4, 2), G.WithName("b"), G.WithInit(G.Zeroes()))
	c := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 2), G.WithName("c"), G.WithInit(G.Zeroes()))
	ps := []Param{OnStiefel(a), Plain(b), OnGrassmann(c)}
	if got := Nodes(ps); len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Errorf("Nodes: %v", got)
	}
	if got := Constrained(ps); len(got) != 2 || got[0].Node != a || got[1].Node != c {
		t.Errorf("Constrained: %v", got)
	}
	for i, want := range []manifold.Kind{manifold.StiefelKind{}, nil, manifold.GrassmannKind{}} {
		if ps[i].Manifold != want {
			t.Errorf("parameter %d: manifold %v, want %v", i, ps[i].Manifold, want)
		}
	}
}

// TestOrthonormalize checks that Orthonormalize puts tall and wide Stiefel
// weights, float32 and float64, on their manifold, that Feasibility then
// reports them there, and that it refuses what has no manifold: a plain
// parameter, a vector, a wide Grassmann weight.
func TestOrthonormalize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dt    tensor.Dtype
		shape []int
		tol   float64
	}{
		{"tall-f64", tensor.Float64, []int{7, 3}, 1e-12},
		{"wide-f64", tensor.Float64, []int{3, 7}, 1e-12},
		{"kernel-f32", tensor.Float32, []int{4, 2, 3, 3}, 1e-5},
	} {
		g := G.NewGraph()
		w := G.NewTensor(g, tc.dt, len(tc.shape), G.WithShape(tc.shape...), G.WithName("w"), G.WithInit(G.GlorotN(1)))
		p := OnStiefel(w)
		if f, err := p.Feasibility(); err != nil || f < 0.1 {
			t.Errorf("%s: a Gaussian weight: feasibility %g, %v", tc.name, f, err)
		}
		if err := p.Orthonormalize(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f, err := p.Feasibility(); err != nil || !(f < tc.tol) {
			t.Errorf("%s: after Orthonormalize: feasibility %g, %v", tc.name, f, err)
		}
	}
	g := G.NewGraph()
	plain := Plain(G.NewMatrix(g, tensor.Float64, G.WithShape(4, 2), G.WithName("b"), G.WithInit(G.Zeroes())))
	vector := OnStiefel(G.NewVector(g, tensor.Float64, G.WithShape(4), G.WithName("v"), G.WithInit(G.Zeroes())))
	wideGr := OnGrassmann(G.NewMatrix(g, tensor.Float64, G.WithShape(2, 5), G.WithName("gr"), G.WithInit(G.GlorotN(1))))
	for _, tc := range []struct {
		p    Param
		want string
	}{
		{plain, `param: parameter "b" is not constrained`},
		{vector, `param: weight "v": marked as constrained but has shape (4)`},
		{wideGr, `param: weight "gr": marked Grassmann but is 2 x 5`},
	} {
		if err := tc.p.Orthonormalize(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Orthonormalize: error %v, want %q", err, tc.want)
		}
		if f, err := tc.p.Feasibility(); err == nil || !strings.Contains(err.Error(), tc.want) || !math.IsNaN(f) && f != 0 {
			t.Errorf("Feasibility: %g, error %v, want %q", f, err, tc.want)
		}
	}
}
