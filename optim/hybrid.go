package optim

import (
	"fmt"
	"math"
	"time"

	"github.com/orthonet/orthonet/manifold"
)

// HybridConfig holds the options of a Hybrid.
type HybridConfig struct {
	// RSDM configures the RSDM candidates. Its LR is the step size tuned
	// for its SubmanifoldSize r0 (required); a candidate r > r0 gets
	// LR r0(r0-1)/(r(r-1)), which keeps the expected step of Proposition 1
	// (and so its stability) the same.
	RSDM RSDMConfig
	// RGD configures the RGD candidate.
	RGD RGDConfig
	// Sizes are the submanifold sizes r to consider. The default is n/8,
	// n/4, n/2 and 3n/4 (those that are at least 2).
	Sizes []int
	// Probes is how many steps of each candidate are timed; default 3.
	Probes int
}

// Hybrid picks RGD or RSDM, and RSDM's r, for the weight's (n, p) from the
// measured cost of their steps on this machine: the future work the paper's
// p-sweep appendix names. Its first Step times Probes steps of each
// candidate on a copy of the weight and keeps the one with the largest
// expected decrease per second, with the decrease of an RSDM step taken as
// r(r-1)/(n(n-1)) of a full step (Proposition 1) scaled by the ratio of the
// step sizes. The choice depends on timings, so two runs can choose
// differently; Choice reports it.
type Hybrid[T Float] struct {
	m      manifold.Manifold[T]
	cfg    HybridConfig
	opt    Optimizer[T]
	choice string
}

// NewHybrid returns a Hybrid for weights on m.
func NewHybrid[T Float](m manifold.Manifold[T], cfg HybridConfig) (*Hybrid[T], error) {
	if m == nil {
		return nil, fmt.Errorf("optim: Hybrid needs a manifold")
	}
	// The choice weighs each candidate's expected decrease by its step
	// size: both must move.
	if !(cfg.RSDM.LR > 0) || math.IsInf(cfg.RSDM.LR, 0) {
		return nil, fmt.Errorf("optim: Hybrid RSDM learning rate %v, want a finite value > 0", cfg.RSDM.LR)
	}
	if !(cfg.RGD.LR > 0) || math.IsInf(cfg.RGD.LR, 0) {
		return nil, fmt.Errorf("optim: Hybrid RGD learning rate %v, want a finite value > 0", cfg.RGD.LR)
	}
	n, _ := m.Dims()
	if r0 := cfg.RSDM.SubmanifoldSize; r0 < 2 || r0 > n {
		return nil, fmt.Errorf("optim: Hybrid RSDM submanifold size %d (the size its LR is for), want 2 <= r <= %d", r0, n)
	}
	if len(cfg.Sizes) == 0 {
		for _, r := range []int{n / 8, n / 4, n / 2, 3 * n / 4, cfg.RSDM.SubmanifoldSize} {
			if r >= 2 {
				cfg.Sizes = append(cfg.Sizes, r)
			}
		}
	}
	for _, r := range cfg.Sizes {
		if r < 2 || r > n {
			return nil, fmt.Errorf("optim: Hybrid submanifold size %d, want 2 <= r <= %d", r, n)
		}
	}
	if cfg.Probes <= 0 {
		cfg.Probes = 3
	}
	return &Hybrid[T]{m: m, cfg: cfg}, nil
}

// Choice returns the chosen method ("rgd" or "rsdm-p r=N"), or "" before
// the first Step.
func (h *Hybrid[T]) Choice() string { return h.choice }

// Step takes a step of the chosen method, choosing on the first call.
func (h *Hybrid[T]) Step(x, grad []T) error {
	if h.opt == nil {
		if err := h.choose(x, grad); err != nil {
			return err
		}
	}
	return h.opt.Step(x, grad)
}

func (h *Hybrid[T]) choose(x, grad []T) error {
	n, _ := h.m.Dims()
	scratch := make([]T, len(x))
	timeSteps := func(o Optimizer[T], err error) (float64, error) {
		if err != nil {
			return 0, err
		}
		copy(scratch, x)
		if err := o.Step(scratch, grad); err != nil { // warm-up: workspaces
			return 0, err
		}
		start := time.Now()
		for i := 0; i < h.cfg.Probes; i++ {
			copy(scratch, x)
			if err := o.Step(scratch, grad); err != nil {
				return 0, err
			}
		}
		return time.Since(start).Seconds() / float64(h.cfg.Probes), nil
	}
	t, err := timeSteps(NewRGD(h.m, h.cfg.RGD))
	if err != nil {
		return err
	}
	var best RSDMConfig // the chosen RSDM's settings; zero for RGD
	bestScore, r0 := 1/t, h.cfg.RSDM.SubmanifoldSize
	h.choice = "rgd"
	for _, r := range h.cfg.Sizes {
		c := h.cfg.RSDM
		c.SubmanifoldSize = r
		if r > r0 {
			c.LR *= float64(r0*(r0-1)) / float64(r*(r-1))
		}
		t, err := timeSteps(NewRSDM(h.m, c))
		if err != nil {
			return err
		}
		frac := float64(r*(r-1)) / float64(n*(n-1)) * c.LR / h.cfg.RGD.LR
		if score := frac / t; score > bestScore {
			best, bestScore, h.choice = c, score, fmt.Sprintf("rsdm-p r=%d", r)
		}
	}
	// A fresh optimizer, so that the probes leave no trace: one of these
	// settings built before, which cannot fail now.
	if best.SubmanifoldSize == 0 {
		h.opt, _ = NewRGD(h.m, h.cfg.RGD)
	} else {
		h.opt, _ = NewRSDM(h.m, best)
	}
	return nil
}
