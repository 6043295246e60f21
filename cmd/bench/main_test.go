package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-size", "huge"}, `-size "huge": want small or paper`},
		{[]string{"-problems", "pca,tsp"}, `unknown problem "tsp"`},
		{[]string{"-methods", "adam"}, `unknown method "adam"`},
		{[]string{"-time-limit", "-3s"}, "must not be negative"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		_, err := parse(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q): error %v, want %q", tc.args, err, tc.want)
		}
	}
	o, err := parse([]string{"-size", "small", "-methods", "rgd"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.methods["rgd"] || o.methods["rsdm-p"] || len(o.problems) != 3 || o.maxIter != 4000 {
		t.Errorf("parsed %+v", o)
	}
}

func TestVerdict(t *testing.T) {
	mk := func(secs []float64, gaps []float64) *trace {
		tr := &trace{seconds: secs, gaps: gaps}
		for i := range secs {
			tr.iters = append(tr.iters, i)
		}
		return tr
	}
	fastShallow := mk([]float64{0, 1, 2}, []float64{1, 5e-2, 5e-3})
	slowDeep := mk([]float64{0, 3, 9, 20}, []float64{1, 5e-2, 5e-3, 5e-5})
	quickSame := mk([]float64{0, 0.5, 1}, []float64{1, 5e-2, 5e-3})
	stuckA := mk([]float64{0, 5}, []float64{1, 0.3})
	stuckB := mk([]float64{0, 5}, []float64{1, 0.5})
	for _, tc := range []struct {
		name string
		a, b *trace
		want bool
		why  string
	}{
		{"deeper wins", slowDeep, fastShallow, true, "deepest gap reached 1e-04 vs 1e-02"},
		{"shallower loses", fastShallow, slowDeep, false, "deepest gap reached 1e-02 vs 1e-04"},
		{"same depth, sooner wins", quickSame, fastShallow, true, "gap 1e-02 at 1 s vs 2 s"},
		{"same depth, later loses", fastShallow, quickSame, false, "gap 1e-02 at 2 s vs 1 s"},
		{"neither reached 1e-1", stuckA, stuckB, true, "final gaps 3.00e-01 vs 5.00e-01"},
	} {
		got, why := verdict(tc.a, tc.b)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %v (%s), want %v (%s)", tc.name, got, why, tc.want, tc.why)
		}
	}
}

// TestPaperReport runs one experiment of the paper at a tiny scale and
// checks the report names every method and weighs every claim.
func TestPaperReport(t *testing.T) {
	out := t.TempDir()
	var buf strings.Builder
	if err := run([]string{"-paper", "-scale", "0.05", "-time-limit", "300ms", "-only", "rssm-obcd", "-out", out}, &buf); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{"| RSDM-P |", "| RSDM-O |", "| RSSM |", "| OBCD |", "of 2 comparisons agree", "![rssm-obcd](rssm-obcd.png)"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "rssm-obcd.png")); err != nil {
		t.Error(err)
	}
}

// TestMethodsConverge runs RGD, RSDM-P and Riemannian Adam (its step size
// tuned on its grid) on the small PCA and Procrustes problems: each must
// cut the optimality gap below 1e-3 of where it started and stay on the
// manifold.
func TestMethodsConverge(t *testing.T) {
	o := options{size: "small", timeLimit: 20 * time.Second, maxIter: 1500, seed: 42}
	for _, prob := range []string{"procrustes", "pca"} {
		s := settings("small", prob)
		pr, x0, fstar, _, err := instance[float64](s, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"rgd", "rsdm-p", "radam"} {
			m, tr, err := runMethod[float64](name, s, pr, x0, fstar, 0, 0, o)
			if err != nil {
				t.Errorf("%s on %s: %v", name, prob, err)
				continue
			}
			first, last := tr.gaps[0], tr.gaps[len(tr.gaps)-1]
			t.Logf("%s on %s (lr %g): gap %.2e -> %.2e in %d iterations, feasibility %.1e", name, prob, m.lr, first, last, tr.iters[len(tr.iters)-1], tr.feas)
			if !(last < 1e-3*first) || !(tr.feas < 1e-10) {
				t.Errorf("%s on %s: gap %.2e -> %.2e, ||X^T X - I||_F %.1e", name, prob, first, last, tr.feas)
			}
		}
	}
}
