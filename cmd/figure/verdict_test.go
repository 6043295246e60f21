package main

import (
	"strings"
	"testing"
)

// synthetic returns a series of runs evaluated at 10, 20, ... training
// seconds (100 steps apart) with the given accuracies, one slice per run.
func synthetic(label string, runs ...[]float64) series {
	s := series{label: label}
	for _, accs := range runs {
		r := runData{path: "/x/" + label + "/run-1/metrics.csv"}
		for i, a := range accs {
			r.evals = append(r.evals, evaluation{train: 10*float64(i+1) + 0.01, step: 100 * (i + 1), accuracy: a})
		}
		s.runs = append(s.runs, r)
	}
	return s
}

// verdictCase is a claim's two series of runs and the verdict they should
// get: its outcome and strings its detail has.
type verdictCase struct {
	name string
	a, b series
	want string
	has  []string
}

// checkVerdicts runs each case as a subtest: judge's verdict on its a and
// b must have the outcome want and a detail with every string of has.
func checkVerdicts(t *testing.T, cases []verdictCase, judge func(a, b series) verdict) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := judge(c.a, c.b)
			if v.outcome != c.want {
				t.Errorf("outcome %q, want %q: %s", v.outcome, c.want, v.detail)
			}
			for _, h := range c.has {
				if !strings.Contains(v.detail, h) {
					t.Errorf("the detail lacks %q: %s", h, v.detail)
				}
			}
		})
	}
}

var grid5 = []float64{10, 20, 30, 40, 50}

// fast rises to its end in two evaluations; slow only at the last.
var (
	fast = [][]float64{{0.80, 0.90, 0.91, 0.92, 0.92}, {0.82, 0.91, 0.92, 0.93, 0.93}, {0.81, 0.90, 0.915, 0.925, 0.925}}
	slow = [][]float64{{0.50, 0.60, 0.70, 0.85, 0.92}, {0.52, 0.62, 0.71, 0.86, 0.93}, {0.51, 0.61, 0.72, 0.84, 0.925}}
)

// TestSoonerVerdict checks that the FFN claim's verdict comes out each way
// from the runs: the first label's mean reaching 95% of the better final
// mean at an earlier grid time with its band apart (holds), the second's
// doing so (does not hold), and the cases it cannot tell.
func TestSoonerVerdict(t *testing.T) {
	checkVerdicts(t, []verdictCase{
		{"RSDM first, bands apart", synthetic("RSDM-P", fast...), synthetic("RGD", slow...), holds,
			[]string{"RSDM-P's mean first reaches it at 20s", "RGD's mean first reaches it at 50s", "at 20s RSDM-P's band is 90.00 to 91.00, RGD's 60.00 to 62.00"}},
		{"RGD first, bands apart", synthetic("RSDM-P", slow...), synthetic("RGD", fast...), doesNotHold,
			[]string{"RGD's mean first reaches it at 20s", "RSDM-P's mean first reaches it at 50s"}},
		{"RSDM first, bands overlapping", synthetic("RSDM-P", fast...), synthetic("RGD", []float64{0.5, 0.60, 0.7, 0.85, 0.92}, []float64{0.5, 0.905, 0.7, 0.86, 0.93}, []float64{0.5, 0.62, 0.72, 0.84, 0.925}), cannotTell,
			[]string{"at 20s RSDM-P's band is 90.00 to 91.00, RGD's 60.00 to 90.50 (overlapping or below)"}},
		{"the same grid time", synthetic("RSDM-P", fast...), synthetic("RGD", fast...), cannotTell,
			[]string{"the grid cannot order them"}},
		{"two seeds", synthetic("RSDM-P", fast[:2]...), synthetic("RGD", slow[:2]...), cannotTell,
			[]string{"RSDM-P has 2 runs and RGD 2, fewer than the 3"}},
		{"RGD never arrives", synthetic("RSDM-P", fast...), synthetic("RGD", []float64{0.5, 0.6, 0.7, 0.7, 0.7}, []float64{0.5, 0.6, 0.7, 0.7, 0.7}, []float64{0.5, 0.6, 0.7, 0.7, 0.7}), holds,
			[]string{"RGD's mean never reaches it by 50s"}},
	}, func(a, b series) verdict { return soonerVerdict(a, b, grid5, 10, 0.95, 3) })
}

// TestAboveVerdict checks that the ViT claim's verdict comes out each way:
// the first label's mean above at every grid time after the first
// evaluation with the bands apart (holds, whatever the first evaluation
// says), its band wholly below somewhere (does not hold), and means above
// with bands overlapping, a mean below within overlapping bands, or too few
// runs (cannot tell).
func TestAboveVerdict(t *testing.T) {
	lower := [][]float64{{0.40, 0.50, 0.60, 0.65, 0.70}, {0.42, 0.52, 0.62, 0.66, 0.71}, {0.41, 0.51, 0.61, 0.64, 0.69}}
	higher := [][]float64{{0.38, 0.60, 0.70, 0.75, 0.80}, {0.39, 0.61, 0.71, 0.76, 0.81}, {0.37, 0.62, 0.72, 0.77, 0.79}}
	checkVerdicts(t, []verdictCase{
		{"above throughout", synthetic("RSDM-P", higher...), synthetic("RGD", lower...), holds,
			[]string{"above RGD's at 4 of 4 grid times from 20s to 50s", "the bands never overlap"}},
		{"below throughout", synthetic("RSDM-P", lower...), synthetic("RGD", higher...), doesNotHold,
			[]string{"above RGD's at 0 of 4", "its band wholly below at 20-50s"}},
		{"above, bands overlapping at 30 s", synthetic("RSDM-P", higher[0], higher[1], []float64{0.37, 0.62, 0.615, 0.77, 0.79}), synthetic("RGD", lower...), cannotTell,
			[]string{"the bands overlap at 30s"}},
		{"below at 30 s, bands overlapping", synthetic("RSDM-P", higher[0], []float64{0.39, 0.61, 0.55, 0.76, 0.81}, []float64{0.37, 0.62, 0.55, 0.77, 0.79}), synthetic("RGD", lower...), cannotTell,
			[]string{"above RGD's at 3 of 4", "not above at 30s", "the bands overlap at 30s"}},
		{"two seeds", synthetic("RSDM-P", higher[:2]...), synthetic("RGD", lower[:2]...), cannotTell,
			[]string{"fewer than the 3 of each"}},
	}, func(a, b series) verdict { return aboveVerdict(a, b, grid5, 10, 3) })
}

// TestLoadNote checks that a run flagged for load is named in a verdict.
func TestLoadNote(t *testing.T) {
	a, b := synthetic("RSDM-P", fast...), synthetic("RGD", slow...)
	a.runs[1].load = runLoad{known: true, cores: 2, flag: "busy-at-start"}
	b.runs[0].load = runLoad{known: true, cores: 2, flag: "none"}
	v := soonerVerdict(a, b, grid5, 10, 0.95, 3)
	if !strings.Contains(v.detail, "1 runs were flagged for load (RSDM-P: RSDM-P/run-1)") {
		t.Errorf("the detail does not name the flagged run: %s", v.detail)
	}
}

func TestSpans(t *testing.T) {
	for _, c := range []struct {
		ts   []float64
		want string
	}{
		{[]float64{10, 20, 30, 50}, "10-30s, 50s"},
		{[]float64{10}, "10s"},
		{[]float64{10, 30, 40}, "10s, 30-40s"},
	} {
		if got := spans(c.ts, 10); got != c.want {
			t.Errorf("spans(%v) = %q, want %q", c.ts, got, c.want)
		}
	}
}
