package optim

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/manifold"
)

// describedFunc is a Described rule whose description is a function.
type describedFunc func(StepBlocks) error

func (describedFunc) String() string                                { return "func" }
func (describedFunc) Constrained() bool                             { return true }
func (f describedFunc) Stepper(p Param, b Binding) (Stepper, error) { return BindDescribed(p, b, f) }
func (f describedFunc) Describe(b StepBlocks) error                 { return f(b) }

// TestDescribedRefuses checks that a description that cannot be run is
// refused when the stepper is built, saying why; among them
// StepBlocks.Submanifold, a step of its own, beside another block.
func TestDescribedRefuses(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](5, 3)
	c := RSDMConfig{SubmanifoldSize: 2}
	for _, tc := range []struct {
		name string
		d    describedFunc
		want string
	}{
		{"no move", func(b StepBlocks) error { b.Proj(b.Buffer(""), X, G); return nil }, "moves nothing into the weight"},
		{"two moves", func(b StepBlocks) error { r := b.Buffer(""); b.Move(r); b.Move(r); return nil }, "moves the weight twice"},
		{"writes X", func(b StepBlocks) error { b.Proj(X, X, G); b.Move(X); return nil }, "writes the weight or its gradient"},
		{"unknown ref", func(b StepBlocks) error { b.Move(Ref(7)); return nil }, "names matrix 7"},
		{"two states", func(b StepBlocks) error { b.Buffer("m"); r := b.Buffer("m"); b.Move(r); return nil }, `two state buffers named "m"`},
		{"retract in place", func(b StepBlocks) error {
			r := b.Buffer("")
			b.Retract(r, r, Coef{Value: 1}, G)
			b.Move(r)
			return nil
		}, "overwrites its point"},
		{"its own error", func(StepBlocks) error { return errTest }, errTest.Error()},
		{"submanifold after a block", func(b StepBlocks) error { b.Proj(b.Buffer(""), X, G); b.Submanifold(c); return nil }, "step of its own"},
		{"submanifold with a counter", func(b StepBlocks) error { b.Counter("t"); b.Submanifold(c); return nil }, "step of its own"},
		{"submanifold then a move", func(b StepBlocks) error { b.Submanifold(c); b.Move(G); return nil }, "moves the weight twice"},
		{"submanifold twice", func(b StepBlocks) error { b.Submanifold(c); b.Submanifold(c); return nil }, "moves the weight twice"},
	} {
		if _, err := newDescribed[float64](st, 0, tc.d, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

var errTest = &testError{}

type testError struct{}

func (*testError) Error() string { return "the description's own error" }

// TestDescribedTwoPhase checks the host's stepper of a description with a
// state buffer: a prepared step that is aborted moves neither the weight
// nor the state, the step taken then equals the aborted one's prepared
// values, the weight stays on the manifold, and the momentum saved is
// tangent at the new point (it was carried there by Proj).
func TestDescribedTwoPhase(t *testing.T) {
	for _, shape := range [][2]int{{6, 3}, {4, 4}} {
		st, _ := manifold.NewStiefel[float64](shape[0], shape[1])
		x, g := make([]float64, shape[0]*shape[1]), make([]float64, shape[0]*shape[1])
		rng := rand.New(rand.NewPCG(3, 4))
		_ = st.Random(x, rng)
		for i := range g {
			g[i] = rng.NormFloat64()
		}
		o, err := NewRGD(st, RGDConfig{LR: 0.1, Momentum: 0.9})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Step(x, g); err != nil {
			t.Fatal(err)
		}
		x0, s0 := slices.Clone(x), o.State()
		if err := o.prepare(x, g); err != nil {
			t.Fatal(err)
		}
		o.abort()
		if !slices.Equal(x, x0) || !sameBuffers(o.State(), s0) {
			t.Fatalf("%v: a prepared, aborted step moved the weight or the state", shape)
		}
		if err := o.Step(x, g); err != nil {
			t.Fatal(err)
		}
		if f := st.Feasibility(x); f > 1e-12 {
			t.Errorf("%v: ||X^T X - I||_F = %.3g after two steps", shape, f)
		}
		mom := o.State().Buffers[StateMomentum].([]float64)
		tangent := make([]float64, len(mom))
		if err := st.Proj(tangent, x, mom); err != nil {
			t.Fatal(err)
		}
		for i := range mom {
			if d := tangent[i] - mom[i]; d > 1e-12 || d < -1e-12 {
				t.Fatalf("%v: the momentum is not tangent at the new point (%.3g at %d)", shape, d, i)
			}
		}
	}
}

// sameBuffers reports whether two states hold the same buffers, bit for
// bit.
func sameBuffers(a, b State) bool {
	if len(a.Buffers) != len(b.Buffers) {
		return false
	}
	for k, v := range a.Buffers {
		w, ok := b.Buffers[k]
		if !ok || !slices.Equal(v.([]float64), w.([]float64)) {
			return false
		}
	}
	return true
}

// TestRSDMFromDescription checks that RSDM's stepper, built from its
// description, is the host's RSDM (which a data-parallel Solver splits)
// seeded from the rule's seed and the weight's index: it steps as
// NewRSDM does with WeightSeed, bit for bit, in both float types.
func TestRSDMFromDescription(t *testing.T) {
	testRSDMFromDescription[float32](t)
	testRSDMFromDescription[float64](t)
}

func testRSDMFromDescription[T Float](t *testing.T) {
	const n, p, index = 7, 3, 2
	c := RSDMConfig{SubmanifoldSize: 3, InnerSteps: 2, Momentum: 0.5, Seed: 11}
	m, _ := manifold.NewStiefel[T](n, p)
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]T, n*p)
	if err := m.Random(x, rng); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(x)
	st, err := c.Stepper(Param{Name: "w", Shape: []int{n, p}, Manifold: manifold.StiefelKind{}, Value: Host[T](x)}, Binding{Index: index})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*optStepper[T]).o.(*RSDM[T]); !ok {
		t.Fatalf("RSDM's stepper steps by %T, want *RSDM", st.(*optStepper[T]).o)
	}
	ref, err := NewRSDM(m, RSDMConfig{SubmanifoldSize: 3, InnerSteps: 2, Momentum: 0.5, Seed: WeightSeed(c.Seed, index), LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	g := make([]T, n*p)
	for k := 0; k < 5; k++ {
		for i := range g {
			g[i] = T(rng.NormFloat64())
		}
		if err := st.Prepare(Host[T](g), 0.1); err != nil {
			t.Fatal(err)
		}
		if err := st.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := ref.Step(want, g); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x, want) {
			t.Fatalf("%T step %d: the described stepper's weight differs from NewRSDM's", x, k)
		}
	}
}
