package device

import (
	"fmt"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// Lockstep is one parameter stepped by a Solver on host slices and by one
// on a backend's memory, from the same gradients: the fixture of the tests
// that check a rule's device stepper against its host stepper. It is
// exported for this package's external tests.
type Lockstep[T float32 | float64] struct {
	// HostParam is the parameter on the host; DevParam is its copy in the
	// backend's memory, of the value HostParam had when it was made.
	HostParam, DevParam optim.Param
	// Host and Dev are the Solvers over them, set by Start.
	Host, Dev *optim.Solver

	be     backend.Backend
	g      []T
	vb, gb backend.Buffer
}

// NewLockstep copies p, whose value and gradient are host slices of T,
// into be's memory.
func NewLockstep[T float32 | float64](t *testing.T, be backend.Backend, p optim.Param) *Lockstep[T] {
	t.Helper()
	w, g := p.Value.(optim.Host[T]), p.Grad.(optim.Host[T])
	dt := backend.Float64
	if _, ok := any(T(0)).(float32); ok {
		dt = backend.Float32
	}
	l := &Lockstep[T]{HostParam: p, be: be, g: g}
	var err error
	if l.vb, err = be.Alloc(dt, len(w)); err != nil {
		t.Fatal(err)
	}
	if l.gb, err = be.Alloc(dt, len(w)); err != nil {
		t.Fatal(err)
	}
	if err := be.CopyIn(l.vb, 0, []T(w)); err != nil {
		t.Fatal(err)
	}
	l.DevParam = p
	l.DevParam.Value, l.DevParam.Grad = On(backend.At(l.vb, 0), len(w)), On(backend.At(l.gb, 0), len(w))
	return l
}

// Start builds both Solvers with groups; the caller closes Dev.
func (l *Lockstep[T]) Start(groups []optim.Group) error {
	var err error
	if l.Host, err = optim.NewSolver([]optim.Param{l.HostParam}, groups, optim.Options{}); err != nil {
		return fmt.Errorf("on the host: %w", err)
	}
	if l.Dev, err = optim.NewSolver([]optim.Param{l.DevParam}, groups, optim.Options{Device: New(l.be)}); err != nil {
		return fmt.Errorf("on the device: %w", err)
	}
	return nil
}

// Step copies the host's gradient into the device's and steps both
// Solvers.
func (l *Lockstep[T]) Step(t *testing.T) {
	t.Helper()
	if err := l.be.CopyIn(l.gb, 0, l.g); err != nil {
		t.Fatal(err)
	}
	if err := l.Dev.Step(); err != nil {
		t.Fatal(err)
	}
	if err := l.Host.Step(); err != nil {
		t.Fatal(err)
	}
}

// DevValue returns a copy of the device's value.
func (l *Lockstep[T]) DevValue(t *testing.T) []T {
	t.Helper()
	got := make([]T, len(l.g))
	if err := l.be.CopyOut(got, l.vb, 0); err != nil {
		t.Fatal(err)
	}
	return got
}
