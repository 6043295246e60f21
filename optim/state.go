package optim

import (
	"fmt"
	"math/rand/v2"
)

// State is what an optimizer's next step depends on beyond the weight and
// the configuration: step counters, random sources and buffers (momentum,
// Adam moments, the sampled submanifold of an unfinished inner loop). It is
// plain data, so that a checkpoint can store it (package checkpoint).
type State struct {
	// Kind names the optimizer that produced the state: rsdm, rgd, sgd or
	// adam. Restoring it into another kind is an error.
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

// State returns a copy of the optimizer's state.
func (o *RSDM[T]) State() State {
	s := emptyState("rsdm")
	s.Counters["steps"] = int64(o.steps)
	b, _ := o.src.MarshalBinary() // cannot fail
	s.Random["sampler"] = b
	o.draws.Save(s)
	if o.phase() != 0 { // an inner loop (Algorithm 3) is under way
		if o.cfg.Sampling.Rows() {
			s.Buffers["rows"] = ints64(o.sub.Rows)
		} else {
			s.Buffers["haar_rows"] = append([]T(nil), o.apply.(*frameApplier[T]).rows...)
			// States have always held "rows", which readers before dense
			// samplers required; a dense draw has no rows to list.
			s.Buffers["rows"] = make([]int64, o.r)
		}
		s.Buffers["px0"] = append([]T(nil), o.px0...)
		s.Buffers["y"] = append([]float64(nil), o.y...)
		s.Buffers["yprev"] = append([]float64(nil), o.yprev...)
	}
	return s
}

// SetState restores a state returned by State of an RSDM with the same
// configuration and weight shape. On error the optimizer is unchanged.
func (o *RSDM[T]) SetState(s State) error {
	if err := s.check("rsdm"); err != nil {
		return err
	}
	steps, err := s.counter("steps", 0, 1<<62)
	if err != nil {
		return err
	}
	// The inner step is steps % InnerSteps. States written before it was
	// derived also hold it as the counter "phase".
	phase := steps % o.cfg.InnerSteps
	if v, ok := s.Counters["phase"]; ok && v != int64(phase) {
		return fmt.Errorf("optim: rsdm state: counter \"phase\" = %d, want %d (steps %d mod inner steps %d)", v, phase, steps, o.cfg.InnerSteps)
	}
	inLoop := phase != 0
	// Restore into copies first, so that a bad state changes nothing.
	src := new(rand.PCG)
	b, ok := s.Random["sampler"]
	if !ok {
		return fmt.Errorf("optim: rsdm state has no random source \"sampler\"")
	}
	if err := src.UnmarshalBinary(b); err != nil {
		return fmt.Errorf("optim: rsdm state: random source \"sampler\": %w", err)
	}
	restoreDraws, err := o.draws.Load(s)
	if err != nil {
		return err
	}
	restoreSub := func() {}
	px0 := make([]T, len(o.px0))
	y, yprev := make([]float64, len(o.y)), make([]float64, len(o.yprev))
	if inLoop {
		if restoreSub, err = o.loadDraw(s); err != nil {
			return err
		}
		if _, err := buffer(s, "px0", px0, false); err != nil {
			return err
		}
		if _, err := buffer(s, "y", y, false); err != nil {
			return err
		}
		if _, err := buffer(s, "yprev", yprev, false); err != nil {
			return err
		}
	}
	*o.src = *src
	o.steps = steps
	restoreDraws()
	restoreSub()
	if inLoop {
		copy(o.px0, px0)
		copy(o.y, y)
		copy(o.yprev, yprev)
	}
	return nil
}

// loadDraw checks the drawn submanifold of an inner loop in s and returns
// the function that restores it.
func (o *RSDM[T]) loadDraw(s State) (func(), error) {
	if !o.cfg.Sampling.Rows() {
		f := o.apply.(*frameApplier[T])
		rows := make([]T, len(f.rows))
		if _, err := buffer(s, "haar_rows", rows, false); err != nil {
			return nil, err
		}
		return func() { copy(f.rows, rows) }, nil
	}
	idx := make([]int64, o.r)
	if _, err := buffer(s, "rows", idx, false); err != nil {
		return nil, err
	}
	for _, v := range idx {
		if v < 0 || v >= int64(o.n) {
			return nil, fmt.Errorf("optim: rsdm state: sampled row %d outside 0 to %d", v, o.n-1)
		}
	}
	return func() {
		for i, v := range idx {
			o.sub.Rows[i] = int(v)
		}
	}, nil
}

// State returns a copy of the optimizer's state.
func (o *RGD[T]) State() State { return momentumState("rgd", o.mom) }

// SetState restores a state returned by State of an RGD with the same
// configuration and weight shape. On error the optimizer is unchanged.
func (o *RGD[T]) SetState(s State) error {
	return restoreMomentum(s, "rgd", o.cfg.Momentum, &o.mom, o.n*o.p)
}

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *RSDM[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }

// SetLR changes the step size, for a schedule; it must be finite and >= 0
// (0 freezes the weight).
func (o *RGD[T]) SetLR(lr float64) error { return setLR(&o.cfg.LR, lr) }
