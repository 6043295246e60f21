package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/baseline"
	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// presets are bench's own methods, in plotting order, each with the rule
// of optim.Rules it runs ("" for a baseline or hybrid): variants a rule's
// settings do not give (retractions, RSDM-momentum's inner steps), fixed
// as the paper ran them.
var presets = []struct{ name, rule string }{
	{"rgd", "rgd"}, {"rgd-polar", "rgd"}, {"rgd-cayley", "rgd"}, {"rgd-exp", "rgd"}, {"rgd-momentum", "rgd"}, {"radam", "radam"},
	{"rsdm-p", "rsdm"}, {"rsdm-o", "rsdm"}, {"rsdm-momentum", "rsdm"},
	{"rcd", ""}, {"tsd", ""}, {"pcal", ""}, {"landing", ""}, {"rssm", ""}, {"obcd", ""}, {"hybrid", ""},
	{"rsdm-p-polar", "rsdm"}, {"rsdm-p-cayley", "rsdm"}, {"rsdm-p-exp", "rsdm"},
}

// methodNames lists every method bench runs, in plotting order: its
// presets, then each rule of constrained weights in the table optim.Rules
// that no preset runs (a rule registered with optim.Register), by its
// name, built from the table (tableMethod).
func methodNames() []string {
	var names, covered []string
	for _, p := range presets {
		names, covered = append(names, p.name), append(covered, p.rule)
	}
	for _, r := range optim.Rules {
		if r.Constrained() && !slices.Contains(covered, r.String()) {
			names = append(names, r.String())
		}
	}
	return names
}

func knownMethod(name string) bool { return slices.Contains(methodNames(), name) }

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
	default:
		m.opt, err = otherMethod[T](name, s, lr, r, seed)
		m.feasible = name != "pcal" && name != "landing" // penalty methods, off the manifold
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// otherMethod builds the named method for s that is neither RGD nor RSDM:
// a baseline of package baseline, or a rule of optim.Rules (tableMethod).
func otherMethod[T linalg.Float](name string, s setting, lr float64, r int, seed uint64) (optim.Optimizer[T], error) {
	switch name {
	case "rcd":
		return baseline.NewRCD[T](s.n, s.p, lr)
	case "tsd":
		return baseline.NewTSD[T](s.n, s.p, lr)
	case "pcal":
		return baseline.NewPCAL[T](s.n, s.p, lr, penalty)
	case "landing":
		return baseline.NewLanding[T](s.n, s.p, lr, penalty)
	case "rssm":
		return baseline.NewRSSM[T](s.n, s.p, min(r, s.p), lr, seed)
	case "obcd":
		return baseline.NewOBCD[T](s.n, s.p, r, lr, seed)
	default:
		return tableMethod[T](name, s, lr, r, seed)
	}
}

// tableMethod builds the rule name of optim.Rules for an n x p weight of
// s's Stiefel manifold, with its settings' defaults but RSDM's "r" and
// "seed", which the problem gives where the rule takes them.
func tableMethod[T linalg.Float](name string, s setting, lr float64, r int, seed uint64) (optim.Optimizer[T], error) {
	if !slices.Contains(optim.RuleNames(true), name) || slices.ContainsFunc(presets, func(p struct{ name, rule string }) bool { return p.rule == name }) {
		return nil, fmt.Errorf("unknown method %q", name)
	}
	given := map[string]string{"r": fmt.Sprint(r), "seed": fmt.Sprint(seed)}
	values := map[string]string{}
	for _, r := range optim.Rules {
		if r.String() == name {
			for _, st := range optim.SettingsOf(r) {
				if v, ok := given[st.Name]; ok {
					values[st.Name] = v
				}
			}
		}
	}
	rule, err := optim.ParseRuleFlags(name, values)
	if err != nil {
		return nil, err
	}
	return &ruleStep[T]{rule: rule, n: s.n, p: s.p, lr: lr}, nil
}

// ruleStep steps one n x p weight on the Stiefel manifold by a rule's
// Stepper, bound to the weight at its first Step.
type ruleStep[T linalg.Float] struct {
	rule optim.Rule
	n, p int
	lr   float64
	x    []T
	st   optim.Stepper
	// g and gBox are the last gradient and it as the Stepper takes it,
	// boxed once while the gradient's memory stays the same.
	g    []T
	gBox optim.Gradient
}

func (o *ruleStep[T]) Step(x, grad []T) error {
	if o.st == nil || len(x) == 0 || &o.x[0] != &x[0] {
		st, err := o.rule.Stepper(optim.Param{Name: "X", Shape: []int{o.n, o.p}, Manifold: manifold.StiefelKind{}, Value: optim.Host[T](x)}, optim.Binding{})
		if err != nil {
			return err
		}
		o.st, o.x = st, x
	}
	if o.gBox == nil || len(grad) != len(o.g) || (len(grad) > 0 && &grad[0] != &o.g[0]) {
		o.g, o.gBox = grad, optim.Host[T](grad)
	}
	if err := o.st.Prepare(o.gBox, o.lr); err != nil {
		o.st.Abort()
		return err
	}
	return o.st.Commit()
}
