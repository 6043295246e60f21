package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/optim"
)

// tableRGD is a rule of one's own for constrained weights: plain RGD
// under another name, without settings (RGD's apply to an RGDConfig).
type tableRGD struct{ optim.RGDConfig }

func (tableRGD) String() string            { return "rgdtable" }
func (tableRGD) Settings() []optim.Setting { return nil }

// TestMethodsFromRules checks that bench's methods come from the rule
// table: every constrained rule of optim.Rules is run by a preset, a rule
// registered with optim.Register is a method of its name that -methods
// takes and that descends, and an unconstrained rule is none.
func TestMethodsFromRules(t *testing.T) {
	if got := methodNames(); len(got) != len(presets) {
		t.Errorf("methods %v: the built-in rules added %d beyond the presets", got, len(got)-len(presets))
	}
	saved := optim.Rules
	t.Cleanup(func() { optim.Rules = saved })
	if err := optim.Register(tableRGD{}); err != nil {
		t.Fatal(err)
	}
	if names := methodNames(); names[len(names)-1] != "rgdtable" || slices.Contains(names, "sgd") {
		t.Errorf("methods with rgdtable registered: %v", names)
	}
	o, err := parse([]string{"-methods", "rgdtable,rgd"}, io.Discard)
	if err != nil || !o.methods["rgdtable"] {
		t.Fatalf("-methods rgdtable,rgd: %v, %v", o.methods, err)
	}
	if _, err := parse([]string{"-methods", "sgd"}, io.Discard); err == nil || !strings.Contains(err.Error(), `unknown method "sgd"`) {
		t.Errorf("-methods sgd: error %v", err)
	}
	s := setting{name: "procrustes", n: 16, p: 10, r: 6, lrRGD: 0.5, lrP: 1, lrO: 1}
	checkDescent[float64](t, "rgdtable", s, options{timeLimit: 30e9, maxIter: 1000, seed: 3}, 1e-10)
}
