package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestFlagTable checks the flag table from which parseArgs, resumable and
// checkApplicable are derived: every flag is defined once, and every
// condition of when a flag applies reads a flag of fixed choices and
// names one of them. For each flag with a condition, parseFlags refuses it
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
		if !ok || !slices.Contains(on.choices, k.is) {
			t.Errorf("-%s applies when -%s is %q, which is not one of its choices %v", d.name, k.on, k.is, on.choices)
			continue
		}
		given := "-" + d.name + "=" + fs.Lookup(d.name).DefValue
		for _, v := range on.choices {
			_, err := parseFlags([]string{"-" + k.on + "=" + v, given}, io.Discard)
			if holds := (v == k.is) != k.not; holds && err != nil {
				t.Errorf("%s with -%s %s: %v, want it taken", given, k.on, v, err)
			} else if want := "-" + d.name + " does not apply: -" + k.on + " " + v + " "; !holds && (err == nil || !strings.HasPrefix(err.Error(), want)) {
				t.Errorf("%s with -%s %s: %v, want an error starting %q", given, k.on, v, err, want)
			}
		}
	}
}
