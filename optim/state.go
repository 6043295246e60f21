package optim

import (
	"fmt"
	"strings"
)

// State is what an optimizer's next step depends on beyond the weight and
// the configuration: step counters, random sources and buffers (momentum,
// Adam moments, the sampled submanifold of an unfinished inner loop). It is
// plain data, so that a checkpoint can store it (package checkpoint).
type State struct {
	// Kind names the optimizer that produced the state: the name of its
	// rule (rsdm, rgd, radam, sgd or adam; AdamW's is adam). Restoring it
	// into another kind is an error.
	Kind string
	// Counters holds step counts and positions.
	Counters map[string]int64
	// Random holds random sources in their MarshalBinary form.
	Random map[string][]byte
	// Buffers holds flat buffers: []float32, []float64 or []int64.
	Buffers map[string]any
}

func emptyState(kind string) State {
	return State{Kind: kind, Counters: map[string]int64{}, Random: map[string][]byte{}, Buffers: map[string]any{}}
}

func (s State) check(kind string) error {
	if s.Kind != kind {
		return fmt.Errorf("optim: state of a %q optimizer cannot restore a %q one", s.Kind, kind)
	}
	return nil
}

func (s State) counter(name string, lo, hi int64) (int, error) {
	v, ok := s.Counters[name]
	if !ok {
		return 0, fmt.Errorf("optim: %s state has no counter %q", s.Kind, name)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("optim: %s state: counter %q = %d, want %d to %d", s.Kind, name, v, lo, hi)
	}
	return int(v), nil
}

// buffer copies the named buffer into dst, which fixes its length and type.
// A missing buffer is an error unless optional, in which case dst is zeroed
// and false returned.
func buffer[E float32 | float64 | int64](s State, name string, dst []E, optional bool) (bool, error) {
	b, ok := s.Buffers[name]
	if !ok {
		if !optional {
			return false, fmt.Errorf("optim: %s state has no buffer %q", s.Kind, name)
		}
		clear(dst)
		return false, nil
	}
	src, ok := b.([]E)
	if !ok {
		return false, fmt.Errorf("optim: %s state: buffer %q is %T, want %T", s.Kind, name, b, dst)
	}
	if len(src) != len(dst) {
		return false, fmt.Errorf("optim: %s state: buffer %q has %d entries, want %d", s.Kind, name, len(src), len(dst))
	}
	copy(dst, src)
	return true, nil
}

func ints64(a []int) []int64 {
	out := make([]int64, len(a))
	for i, v := range a {
		out[i] = int64(v)
	}
	return out
}

// samplerPrefix begins the names of the entries that RSDM's sampler saves
// in its State (Draws.Save): "sampler.block" is the sampler's "block".
const samplerPrefix = "sampler."

// Sampler returns the entries of an RSDM state that its sampler saved
// (Draws.Save), under the names it gave them: in s they are prefixed with
// "sampler.", a namespace apart from RSDM's own entries.
func (s State) Sampler() State {
	sub := emptyState(s.Kind)
	for k, v := range s.Counters {
		if name, ok := strings.CutPrefix(k, samplerPrefix); ok {
			sub.Counters[name] = v
		}
	}
	for k, v := range s.Random {
		if name, ok := strings.CutPrefix(k, samplerPrefix); ok {
			sub.Random[name] = v
		}
	}
	for k, v := range s.Buffers {
		if name, ok := strings.CutPrefix(k, samplerPrefix); ok {
			sub.Buffers[name] = v
		}
	}
	return sub
}

// setSampler puts the entries of sub, which a sampler saved, into s under
// samplerPrefix.
func (s State) setSampler(sub State) {
	for k, v := range sub.Counters {
		s.Counters[samplerPrefix+k] = v
	}
	for k, v := range sub.Random {
		s.Random[samplerPrefix+k] = v
	}
	for k, v := range sub.Buffers {
		s.Buffers[samplerPrefix+k] = v
	}
}

// The names in the States of the rules whose step keeps buffers of the
// parameter's size: SGD's and RGD's momentum, the step count and the
// moments of Adam (and AdamW) and Riemannian Adam. A device's steppers
// (package optim/device), which keep the buffers in the device's memory,
// write and read their States by these names too.
const (
	StateMomentum     = "momentum"
	StateStepCount    = "t"
	StateFirstMoment  = "m"
	StateSecondMoment = "v"
)

// momentumState is the state of a heavy-ball optimizer: its momentum
// buffer, once a step with momentum has been taken.
func momentumState[T Float](kind string, mom []T) State {
	st := emptyState(kind)
	if mom != nil {
		st.Buffers[StateMomentum] = append([]T(nil), mom...)
	}
	return st
}

// restoreMomentum sets *mom to the momentum buffer of n entries of a
// momentumState: nil when the state has none (no step taken yet), an error
// when it has one but the momentum is 0.
func restoreMomentum[T Float](st State, kind string, momentum float64, mom *[]T, n int) error {
	if err := st.check(kind); err != nil {
		return err
	}
	if _, ok := st.Buffers[StateMomentum]; ok && momentum == 0 {
		return fmt.Errorf("optim: %s state has a momentum buffer but the momentum is 0", kind)
	}
	m := make([]T, n)
	if ok, err := buffer(st, StateMomentum, m, true); err != nil {
		return err
	} else if !ok {
		m = nil
	}
	*mom = m
	return nil
}

// momentState is the state of an Adam-like optimizer: its step count and,
// after the first step, its moments m and v.
func momentState[T Float](kind string, t int, m, v []T) State {
	st := emptyState(kind)
	st.Counters[StateStepCount] = int64(t)
	if m != nil {
		st.Buffers[StateFirstMoment] = append([]T(nil), m...)
		st.Buffers[StateSecondMoment] = append([]T(nil), v...)
	}
	return st
}

// restoreMoments sets *t, *m and *v from a momentState of n entries per
// moment (m and v nil for a state saved before the first step); on error
// it sets nothing.
func restoreMoments[T Float](st State, kind string, n int, t *int, m, v *[]T) error {
	if err := st.check(kind); err != nil {
		return err
	}
	steps, err := st.counter(StateStepCount, 0, 1<<62)
	if err != nil {
		return err
	}
	ms, vs := make([]T, n), make([]T, n)
	okm, err := buffer(st, StateFirstMoment, ms, true)
	if err != nil {
		return err
	}
	okv, err := buffer(st, StateSecondMoment, vs, true)
	if err != nil {
		return err
	}
	if okm != okv || okm != (steps > 0) {
		return fmt.Errorf("optim: %s state: step %d with moments m %v, v %v present", kind, steps, okm, okv)
	}
	if !okm {
		ms, vs = nil, nil
	}
	*t, *m, *v = steps, ms, vs
	return nil
}
