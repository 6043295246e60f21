package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/update"
	"github.com/orthonet/orthonet/manifold"
)

// TestElementwiseRefuses checks that a description of an unconstrained
// parameter's step that cannot be run is refused when the stepper is
// built, saying why, and that the elementwise blocks refuse a weight on a
// manifold and the manifold's blocks an unconstrained parameter.
func TestElementwiseRefuses(t *testing.T) {
	st, _ := manifold.NewStiefel[float64](5, 3)
	for _, tc := range []struct {
		name string
		m    manifold.Manifold[float64]
		d    describedFunc
		want string
	}{
		{"decay alone", nil, func(b StepBlocks) error { b.Decay(0.1); b.Move(G); return nil }, "Decay is not followed"},
		{"negative decay", nil, func(b StepBlocks) error { b.Decay(-1); b.SGD(None, 0); return nil }, "weight decay -1"},
		{"momentum without buffer", nil, func(b StepBlocks) error { b.SGD(None, 0.9); return nil }, "no buffer for it"},
		{"workspace momentum", nil, func(b StepBlocks) error { b.SGD(b.Buffer(""), 0.9); return nil }, "not a state buffer"},
		{"adam without counter", nil, func(b StepBlocks) error {
			b.Adam(b.Buffer("m"), b.Buffer("v"), 0.9, 0.999, 1e-8)
			return nil
		}, "step counter"},
		{"adam of one buffer", nil, func(b StepBlocks) error {
			b.Counter("t")
			m := b.Buffer("m")
			b.Adam(m, m, 0.9, 0.999, 1e-8)
			return nil
		}, "one buffer"},
		{"two counters", nil, func(b StepBlocks) error { b.Counter("t"); b.Counter("u"); b.SGD(None, 0); return nil }, "two step counters"},
		{"sgd then move", nil, func(b StepBlocks) error { b.SGD(None, 0); b.Move(G); return nil }, "moves the weight twice"},
		{"a block after sgd", nil, func(b StepBlocks) error {
			m, r := b.Buffer("m"), b.Buffer("")
			b.SGD(m, 0.9)
			b.AddScaled(m, r, Coef{Value: 1}, m)
			return nil
		}, "a block after the one that moves the weight"},
		{"proj unconstrained", nil, func(b StepBlocks) error { r := b.Buffer(""); b.Proj(r, X, G); b.Move(r); return nil }, "this parameter is unconstrained"},
		{"sgd on a manifold", st, func(b StepBlocks) error { b.SGD(None, 0); return nil }, "this weight is on a manifold"},
	} {
		if _, err := newDescribed[float64](tc.m, 6, tc.d, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestElementwiseArithmetic checks that SGD, Adam and AdamW stepped by a
// Solver with a group's weight decay take internal/update's steps bit for
// bit, in float32 and float64 (the decay first, Adam's bias corrections
// at the step's count), that a failed step (a gradient with a NaN) moves
// neither the parameter nor the state, and that a step allocates nothing.
func TestElementwiseArithmetic(t *testing.T) {
	elementwiseArithmetic[float32](t)
	elementwiseArithmetic[float64](t)
}

func elementwiseArithmetic[T Float](t *testing.T) {
	const n, lr, wd = 7, 0.05, 0.1
	for _, tc := range []struct {
		rule  Rule
		decay float64
		ref   func(w, g []T, st *refState[T])
	}{
		{SGDConfig{}, wd, func(w, g []T, _ *refState[T]) { update.SGD(w, g, nil, T(lr), 0) }},
		{SGDConfig{Momentum: 0.8}, wd, func(w, g []T, s *refState[T]) { update.SGD(w, g, s.m, T(lr), T(0.8)) }},
		{AdamConfig{Beta1: 0.8}, wd, adamRef[T](0.8, 0.999, 1e-8)},
		{AdamWConfig{}, 0.01, adamRef[T](0.9, 0.999, 1e-8)},
	} {
		name := fmt.Sprintf("%T/%v", T(0), tc.rule)
		rng := rand.New(rand.NewPCG(5, 6))
		w, g := make([]T, n), make([]T, n)
		for i := range w {
			w[i] = T(rng.NormFloat64())
		}
		want := append([]T(nil), w...)
		ref := &refState[T]{m: make([]T, n), v: make([]T, n)}
		groupDecay := wd
		if _, ok := tc.rule.(AdamWConfig); ok {
			groupDecay = 0
		}
		p := Param{Name: "b", Shape: []int{n}, Value: Host[T](w), Grad: Host[T](g)}
		s, err := NewSolver([]Param{p}, []Group{{LR: lr, WeightDecay: groupDecay, Rule: tc.rule}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 4; k++ {
			for i := range g {
				g[i] = T(rng.NormFloat64())
			}
			if err := s.Step(); err != nil {
				t.Fatal(err)
			}
			ref.t++
			update.Decay(want, lr, tc.decay)
			tc.ref(want, g, ref)
			for i := range w {
				if w[i] != want[i] {
					t.Fatalf("%s step %d: entry %d %v, want %v", name, k, i, w[i], want[i])
				}
			}
		}
		before, st := append([]T(nil), w...), fmt.Sprint(s.State())
		g[2] = T(nanOf())
		if err := s.Step(); err == nil || !slices.Equal(w, before) || fmt.Sprint(s.State()) != st {
			t.Errorf("%s: a step along a NaN: error %v, moved the parameter or its state", name, err)
		}
		g[2] = 1
		if allocs := testing.AllocsPerRun(10, func() { _ = s.Step() }); allocs != 0 {
			t.Errorf("%s: %v allocations per step, want 0", name, allocs)
		}
	}
}

// refState is the state of a reference step: the moments (SGD's momentum
// in m) and the step count.
type refState[T Float] struct {
	m, v []T
	t    int
}

// adamRef returns the reference step of Adam with the given settings.
func adamRef[T Float](beta1, beta2, eps float64) func(w, g []T, s *refState[T]) {
	return func(w, g []T, s *refState[T]) {
		c1, c2 := update.AdamCorrections(beta1, beta2, float64(s.t))
		update.Adam(w, g, s.m, s.v, 0.05, beta1, beta2, eps, c1, c2)
	}
}

func nanOf() float64 { return math.NaN() }
