package device_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/device"
)

// doubleDecaySGD is a throwaway rule of unconstrained parameters written
// once in optim.StepBlocks' elementwise blocks: SGD with momentum 0.5 and
// twice its group's weight decay. It has no device code.
type doubleDecaySGD struct{ decayAlone bool }

func (doubleDecaySGD) String() string    { return "ddsgd-test" }
func (doubleDecaySGD) Constrained() bool { return false }
func (c doubleDecaySGD) Stepper(p optim.Param, b optim.Binding) (optim.Stepper, error) {
	return optim.BindDescribed(p, b, c)
}
func (c doubleDecaySGD) Describe(b optim.StepBlocks) error {
	mom := b.Buffer(optim.StateMomentum)
	b.Decay(2 * b.WeightDecay())
	if c.decayAlone { // a Decay that no SGD or Adam takes
		b.Move(mom)
		return nil
	}
	b.SGD(mom, 0.5)
	return nil
}

// TestDescribedElementwiseRule checks that an unconstrained rule written
// once in the elementwise blocks steps a float32 parameter on the CPU
// backend's device steppers bit for bit as on the host (both run
// internal/update's arithmetic), its state restoring the host's, and that
// a description the host refuses the device refuses too.
func TestDescribedElementwiseRule(t *testing.T) {
	const n = 11
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	w, g := make([]float32, n), make([]float32, n)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	l := device.NewLockstep[float32](t, be, optim.Param{Name: "b", Shape: []int{n}, Value: optim.Host[float32](w), Grad: optim.Host[float32](g)})
	for _, bad := range []optim.Param{l.HostParam, l.DevParam} {
		_, err := optim.NewSolver([]optim.Param{bad}, []optim.Group{{Rule: doubleDecaySGD{decayAlone: true}, LR: 0.1}}, optim.Options{Device: device.New(be)})
		if err == nil || !strings.Contains(err.Error(), "Decay is not followed") {
			t.Errorf("a Decay alone, %T: %v, want it refused", bad.Value, err)
		}
	}
	if err := l.Start([]optim.Group{{Rule: doubleDecaySGD{}, LR: 0.1, WeightDecay: 0.05}}); err != nil {
		t.Fatal(err)
	}
	defer l.Dev.Close()
	w0 := slices.Clone(w)
	for range 4 {
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		l.Step(t)
	}
	if got := l.DevValue(t); !slices.Equal(got, w) || slices.Equal(w, w0) {
		t.Errorf("device %v, host %v (from %v): want equal and moved", got, w, w0)
	}
	if err := l.Host.SetState(l.Dev.State()); err != nil {
		t.Errorf("the device's state does not restore the host's: %v", err)
	}
}
