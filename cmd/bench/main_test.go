package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/optim"
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
	if o, err = parse([]string{"-methods", "rsdm-p, radam"}, io.Discard); err != nil || !o.methods["radam"] || !o.methods["rsdm-p"] || len(o.methods) != 2 {
		t.Errorf("-methods rsdm-p,radam: %v, %v", o.methods, err)
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
	dir := onlyRun(t, out)
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{"| RSDM-P |", "| RSDM-O |", "| RSSM |", "| OBCD |", "of 2 comparisons agree", "![rssm-obcd](rssm-obcd.png)"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rssm-obcd.png")); err != nil {
		t.Error(err)
	}
}

// TestMethodsDescend runs every method on small Procrustes and PCA
// problems, in float64 and float32, and checks that each cuts the
// optimality gap tenfold within its iteration cap and that the feasible
// ones end on the manifold (the infeasible PCAL and Landing near it). The
// tuned methods (Riemannian Adam among them) first pick their step size
// from their grid by a short run, as bench does.
func TestMethodsDescend(t *testing.T) {
	o := options{timeLimit: time.Minute, maxIter: 1000, seed: 3} // the time limit is a safety net only
	// RSSM's X_C <- polar(X_C - eta grad_C) does not restore the drawn
	// columns' orthogonality to the others: at the step size its short
	// tuning run picks here (1), rounding errors grow geometrically
	// (||X^T X - I||_F ~ 1e-8 after 1000 float64 steps, ~1 in float32).
	skip := map[string]string{"rssm": "RSSM drifts off the manifold at its tuned step size on these sizes"}
	for _, s := range []setting{
		{name: "procrustes", n: 16, p: 10, r: 6, lrRGD: 0.5, lrP: 1, lrO: 1},
		{name: "pca", n: 40, p: 20, r: 10, lrRGD: 0.1, lrP: 1.5, lrO: 1.5},
	} {
		for _, name := range methodNames() {
			t.Run(s.name+"/"+name, func(t *testing.T) {
				if why := skip[name]; why != "" {
					t.Skip(why)
				}
				checkDescent[float64](t, name, s, o, 1e-10)
				checkDescent[float32](t, name, s, o, 1e-4)
			})
		}
	}
}

func checkDescent[T float32 | float64](t *testing.T, name string, s setting, o options, tol float64) {
	pr, x0, fstar, _, err := instance[T](s, o)
	if err != nil {
		t.Fatal(err)
	}
	m, tr, err := runMethod[T](name, s, pr, x0, fstar, 0, 0, o)
	if err != nil {
		t.Fatal(err)
	}
	first, last := tr.gaps[0], tr.gaps[len(tr.gaps)-1]
	if !(last < first/10) {
		t.Errorf("%T, step size %g: gap %.3g after %d iterations, from %.3g", T(0), m.lr, last, tr.iters[len(tr.iters)-1], first)
	}
	if !m.feasible {
		tol = 0.1
	}
	if !(tr.feas < tol) {
		t.Errorf("%T, step size %g: ||X^T X - I||_F = %.2g, want < %g", T(0), m.lr, tr.feas, tol)
	}
}

// onlyRun returns the one run folder under out, failing t unless out holds
// exactly one entry, a run folder.
func onlyRun(t *testing.T, out string) string {
	t.Helper()
	runs := newEntries(t, out, nil)
	if len(runs) != 1 {
		t.Fatalf("%s holds %q, want one run folder", out, runs)
	}
	return filepath.Join(out, runs[0])
}

// newEntries returns the names under out that are not in before, failing
// t for any that is not a run folder (a temporary folder left behind).
func newEntries(t *testing.T, out string, before map[string]string) []string {
	t.Helper()
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, e := range ents {
		if _, ok := before[e.Name()]; ok {
			continue
		}
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runPrefix) {
			t.Errorf("%s: %s left there", out, e.Name())
			continue
		}
		runs = append(runs, e.Name())
	}
	return runs
}

