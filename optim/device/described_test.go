package device_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/device"
)

// nesterovRGD is a throwaway rule of constrained weights written once in
// optim.StepBlocks: RGD with Nesterov momentum, mom = rg + beta mom, the
// step along rg + beta mom, the momentum carried to the new point. Its
// type and one table line (optim.Register, as an entry of optim.Rules
// is) are all it has: no device code.
type nesterovRGD struct{ beta float64 }

func (nesterovRGD) String() string    { return "nrgd-test" }
func (nesterovRGD) Constrained() bool { return true }
func (c nesterovRGD) Stepper(p optim.Param, b optim.Binding) (optim.Stepper, error) {
	return optim.BindDescribed(p, b, c)
}
func (c nesterovRGD) Describe(b optim.StepBlocks) error {
	rg, dir, next, mom := b.Buffer(""), b.Buffer(""), b.Buffer(""), b.Buffer(optim.StateMomentum)
	b.Proj(rg, optim.X, optim.G)
	b.AddScaled(mom, rg, optim.Coef{Value: c.beta}, mom)
	b.AddScaled(dir, rg, optim.Coef{Value: c.beta}, mom)
	b.Retract(next, optim.X, optim.Coef{Value: -1, TimesLR: true}, dir)
	b.Proj(mom, next, mom)
	b.Move(next)
	return nil
}

// TestDescribedRule checks that a rule written once in optim.StepBlocks
// runs on the host and on a device with no code of its own: the table
// gives it by name, and a Solver on the CPU backend's device steppers
// steps tall and wide weights as the host's does (to rounding: the Q
// factors differ), both staying on the manifold, the host descending, and
// the device's state restoring the host's.
func TestDescribedRule(t *testing.T) {
	saved := optim.Rules
	t.Cleanup(func() { optim.Rules = saved })
	if err := optim.Register(nesterovRGD{beta: 0.5}); err != nil {
		t.Fatal(err)
	}
	rule, err := optim.ParseRuleFlags("nrgd-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ rows, cols int }{{9, 4}, {3, 8}} {
		testDescribedRule(t, rule, c.rows, c.cols)
	}
}

func testDescribedRule(t *testing.T, rule optim.Rule, rows, cols int) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	n := rows * cols
	st, err := manifold.NewStiefel[float64](max(rows, cols), min(rows, cols))
	if err != nil {
		t.Fatal(err)
	}
	w, target, g := make([]float64, n), make([]float64, n), make([]float64, n)
	rng := rand.New(rand.NewPCG(1, 2))
	_ = st.Random(w, rng)
	_ = st.Random(target, rng)
	p := optim.Param{Name: "w", Shape: []int{rows, cols}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](w), Grad: optim.Host[float64](g)}
	if rows < cols { // a wide weight, as its transpose's orthonormal columns
		if err := p.Orthonormalize(); err != nil {
			t.Fatal(err)
		}
		copy(target, w)
		target[0] += 0.5
	}
	l := device.NewLockstep[float64](t, be, p)
	if err := l.Start([]optim.Group{{Rule: rule, LR: 0.2}}); err != nil {
		t.Fatalf("%d x %d: %v", rows, cols, err)
	}
	defer l.Dev.Close()
	gap := func() float64 { return distance(w, target) }
	before := gap()
	for range 5 {
		for i := range g { // the gradient of ||W - T||^2 / 2 at the host's W
			g[i] = w[i] - target[i]
		}
		l.Step(t)
	}
	got := l.DevValue(t)
	if d := distance(got, w); d > 1e-10 {
		t.Errorf("%d x %d: device and host %.3g apart", rows, cols, d)
	}
	for name, v := range map[string][]float64{"host": w, "device": got} {
		q := optim.Param{Name: name, Shape: []int{rows, cols}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](v)}
		if f, err := q.Feasibility(); err != nil || f > 1e-12 {
			t.Errorf("%d x %d: the %s's weight is %.3g off the manifold (%v)", rows, cols, name, f, err)
		}
	}
	if after := gap(); !(after < before) {
		t.Errorf("%d x %d: ||W - T|| from %.4g to %.4g, want a descent", rows, cols, before, after)
	}
	if err := l.Host.SetState(l.Dev.State()); err != nil {
		t.Errorf("%d x %d: the device's state does not restore the host's: %v", rows, cols, err)
	}
}

// distance returns ||a - b||_F.
func distance(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += (a[i] - b[i]) * (a[i] - b[i])
	}
	return math.Sqrt(s)
}

// badDescription is a rule whose description is fn, on constrained
// weights or unconstrained parameters.
type badDescription struct {
	constrained bool
	fn          func(optim.StepBlocks)
}

func (badDescription) String() string      { return "bad-test" }
func (c badDescription) Constrained() bool { return c.constrained }
func (c badDescription) Stepper(p optim.Param, b optim.Binding) (optim.Stepper, error) {
	return optim.BindDescribed(p, b, c)
}
func (c badDescription) Describe(b optim.StepBlocks) error { c.fn(b); return nil }

// TestDescriptionsRefused checks that a description whose blocks are out
// of order is refused on a device with the host's words (the device
// records only what optim.BindDescribed accepted), and that RSDM's,
// StepBlocks.Submanifold alone, builds there.
func TestDescriptionsRefused(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 1})
	defer be.Close()
	sub := optim.RSDMConfig{SubmanifoldSize: 2}
	for _, c := range []struct {
		name string
		rule optim.Rule
		want string
	}{
		{"submanifold after a block", badDescription{true, func(b optim.StepBlocks) { b.Proj(b.Buffer(""), optim.X, optim.G); b.Submanifold(sub) }}, "step of its own"},
		{"submanifold twice", badDescription{true, func(b optim.StepBlocks) { b.Submanifold(sub); b.Submanifold(sub) }}, "moves the weight twice"},
		{"two moves", badDescription{true, func(b optim.StepBlocks) { r := b.Buffer(""); b.Move(r); b.Move(r) }}, "moves the weight twice"},
		{"proj of a parameter", badDescription{false, func(b optim.StepBlocks) { b.Proj(b.Buffer(""), optim.X, optim.G); b.Move(optim.G) }}, "this parameter is unconstrained"},
		{"sgd of a weight", badDescription{true, func(b optim.StepBlocks) { b.SGD(optim.None, 0) }}, "this weight is on a manifold"},
		{"decay alone", badDescription{false, func(b optim.StepBlocks) { b.Decay(0.1); b.Move(optim.G) }}, "Decay is not followed"},
		{"two decays", badDescription{false, func(b optim.StepBlocks) { b.Decay(0.1); b.Decay(0.1); b.SGD(optim.None, 0) }}, "two StepBlocks.Decay"},
		{"two counters", badDescription{false, func(b optim.StepBlocks) { b.Counter("t"); b.Counter("u"); b.SGD(optim.None, 0) }}, "two step counters"},
		{"adam without a counter", badDescription{false, func(b optim.StepBlocks) { b.Adam(b.Buffer("m"), b.Buffer("v"), 0.9, 0.999, 1e-8) }}, "before a step counter"},
		{"rsdm", sub, ""},
	} {
		w, _ := be.Alloc(backend.Float64, 12)
		g, _ := be.Alloc(backend.Float64, 12)
		p := optim.Param{Name: "w", Shape: []int{4, 3}, Value: device.On(backend.At(w, 0), 12), Grad: device.On(backend.At(g, 0), 12)}
		if c.rule.Constrained() {
			p.Manifold = manifold.StiefelKind{}
		}
		_, err := device.New(be).Stepper(c.rule, p, optim.Binding{})
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q (none when empty)", c.name, err, c.want)
		}
	}
}
