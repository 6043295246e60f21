package main

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFlagTable checks the flag table from which parseArgs, resumable and
// checkApplicable are derived: every flag is defined once, and every
// condition of when a flag applies reads a flag of fixed choices and
// names some of them. For each flag with a condition, parseFlags refuses it
// (at its default value) where a choice fails the condition, naming the
// flag and that choice, and takes it where the condition holds.
func TestFlagTable(t *testing.T) {
	table := flagTable(new(config))
	_, fs, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]flagDef{}
	for _, d := range table {
		if _, dup := byName[d.name]; dup {
			t.Errorf("-%s is in the table twice", d.name)
		}
		byName[d.name] = d
	}
	for _, d := range table {
		k := d.when
		if k == nil {
			continue
		}
		on, ok := byName[k.on]
		if !ok || len(k.in) == 0 || slices.ContainsFunc(k.in, func(v string) bool { return !slices.Contains(on.choices, v) }) || k.or != nil {
			t.Errorf("-%s applies when -%s is one of %q (or %v), not all of which are its choices %v", d.name, k.on, k.in, k.or, on.choices)
			continue
		}
		given := "-" + d.name + "=" + fs.Lookup(d.name).DefValue
		for _, v := range on.choices {
			_, err := parseFlags([]string{"-" + k.on + "=" + v, given}, io.Discard)
			if holds := k.holds(v); holds && err != nil {
				t.Errorf("%s with -%s %s: %v, want it taken", given, k.on, v, err)
			} else if want := "-" + d.name + " does not apply: -" + k.on + " " + v + " "; !holds && (err == nil || !strings.HasPrefix(err.Error(), want)) {
				t.Errorf("%s with -%s %s: %v, want an error starting %q", given, k.on, v, err, want)
			}
		}
	}
}

// TestCNNDefaults checks the CNN's own defaults: taken where the command
// line leaves a flag unset and the optimizers use it, never over a value
// given, and recorded as given so that a resumed run keeps them.
func TestCNNDefaults(t *testing.T) {
	for _, c := range []struct {
		args        []string
		r           int
		lr, lrOther float64
		other       string
	}{
		{[]string{"-model", "cnn"}, defaultCNNChannels, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-channels", "16"}, 16, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-dataset", "cifar10", "-channels", "8"}, 27, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-optim", "rgd"}, defaultCNNChannels, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-optim", "radam"}, defaultCNNChannels, 0.1, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-other", "sgd"}, defaultCNNChannels, defaultCNNLR, 0.05, "sgd"},
		{[]string{"-model", "cnn", "-r", "20", "-lr", "0.2", "-lr-other", "0.01"}, 20, 0.2, 0.01, defaultCNNOther},
		{[]string{"-model", "ffn"}, 300, 0.1, 0.05, "sgd"},
	} {
		cfg, _, err := parseArgs(c.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if cfg.r != c.r || cfg.lr != c.lr || cfg.lrOther != c.lrOther || cfg.other != c.other {
			t.Errorf("%v: r %d, lr %g, -other %s lr %g; want r %d, lr %g, -other %s lr %g",
				c.args, cfg.r, cfg.lr, cfg.other, cfg.lrOther, c.r, c.lr, c.other, c.lrOther)
		}
		if cfg.flags["other"] != c.other || cfg.flags["lr"] != fmtFloat(c.lr) || cfg.flags["r"] != strconv.Itoa(c.r) {
			t.Errorf("%v: recorded -other %q, -lr %q, -r %q", c.args, cfg.flags["other"], cfg.flags["lr"], cfg.flags["r"])
		}
	}
}
