package main

import (
	"fmt"
	"strings"

	"github.com/orthonet/orthonet/baseline"
	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// methodNames lists every method bench runs, in plotting order.
var methodNames = []string{
	"rgd", "rgd-polar", "rgd-cayley", "rgd-exp", "rgd-momentum", "radam",
	"rsdm-p", "rsdm-o", "rsdm-momentum",
	"rcd", "tsd", "pcal", "landing", "rssm", "obcd", "hybrid",
	"rsdm-p-polar", "rsdm-p-cayley", "rsdm-p-exp",
}

func knownMethod(name string) bool {
	for _, m := range methodNames {
		if m == name {
			return true
		}
	}
	return false
}

// tuned lists the methods whose step size is picked from a grid by a short
// run (the paper tuned its baselines the same way; it did not run
// Riemannian Adam); the others use the step sizes the authors published for
// each problem.
var tuned = map[string]bool{"rcd": true, "tsd": true, "pcal": true, "landing": true, "rssm": true, "obcd": true,
	"rgd-momentum": true, "rsdm-momentum": true, "radam": true}

// stepGrid is the paper's grid of step sizes.
var stepGrid = []float64{0.01, 0.05, 0.1, 0.5, 1.0, 1.5, 2.0}

// adamGrid is the grid of Riemannian Adam, whose steps are normalized per
// entry, so that the paper's grid starts above its useful range (the paper
// did not run it).
var adamGrid = []float64{0.001, 0.003, 0.01, 0.03, 0.1, 0.3}

// gridFor returns the step sizes a tuned method is tried with.
func gridFor(name string) []float64 {
	if name == "radam" {
		return adamGrid
	}
	return stepGrid
}

// penalty is the weight of the infeasible methods' pull towards the
// manifold (the paper tuned it over 0.1 to 2; 1 is the middle of that range).
const penalty = 1.0

// method is one configured optimizer.
type method[T linalg.Float] struct {
	name string
	lr   float64
	opt  optim.Optimizer[T]
	// feasible methods keep X on St(n,p) up to rounding.
	feasible bool
}

// lrFor returns the published step size of a fixed-step method on s.
func lrFor(name string, s setting) float64 {
	switch {
	case strings.HasPrefix(name, "rgd"):
		return s.lrRGD
	case name == "rsdm-o":
		return s.lrO
	}
	return s.lrP
}

// newMethod builds the named method for s with step size lr (0: the
// published one) and the given RSDM submanifold size r (0: s.r).
func newMethod[T linalg.Float](name string, s setting, lr float64, r int, seed uint64) (*method[T], error) {
	if lr == 0 {
		lr = lrFor(name, s)
	}
	if r == 0 {
		r = s.r
	}
	st, err := manifold.NewStiefel[T](s.n, s.p)
	if err != nil {
		return nil, err
	}
	m := &method[T]{name: name, lr: lr, feasible: true}
	rsdm := optim.RSDMConfig{LR: lr, SubmanifoldSize: r, Seed: seed}
	switch name {
	case "rgd", "rgd-polar", "rgd-cayley", "rgd-exp":
		if ret, ok := strings.CutPrefix(name, "rgd-"); ok {
			if st.Retraction, err = manifold.ParseRetraction(ret); err != nil {
				return nil, err
			}
		}
		m.opt, err = optim.NewRGD(st, optim.RGDConfig{LR: lr})
	case "rgd-momentum":
		m.opt, err = optim.NewRGD(st, optim.RGDConfig{LR: lr, Momentum: 0.5})
	case "radam":
		m.opt, err = optim.NewRiemannianAdam(st, optim.RiemannianAdamConfig{LR: lr})
	case "rsdm-p":
		m.opt, err = optim.NewRSDM(st, rsdm)
	case "rsdm-p-polar", "rsdm-p-cayley", "rsdm-p-exp":
		if rsdm.Retraction, err = manifold.ParseRetraction(strings.TrimPrefix(name, "rsdm-p-")); err != nil {
			return nil, err
		}
		m.opt, err = optim.NewRSDM(st, rsdm)
	case "rsdm-o":
		rsdm.Sampling = optim.Orthogonal
		m.opt, err = optim.NewRSDM(st, rsdm)
	case "rsdm-momentum":
		rsdm.Momentum, rsdm.InnerSteps = 0.5, 5 // the paper's beta; S is not stated
		m.opt, err = optim.NewRSDM(st, rsdm)
	case "hybrid":
		m.opt, err = optim.NewHybrid(st, optim.HybridConfig{RSDM: optim.RSDMConfig{LR: s.lrP, SubmanifoldSize: s.r, Seed: seed}, RGD: optim.RGDConfig{LR: s.lrRGD}})
	case "rcd":
		m.opt, err = baseline.NewRCD[T](s.n, s.p, lr)
	case "tsd":
		m.opt, err = baseline.NewTSD[T](s.n, s.p, lr)
	case "pcal":
		m.opt, err = baseline.NewPCAL[T](s.n, s.p, lr, penalty)
		m.feasible = false
	case "landing":
		m.opt, err = baseline.NewLanding[T](s.n, s.p, lr, penalty)
		m.feasible = false
	case "rssm":
		m.opt, err = baseline.NewRSSM[T](s.n, s.p, min(r, s.p), lr, seed)
	case "obcd":
		m.opt, err = baseline.NewOBCD[T](s.n, s.p, r, lr, seed)
	default:
		return nil, fmt.Errorf("unknown method %q", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}