// TestOutKeepsUsersFiles runs bench twice into an -out that holds the
// user's files under the names a run writes and an earlier run's folder:
// each run writes its own new folder, and every file that was there stays
// byte for byte. A run whose checks fail keeps its folder; an -out that is
// a file is a bad setting, and the file stays.
func TestOutKeepsUsersFiles(t *testing.T) {
	out := t.TempDir()
	mine := map[string]string{
		"bench.csv":      "the user's bench.csv",
		"procrustes.png": "the user's png",
		"report.md":      "the user's report",
		filepath.Join("run-20000101-000000", "bench.csv"): "an earlier run's",
	}
	write := func() map[string]string {
		before := map[string]string{}
		for name, text := range mine {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(out, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			before[strings.Split(name, string(filepath.Separator))[0]] = ""
		}
		return before
	}
	before := write()
	small := []string{"-size", "small", "-problems", "procrustes", "-methods", "rgd", "-kernels=false", "-out", out}
	for i := range 2 {
		var buf strings.Builder
		if err := run(small, &buf); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, buf.String())
		}
		runs := newEntries(t, out, before)
		if len(runs) != 1 {
			t.Fatalf("run %d: new entries %q, want one run folder", i+1, runs)
		}
		for _, f := range []string{"bench.csv", "procrustes.png"} {
			if fi, err := os.Stat(filepath.Join(out, runs[0], f)); err != nil || fi.Size() < 100 {
				t.Errorf("run %d: %s: %v", i+1, f, err)
			}
		}
		if !strings.Contains(buf.String(), "results: "+filepath.Join(out, runs[0])) {
			t.Errorf("run %d does not name its folder:\n%s", i+1, buf.String())
		}
		before[runs[0]] = ""
	}
	// Checks that fail (10 iterations cannot reach gap 1e-4): the run's
	// folder is kept, and the error says why.
	err := run(append(small, "-max-iter", "10"), io.Discard)
	if !errors.As(err, new(*checksError)) {
		t.Errorf("a run whose checks fail: %v, want a checksError", err)
	}
	if runs := newEntries(t, out, before); len(runs) != 1 {
		t.Errorf("a run whose checks fail left %q, want its run folder", runs)
	}
	file := filepath.Join(out, "bench.csv")
	err = run([]string{"-size", "small", "-problems", "procrustes", "-methods", "rgd", "-kernels=false", "-out", file}, io.Discard)
	if !errors.As(err, new(*usageError)) {
		t.Errorf("-out naming a file: %v, want a usageError (exit 2)", err)
	}
	for name, text := range mine {
		if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(b) != text {
			t.Errorf("%s: %q, %v; want the file as it was", name, b, err)
		}
	}
}

// TestRunDirNames checks that a run's folder never takes a name that is
// there, a file, a folder holding files or an empty folder, and that
// discard removes the temporary folder alone.
func TestRunDirNames(t *testing.T) {
	out := t.TempDir()
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, p := range []string{"run-20260102-030405/mine.txt", "run-20260102-030405-2/", "run-20260102-030405-3"} {
		path := filepath.Join(out, p)
		if strings.HasSuffix(p, "/") {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := newRunDir(out, stamp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.tmp, "bench.csv"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := d.finish()
	if want := filepath.Join(out, "run-20260102-030405-4"); err != nil || dir != want {
		t.Fatalf("finish: %q, %v; want %q", dir, err, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bench.csv")); err != nil || string(b) != "new" {
		t.Errorf("the run's file: %q, %v", b, err)
	}
	for _, p := range []string{"run-20260102-030405/mine.txt", "run-20260102-030405-3"} {
		if b, err := os.ReadFile(filepath.Join(out, p)); err != nil || string(b) != "keep" {
			t.Errorf("%s: %q, %v; want it kept", p, b, err)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(out, "run-20260102-030405-2")); err != nil || len(ents) != 0 {
		t.Errorf("the empty folder: %v, %v; want it kept, empty", ents, err)
	}
	d, err = newRunDir(out, stamp)
	if err != nil {
		t.Fatal(err)
	}
	d.discard()
	if _, err := os.Stat(d.tmp); !os.IsNotExist(err) {
		t.Errorf("discard left %s: %v", d.tmp, err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 4 {
		t.Errorf("out holds %d entries after discard, want 4", len(ents))
	}
}

// tableRGD is a rule of one's own for constrained weights: plain RGD
// under another name, without settings (RGD's apply to an RGDConfig).
type tableRGD struct{ optim.RGDConfig }

func (tableRGD) String() string            { return "rgdtable" }
func (tableRGD) Settings() []optim.Setting { return nil }

// TestMethodsFromRules checks that bench's methods come from the rule
// table: every constrained rule of optim.Rules is a method, run by a preset
// or under its own name (a built-in rule needs no preset: TestMethodsDescend
// runs it), each method's name is one method's, a rule registered with
// optim.Register is a method of its name that -methods takes and that
// descends, and an unconstrained rule is none.
func TestMethodsFromRules(t *testing.T) {
	names := methodNames()
	if sorted := slices.Sorted(slices.Values(names)); len(slices.Compact(sorted)) != len(names) {
		t.Errorf("methods %v: a name twice (a rule named like a preset)", names)
	}
	for _, r := range optim.Rules {
		byPreset := slices.ContainsFunc(presets, func(p struct{ name, rule string }) bool { return p.rule == r.String() })
		if ran := byPreset || slices.Contains(names, r.String()); ran != r.Constrained() {
			t.Errorf("rule %s (constrained: %v): a method of bench %v, want %v (methods %v)", r, r.Constrained(), ran, r.Constrained(), names)
		}
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
