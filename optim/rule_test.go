package optim

import (
	"strings"
	"testing"
)

// TestParse checks that every rule and sampler parses back from its name,
// with the settings that it takes, and that an unknown name is refused
// with the names that exist.
func TestParse(t *testing.T) {
	set := RuleSettings{SubmanifoldSize: 7, Sampling: Blocks, Seed: 9, Momentum: 0.4}
	for _, r := range Rules {
		got, err := ParseRule(r.String(), set)
		if err != nil || got.String() != r.String() || got.Constrained() != r.Constrained() {
			t.Errorf("%v: parsed %v, %v", r, got, err)
		}
	}
	if r, _ := ParseRule("rsdm", set); r != Rule(RSDMConfig{SubmanifoldSize: 7, Sampling: Blocks, Seed: 9}) {
		t.Errorf("rsdm with settings: %+v", r)
	}
	if r, _ := ParseRule("rgd", set); r != Rule(RGDConfig{Momentum: 0.4}) {
		t.Errorf("rgd with settings: %+v", r)
	}
	if r, _ := ParseRule("sgd", set); r != Rule(SGDConfig{Momentum: 0.4}) {
		t.Errorf("sgd with settings: %+v", r)
	}
	// The lists that messages and flags show, derived from Rules: every
	// rule's name, constrained ones (on a manifold) apart.
	var all, constrained []string
	for _, r := range Rules {
		all = append(all, r.String())
		if r.Constrained() {
			constrained = append(constrained, r.String())
		}
	}
	if _, err := ParseRule("lbfgs", set); err == nil || !strings.Contains(err.Error(), strings.Join(all, ", ")) {
		t.Errorf("unknown rule: error %v, want it to name %s", err, strings.Join(all, ", "))
	}
	if got, want := strings.Join(RuleNames(true), ","), strings.Join(constrained, ","); got != want || !strings.Contains(want, "rsdm") {
		t.Errorf("constrained rules %s, want %s (RSDM among them)", got, want)
	}
	for _, s := range Samplers {
		if got, err := ParseSampler(s.String()); err != nil || got != s {
			t.Errorf("%v: parsed %v, %v", s, got, err)
		}
	}
	var samplers []string
	for _, s := range Samplers {
		samplers = append(samplers, s.String())
	}
	if _, err := ParseSampler("sobol"); err == nil || !strings.Contains(err.Error(), strings.Join(samplers, ", ")) {
		t.Errorf("unknown sampler: error %v", err)
	}
}
