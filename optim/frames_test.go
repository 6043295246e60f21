package optim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/manifold"
)

// ownStiefel is St(n,p) as a manifold.Kind of one's own: its manifold
// embeds *manifold.Stiefel, so the Solver knows it by its methods only.
type ownStiefel struct{}

func (ownStiefel) String() string { return "own-stiefel" }
func (ownStiefel) Float32(n, p int) (manifold.Manifold[float32], error) {
	st, err := manifold.NewStiefel[float32](n, p)
	return ownStiefelOf[float32]{st}, err
}
func (ownStiefel) Float64(n, p int) (manifold.Manifold[float64], error) {
	st, err := manifold.NewStiefel[float64](n, p)
	return ownStiefelOf[float64]{st}, err
}

type ownStiefelOf[T Float] struct{ *manifold.Stiefel[T] }

// oblique is the oblique manifold of n x p points with unit columns (not
// orthonormal frames, for p > 1), with its own projection and retraction.
type oblique struct{}

func (oblique) String() string { return "oblique" }
func (oblique) Float32(n, p int) (manifold.Manifold[float32], error) {
	return &obliqueOf[float32]{n, p}, nil
}
func (oblique) Float64(n, p int) (manifold.Manifold[float64], error) {
	return &obliqueOf[float64]{n, p}, nil
}

type obliqueOf[T Float] struct{ n, p int }

func (o *obliqueOf[T]) Dims() (int, int) { return o.n, o.p }

// Proj removes from each column of v its part along x's column.
func (o *obliqueOf[T]) Proj(dst, x, v []T) error {
	for j := 0; j < o.p; j++ {
		var d float64
		for i := 0; i < o.n; i++ {
			d += float64(x[i*o.p+j]) * float64(v[i*o.p+j])
		}
		for i := 0; i < o.n; i++ {
			dst[i*o.p+j] = v[i*o.p+j] - T(d)*x[i*o.p+j]
		}
	}
	return nil
}
func (o *obliqueOf[T]) Retract(dst, x, v []T) error {
	for i := range x {
		dst[i] = x[i] + v[i]
	}
	return o.Orthonormalize(dst)
}
func (o *obliqueOf[T]) Random(dst []T, rng *rand.Rand) error {
	for i := range dst {
		dst[i] = T(rng.NormFloat64())
	}
	return o.Orthonormalize(dst)
}
func (o *obliqueOf[T]) Feasibility(x []T) float64 {
	var d float64
	for j := 0; j < o.p; j++ {
		var s float64
		for i := 0; i < o.n; i++ {
			s += float64(x[i*o.p+j]) * float64(x[i*o.p+j])
		}
		d += (s - 1) * (s - 1)
	}
	return math.Sqrt(d)
}

// Orthonormalize scales each column to unit length.
func (o *obliqueOf[T]) Orthonormalize(x []T) error {
	for j := 0; j < o.p; j++ {
		var s float64
		for i := 0; i < o.n; i++ {
			s += float64(x[i*o.p+j]) * float64(x[i*o.p+j])
		}
		for i := 0; i < o.n; i++ {
			x[i*o.p+j] = T(float64(x[i*o.p+j]) / math.Sqrt(s))
		}
	}
	return nil
}

// obliqueParam returns an n x p weight on the oblique manifold.
func obliqueParam(n, p int, seed uint64) Param {
	m := &obliqueOf[float64]{n, p}
	x := make([]float64, n*p)
	_ = m.Random(x, newRNG(seed))
	g := make([]float64, n*p)
	for i := range g {
		g[i] = float64(i%5) - 2
	}
	return Param{Name: "ob", Shape: []int{n, p}, Manifold: oblique{}, Value: Host[float64](x), Grad: Host[float64](g)}
}

// TestRSDMRefusesNonFrames: RSDM refuses, naming the weight and why, a
// manifold whose points are not orthonormal frames, and takes St(n,p)
// under a name of one's own; RGD steps the oblique weight.
func TestRSDMRefusesNonFrames(t *testing.T) {
	_, err := NewSolver([]Param{obliqueParam(8, 3, 1)}, []Group{{LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 3}}}, Options{})
	if err == nil || !strings.Contains(err.Error(), `"ob"`) || !strings.Contains(err.Error(), "orthonormal frames") || !strings.Contains(err.Error(), "oblique") {
		t.Errorf("RSDM on the oblique manifold: %v, want a refusal naming the weight, the manifold and orthonormal frames", err)
	}
	w := stiefelParam("w", 8, 3, 2)
	w.Manifold = ownStiefel{}
	if _, err := NewSolver([]Param{w}, []Group{{LR: 0.1, Rule: RSDMConfig{SubmanifoldSize: 3}}}, Options{}); err != nil {
		t.Errorf("RSDM on St(n,p) of one's own: %v", err)
	}
	ob := obliqueParam(8, 3, 1)
	s, err := NewSolver([]Param{ob}, []Group{{LR: 0.1, Rule: RGDConfig{}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Step(); err != nil {
		t.Fatal(err)
	}
	if f := (&obliqueOf[float64]{8, 3}).Feasibility(ob.Value.(Host[float64])); !(f < 1e-12) {
		t.Errorf("RGD left the oblique manifold by %v", f)
	}
}

// TestClipOwnManifold: on a manifold of one's own, clipping measures the
// gradient by the manifold's projection (with a ClipNorm of half that norm
// the RGD step moves as one along half the gradient), and a start off it
// is refused in the manifold's own terms, not by ||W^T W - I||.
func TestClipOwnManifold(t *testing.T) {
	a, b := obliqueParam(8, 3, 1), obliqueParam(8, 3, 1)
	m := &obliqueOf[float64]{8, 3}
	pg := make([]float64, 24)
	_ = m.Proj(pg, a.Value.(Host[float64]), a.Grad.(Host[float64]))
	var sq float64
	for _, v := range pg {
		sq += v * v
	}
	for i := range b.Grad.(Host[float64]) {
		b.Grad.(Host[float64])[i] /= 2
	}
	clipped, err := NewSolver([]Param{a}, []Group{{LR: 0.1, Rule: RGDConfig{}}}, Options{ClipNorm: math.Sqrt(sq) / 2})
	if err != nil {
		t.Fatal(err)
	}
	halved, _ := NewSolver([]Param{b}, []Group{{LR: 0.1, Rule: RGDConfig{}}}, Options{})
	if err := clipped.Step(); err != nil {
		t.Fatal(err)
	}
	_ = halved.Step()
	for i, v := range a.Value.(Host[float64]) {
		if math.Abs(v-b.Value.(Host[float64])[i]) > 1e-12 {
			t.Fatalf("entry %d: clipped %v, along half the gradient %v", i, v, b.Value.(Host[float64])[i])
		}
	}
	off := obliqueParam(8, 3, 1)
	off.Value.(Host[float64])[0] += 0.5
	_, err = NewSolver([]Param{off}, []Group{{LR: 0.1, Rule: RGDConfig{}}}, Options{})
	if err == nil || strings.Contains(err.Error(), "W^T W") || !strings.Contains(err.Error(), "oblique") {
		t.Errorf("a start off the oblique manifold: %v, want it named by the manifold", err)
	}
}
