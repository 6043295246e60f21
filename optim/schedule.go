package optim

import (
	"fmt"
	"math"
)

// Schedule scales a group's step size by the number of steps the Solver
// has taken: the step size of step t (from 0) is Group.LR * Factor(t).
// Schedules are pure functions of t, so a checkpoint of the Solver (which
// holds t) restores them.
type Schedule interface {
	// Factor returns the multiplier of the base step size at step t >= 0.
	Factor(t int) float64
}

var _ Schedule = Constant{} // and the others, by checkSchedule's switch

// Constant keeps the step size (the default when a Group has no Schedule).
type Constant struct{}

// Factor returns 1.
func (Constant) Factor(int) float64 { return 1 }

// Cosine decays the step size from its base to Final times it along half a
// cosine over Steps steps, and stays there afterwards (PyTorch's
// CosineAnnealingLR without restarts).
type Cosine struct {
	Steps int
	// Final is the factor at the end, in [0, 1]; 0 decays to zero.
	Final float64
}

// Factor returns Final + (1 - Final) (1 + cos(pi t / Steps)) / 2.
func (c Cosine) Factor(t int) float64 {
	if c.Steps <= 0 || t >= c.Steps {
		return c.Final
	}
	return c.Final + (1-c.Final)*0.5*(1+math.Cos(math.Pi*float64(t)/float64(c.Steps)))
}

// WarmupCosine rises linearly from 0 to the base step size over Warmup
// steps, then decays along a cosine to Final times it at Steps.
type WarmupCosine struct {
	Warmup, Steps int
	Final         float64
}

// Factor returns t / Warmup during the warmup, then Cosine's factor over the
// remaining Steps - Warmup steps.
func (w WarmupCosine) Factor(t int) float64 {
	if t < w.Warmup {
		return float64(t) / float64(w.Warmup)
	}
	return Cosine{Steps: w.Steps - w.Warmup, Final: w.Final}.Factor(t - w.Warmup)
}

// StepDecay multiplies the step size by Gamma every Every steps (PyTorch's
// StepLR).
type StepDecay struct {
	Every int
	Gamma float64
}

// Factor returns Gamma^(t / Every).
func (s StepDecay) Factor(t int) float64 {
	if s.Every <= 0 {
		return 1
	}
	return math.Pow(s.Gamma, float64(t/s.Every))
}

// checkSchedule checks that a schedule gives finite factors >= 0 at its
// start and along a few steps.
func checkSchedule(s Schedule) error {
	if s == nil {
		return nil
	}
	switch v := s.(type) {
	case Cosine:
		if v.Steps < 1 || !(v.Final >= 0 && v.Final <= 1) {
			return fmt.Errorf("optim: cosine schedule over %d steps to %v, want Steps >= 1 and 0 <= Final <= 1", v.Steps, v.Final)
		}
	case WarmupCosine:
		if v.Warmup < 1 || v.Steps <= v.Warmup || !(v.Final >= 0 && v.Final <= 1) {
			return fmt.Errorf("optim: warmup-cosine schedule of %d warmup steps over %d to %v, want 1 <= Warmup < Steps and 0 <= Final <= 1", v.Warmup, v.Steps, v.Final)
		}
	case StepDecay:
		if v.Every < 1 || !(v.Gamma >= 0) || math.IsInf(v.Gamma, 0) {
			return fmt.Errorf("optim: step decay by %v every %d steps, want Every >= 1 and a finite Gamma >= 0", v.Gamma, v.Every)
		}
	}
	for _, t := range []int{0, 1, 10, 1000} {
		if f := s.Factor(t); !(f >= 0) || math.IsInf(f, 0) {
			return fmt.Errorf("optim: schedule %T gives the factor %v at step %d, want a finite value >= 0", s, f, t)
		}
	}
	return nil
}
