package device

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/optim"
)

// gdRule is a throwaway rule given a device stepper as
// docs/extending/rule.md says: its builder, gdStepper (in a rule's own
// file of this package, as this test file is), and one entry in rules
// (which the test appends). It is gradient descent, w -= lr g, on
// unconstrained float64 parameters.
type gdRule struct{}

func (gdRule) String() string    { return "gd" }
func (gdRule) Constrained() bool { return false }
func (gdRule) Stepper(p optim.Param, _ optim.Binding) (optim.Stepper, error) {
	return &gdHost{w: p.Value.(optim.Host[float64])}, nil
}

// gdHost is gdRule's host stepper; it keeps no state but its kind.
type gdHost struct {
	w, g []float64
	lr   float64
}

func (s *gdHost) Prepare(grad optim.Gradient, lr float64) error {
	s.g, s.lr = grad.(optim.Host[float64]), lr
	return nil
}
func (s *gdHost) Abort() {}
func (s *gdHost) Commit() error {
	for i := range s.w {
		s.w[i] -= s.lr * s.g[i]
	}
	return nil
}
func (s *gdHost) State() optim.State {
	return optim.State{Kind: "gd", Counters: map[string]int64{}, Random: map[string][]byte{}, Buffers: map[string]any{}}
}
func (s *gdHost) SetState(st optim.State) error {
	if st.Kind != "gd" {
		return errors.New("not a gd state")
	}
	return nil
}

// gdStepper is gdRule's device stepper: w = w + (-lr) g, one
// backend.AddScaled whose scale is the step size.
func gdStepper(w *work, _ gdRule) (optim.Stepper, error) {
	o, err := newBuffered(w, "")
	if err != nil {
		return nil, err
	}
	o.step, err = w.prepare(backend.AddScaled{N: size(w.shape), Alpha: -1, X: w.value, Y: w.grad, Dst: w.value, Scale: w.hyper})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// TestAddDeviceRule checks that one entry in rules gives a rule a device
// stepper: without it the device refuses gdRule by name; with it a Solver
// on the CPU backend steps a parameter by gdRule to the host's values, bit
// for bit, with the host's State.
func TestAddDeviceRule(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	const n = 6
	w, g := []float64{1, -2, 3, 0.5, 0.25, -7}, make([]float64, n)
	l := NewLockstep[float64](t, be, optim.Param{Name: "b", Shape: []int{n}, Value: optim.Host[float64](w), Grad: optim.Host[float64](g)})
	groups := []optim.Group{{Rule: gdRule{}, LR: 0.3, Schedule: optim.Cosine{Steps: 4}}}
	if _, err := optim.NewSolver([]optim.Param{l.DevParam}, groups, optim.Options{Device: New(be)}); !errors.Is(err, optim.ErrNotOnDevice) || !strings.Contains(err.Error(), "the gd rule does not run on a device") {
		t.Fatalf("gd before its entry in rules: got %v, want a refusal naming it", err)
	}

	saved := rules
	rules = append(slices.Clip(rules), on(gdStepper))
	t.Cleanup(func() { rules = saved })
	if err := l.Start(groups); err != nil {
		t.Fatal(err)
	}
	defer l.Dev.Close()
	for k := range 4 {
		for i := range g {
			g[i] = float64(i*k%5) - 1.5
		}
		l.Step(t)
	}
	if got := l.DevValue(t); !slices.Equal(got, w) {
		t.Errorf("gd on the device: %v, on the host %v", got, w)
	}
	if st := l.Dev.State()[0]; st.Kind != "gd" {
		t.Errorf("the device's state is of kind %q, want the host's gd", st.Kind)
	}
}
