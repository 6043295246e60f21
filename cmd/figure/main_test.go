package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/internal/foldertest"
)

// TestMain runs this test binary as the command where ORTHONET_FIGURE_MAIN
// is 1 (the script tests give it to scripts/dnn_figure.sh as FIGURE).
func TestMain(m *testing.M) {
	if os.Getenv("ORTHONET_FIGURE_MAIN") == "1" {
		os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// writeRun writes a run folder under dir/name/run-1 whose metrics.csv has a
// training row, a subset evaluation (ignored) and whole-test-set
// evaluations at the given training seconds and accuracies, 10 steps apart.
func writeRun(t *testing.T, dir, name string, times, accs []float64) {
	t.Helper()
	d := filepath.Join(dir, name, "run-1")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("kind,epoch,step,seconds,loss,accuracy,max_feasibility,test_examples,skipped,train_seconds\n")
	b.WriteString("train,1,5,0.5,2.0,0.3,,,0,0.4\n")
	b.WriteString("test,1,5,0.6,2.0,0.99,1e-6,100,,0.45\n")
	for i, tm := range times {
		fmt.Fprintf(&b, "test,1,%d,%g,1.0,%g,2e-6,1000,,%g\n", 10*(i+1), tm+1, accs[i], tm)
	}
	if err := os.WriteFile(filepath.Join(d, "metrics.csv"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeABRuns writes the runs a-1, a-2 and b-1 under dir (writeRun), their
// evaluations at the training seconds times[0], times[1] and times[2], of
// accuracies 0.5 to 0.7, 0.7 to 0.9 and 0.2 to 0.45.
func writeABRuns(t *testing.T, dir string, times [3][]float64) {
	t.Helper()
	writeRun(t, dir, "a-1", times[0], []float64{0.5, 0.6, 0.7})
	writeRun(t, dir, "a-2", times[1], []float64{0.7, 0.8, 0.9})
	writeRun(t, dir, "b-1", times[2], []float64{0.2, 0.4, 0.45})
}

// writeFile writes dir/name/file.
func writeFile(t *testing.T, dir, name, file, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, file), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// section returns the part of s from the first from to the next to after it.
func section(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	before, _, _ := strings.Cut(rest, to)
	return before
}

// TestFigure checks the table's means and spreads at each grid time (a
// run's accuracy at t being its last evaluation before t plus half a step,
// subset evaluations ignored), the grid's end at the shortest run, the
// fixed-times table, the runs' rows with the load recorded beside them, and
// readPage returns the page at path; it fails t unless the page holds
// every string of want.
func readPage(t *testing.T, path string, want ...string) string {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(string(md), w) {
			t.Errorf("%s lacks %q:\n%s", filepath.Base(path), w, md)
		}
	}
	return string(md)
}

// that both PNGs are written.
func TestFigure(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	writeABRuns(t, dir, [3][]float64{{1.001, 2.002, 3.001}, {1.002, 2.001, 3.002}, {1.001, 2.9, 3.5}})
	writeFile(t, dir, "a-1", "load.txt", "# beside a-1\ncores 2\nbefore 0.10 0.20 0.30\nbusy_before 1.50\nafter 2.01 1.00 0.50\nothers 0.25\nflag busy-at-start\n")
	writeFile(t, dir, "a-2", "load.txt", "cores 2\nbefore 0.05 0.10 0.15\nafter 1.90 0.90 0.40\nflag none\n")
	var log bytes.Buffer
	if err := run([]string{"-out", out, "-name", "fig", "-every", "1s", "-at", "2s", "A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}, &log); err != nil {
		t.Fatal(err)
	}
	table := readPage(t, filepath.Join(out, "fig.md"),
		"| 1 | 60.00 (50.00 to 70.00) | 20.00 (20.00 to 20.00) | +40.00 |",
		"| 2 | 70.00 (60.00 to 80.00) | 20.00 (20.00 to 20.00) | +50.00 |", // B's second evaluation is at 2.9 s
		"| 3 | 80.00 (70.00 to 90.00) | 40.00 (40.00 to 40.00) | +40.00 |",
		"| A: a-1/run-1 | 30 | 3.0 | 10.0 | 70.00 | 2e-6 | 0.10, 0.20, 0.30; 1.50 cores busy at the start | 2.01, 1.00, 0.50 | 0.25 | **busy-at-start** |",
		"| A: a-2/run-1 | 30 | 3.0 | 9.99 | 90.00 | 2e-6 | 0.05, 0.10, 0.15 | 1.90, 0.90, 0.40 |  | none |",
		"| B: b-1/run-1 | 30 | 3.5 | 8.57 | 45.00 | 2e-6 | not recorded | | |",
		"![test accuracy against steps](fig-steps.png)",
		"Test accuracy (%) on the 1000 test images of every evaluation at fixed training times", // the 100-image subset is not counted
	)
	fixed := section(table, "fixed training times", "| run |")
	if !strings.Contains(fixed, "| 2 | 70.00") || strings.Contains(fixed, "| 1 |") || strings.Contains(fixed, "| 3 |") {
		t.Errorf("the fixed-times table is not the one row -at asked for:\n%s", fixed)
	}
	if strings.Contains(table, "| 4 |") {
		t.Errorf("the grid goes past the shortest run's end (3.002 s):\n%s", table)
	}
	for _, f := range []string{"fig.png", "fig-steps.png"} {
		png, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%s: %v, %d bytes", f, err, len(png))
		}
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a pattern matching nothing", []string{"A=" + filepath.Join(dir, "none-*")}, "no metrics.csv"},
		{"-at past the grid", []string{"-every", "1s", "-at", "4s", "A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}, "ends at 3s"},
		{"a claim on one label", []string{"-claim", "above", "A=" + filepath.Join(dir, "a-*")}, "compares two labels"},
		{"an unknown claim", []string{"-claim", "faster", "A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}, "want sooner or above"},
	} {
		if err := run(append([]string{"-out", out}, c.args...), &log); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestFigureClaim checks that -claim puts the verdict on the page and on
// standard output, computed from the runs: B's runs are above A's
// throughout, so "A stays above B" does not hold and "B stays above A"
// cannot be told from one run of B.
func TestFigureClaim(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	for i, accs := range [][]float64{{0.5, 0.6, 0.7}, {0.52, 0.62, 0.72}, {0.54, 0.64, 0.74}} {
		writeRun(t, dir, fmt.Sprintf("a-%d", i), []float64{1, 2, 3}, accs)
		writeRun(t, dir, fmt.Sprintf("b-%d", i), []float64{1, 2, 3}, []float64{accs[0] + 0.2, accs[1] + 0.2, accs[2] + 0.2})
	}
	var log bytes.Buffer
	if err := run([]string{"-out", out, "-name", "vit", "-claim", "above", "A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}, &log); err != nil {
		t.Fatal(err)
	}
	readPage(t, filepath.Join(out, "vit.md"), "**Verdict: A stays above B throughout: does not hold.**")
	if want := "verdict: A stays above B throughout: does not hold: "; !strings.Contains(log.String(), want) {
		t.Errorf("the output lacks %q:\n%s", want, log.String())
	}
	log.Reset()
	if err := run([]string{"-out", t.TempDir(), "-name", "vit", "-claim", "above", "B=" + filepath.Join(dir, "b-0"), "A=" + filepath.Join(dir, "a-*")}, &log); err != nil {
		t.Fatal(err)
	}
	if want := "verdict: B stays above A throughout: cannot tell: "; !strings.Contains(log.String(), want) {
		t.Errorf("the output lacks %q:\n%s", want, log.String())
	}
}

// TestReadLoad checks that a malformed load.txt is an error naming its line.
func TestReadLoad(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{"before 0.1 0.2\n", "cores 0\n", "after 0.1 x 0.3\n", "others\n"} {
		writeFile(t, dir, "r", "load.txt", text)
		if _, err := readLoad(filepath.Join(dir, "r", "load.txt")); err == nil || !strings.Contains(err.Error(), "load.txt:1") {
			t.Errorf("%q: %v, want an error naming line 1", text, err)
		}
	}
	if l, err := readLoad(filepath.Join(dir, "none.txt")); err != nil || l.known {
		t.Errorf("a missing load.txt: %+v, %v; want unknown and no error", l, err)
	}
}

// TestFigureOneEvaluation checks that runs evaluated once each (a first
// step longer than -time-limit) take their grid from the -eval-interval of
// their command.txt, and fail without one.
func TestFigureOneEvaluation(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	writeRun(t, dir, "a-1", []float64{6.5}, []float64{0.14})
	writeRun(t, dir, "b-1", []float64{6.9}, []float64{0.12})
	var log bytes.Buffer
	args := []string{"-out", out, "-name", "one", "A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}
	if err := run(args, &log); err == nil || !strings.Contains(err.Error(), "give -every") {
		t.Errorf("no spacing and no command: %v", err)
	}
	writeFile(t, dir, "a-1", "command.txt", "train -model vit -time-limit 6s -eval-interval 2s\n")
	writeFile(t, dir, "b-1", "command.txt", "train -model vit -time-limit 6s -eval-interval 2s\n")
	if err := run(args, &log); err != nil {
		t.Fatal(err)
	}
	readPage(t, filepath.Join(out, "one.md"),
		"| 6 | 14.00 (14.00 to 14.00) | 12.00 (12.00 to 12.00) | +2.00 |",
		"at each 2s of training time") // the commands' grid
}

// TestEvaluationSet checks that the page names the evaluations' test set
// size, and each run's where the runs differ.
func TestEvaluationSet(t *testing.T) {
	run := func(path string, n int) runData { return runData{path: path, examples: n} }
	for _, c := range []struct {
		name string
		all  []series
		want string
	}{
		{"same", []series{{"A", []runData{run("/x/a-1/run-1/metrics.csv", 2000)}}, {"B", []runData{run("/x/b-1/run-1/metrics.csv", 2000)}}},
			"the 2000 test images of every evaluation"},
		{"differ", []series{{"A", []runData{run("/x/a-1/run-1/metrics.csv", 2000)}}, {"B", []runData{run("/x/b-1/run-1/metrics.csv", 10000)}}},
			"each run's test images (a-1/run-1 2000, b-1/run-1 10000)"},
	} {
		if got := evaluationSet(c.all); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestFigureKeepsUsersFiles runs figure into an -out that holds the
// user's files: one named as figure's page (-name README against the
// user's README.md) is refused as a bad setting (exit 2) before any run is
// read, and nothing is written; so is a second run onto an earlier page's
// files, which stay as they were; a run beside the user's other files
// writes its three files and leaves the rest, with no temporary folder
// left behind.
func TestFigureKeepsUsersFiles(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	writeRun(t, dir, "a-1", []float64{1, 2, 3}, []float64{0.5, 0.6, 0.7})
	writeRun(t, dir, "b-1", []float64{1, 2, 3}, []float64{0.4, 0.5, 0.6})
	mine := map[string]string{"README.md": "the user's README", "notes.txt": "the user's notes", "grid.md": "the user's grid"}
	for f, text := range mine {
		writeFile(t, out, "", f, text)
	}
	labels := []string{"A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}
	figure := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := mainCode(append(append([]string{"-out", out}, args...), labels...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	entries := func() []string {
		ents, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	for _, args := range [][]string{{"-name", "README"}, {"-grid", "lr", "-name", "grid"}} {
		if code, text := figure(args...); code != 2 || !strings.Contains(text, "exists: figure replaces no file") {
			t.Errorf("%q over the user's file: exit %d, want 2 and a refusal:\n%s", args, code, text)
		}
	}
	if got := entries(); len(got) != len(mine) {
		t.Errorf("refused runs left %q in -out", got)
	}
	if code, text := figure("-name", "ffn"); code != 0 {
		t.Fatalf("a new page beside the user's files: exit %d\n%s", code, text)
	}
	page := foldertest.Snapshot(t, out)
	if got := entries(); len(got) != len(mine)+3 {
		t.Errorf("-out holds %q, want the user's files and ffn.png, ffn-steps.png, ffn.md", got)
	}
	if code, text := figure("-name", "ffn"); code != 2 || !strings.Contains(text, "ffn.png exists") {
		t.Errorf("a second page onto the first: exit %d, want 2 and a refusal:\n%s", code, text)
	}
	foldertest.Same(t, "-out after a refused second page", out, page)
	for f, text := range mine {
		if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || string(b) != text {
			t.Errorf("%s: %q, %v; want it as it was", f, b, err)
		}
	}
}

// Tests of issue 30's hostile uses of the figure command: flags, and run
// folders that are missing, empty, doubled or damaged.

// figureCode runs the command with args, bounded by 60 s, and returns its
// exit status, output and error output.
func figureCode(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- mainCode(args, &out, &errOut) }()
	select {
	case code := <-done:
		return code, out.String(), errOut.String()
	case <-time.After(60 * time.Second):
		t.Fatalf("figure %q did not end in 60 s", args)
	}
	return 0, "", ""
}

// TestFlagsChecked gives each flag a value it cannot take: each exits
// non-zero at once with one line naming the flag, writing nothing; -h
// exits 0 with the usage on standard output.
func TestFlagsChecked(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, "a-1", []float64{1, 2, 3}, []float64{0.5, 0.6, 0.7})
	writeRun(t, dir, "b-1", []float64{1, 2, 3}, []float64{0.4, 0.5, 0.6})
	labels := []string{"A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tiny -every", []string{"-every", "1ns"}, "-every"},
		{"small -every", []string{"-every", "10us"}, "give a larger -every"},
		{"negative -every", []string{"-every", "-1s"}, "-every -1s: want a positive grid step"},
		{"tiny -eval-interval in the commands", []string{"-every", "0"}, "the runs' -eval-interval"},
		{"-min-seeds 0", []string{"-min-seeds", "0"}, "-min-seeds 0"},
		{"-name with a folder", []string{"-name", "x/y"}, "-name \"x/y\""},
		{"empty -name", []string{"-name", ""}, "-name \"\""},
		{"-title of two lines", []string{"-title", "a\nb"}, "-title"},
		{"-grid not a flag name", []string{"-grid", "-lr"}, "-grid \"-lr\""},
		{"-reach", []string{"-reach", "1.5"}, "-reach 1.5"},
		{"-every not a duration", []string{"-every", "soon"}, "invalid value \"soon\" for flag -every"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.name, "commands") {
				for _, r := range []string{"a-1", "b-1"} {
					writeFile(t, dir, r, "command.txt", "train -time-limit 3s -eval-interval 1ns\n")
					defer os.Remove(filepath.Join(dir, r, "command.txt"))
				}
			}
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := figureCode(t, append(append([]string{"-out", out}, tc.args...), labels...)...)
			if code == 0 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "figure: ") || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q: want a failure in one line naming %q", code, stderr, tc.want)
			}
			if ents, _ := os.ReadDir(out); len(ents) != 0 {
				t.Errorf("wrote %d files into -out", len(ents))
			}
		})
	}
	code, stdout, stderr := figureCode(t, "-h")
	if code != 0 || !strings.Contains(stdout, "-every duration") || stderr != "" {
		t.Errorf("figure -h: exit %d, stdout %q, stderr %q: want 0 and the usage", code, stdout, stderr)
	}
	if code, _, _ := figureCode(t, "-no-such-flag"); code != 2 {
		t.Errorf("figure -no-such-flag: exit %d, want 2", code)
	}
}

// TestRunFoldersChecked plants, among good runs, a seed folder without a
// metrics.csv, an empty one and one without evaluations (each left out
// with a warning on the page and on standard output, the means taken over
// the good runs), and, one at a time, a child run resumed inside a seed's
// folder, rows of garbage and accuracies out of range (each an error
// naming the file, and the row).
func TestRunFoldersChecked(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	writeABRuns(t, dir, [3][]float64{{1, 2, 3}, {1, 2, 3}, {1, 2, 3}})
	writeFile(t, dir, "a-3", "command.txt", "train -seed 3\n")
	writeFile(t, dir, filepath.Join("a-4", "run-1"), "metrics.csv", "")
	writeFile(t, dir, filepath.Join("a-5", "run-1"), "metrics.csv", "kind,epoch,step,seconds,loss,accuracy,max_feasibility,test_examples,skipped,train_seconds\n")
	labels := []string{"A=" + filepath.Join(dir, "a-*"), "B=" + filepath.Join(dir, "b-*")}
	code, stdout, stderr := figureCode(t, append([]string{"-out", out, "-name", "f", "-every", "1s"}, labels...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	md, _ := os.ReadFile(filepath.Join(out, "f.md"))
	for _, want := range []string{
		"A: " + filepath.Join(dir, "a-3") + " holds no metrics.csv (in it or in a run-* folder): not counted",
		"A: " + filepath.Join(dir, "a-4", "run-1", "metrics.csv") + ": empty: no whole-test-set evaluation: not counted",
		"A: " + filepath.Join(dir, "a-5", "run-1", "metrics.csv") + ": no whole-test-set evaluation: not counted",
	} {
		if !strings.Contains(string(md), "**Warning:** "+want) || !strings.Contains(stdout, "figure: warning: "+want) {
			t.Errorf("no warning %q on the page and the output:\n%s\n%s", want, md, stdout)
		}
	}
	if want := "| 1 | 60.00 (50.00 to 70.00) | 20.00 (20.00 to 20.00) | +40.00 |"; !strings.Contains(string(md), want) {
		t.Errorf("the page lacks %q (A's mean over its 2 good runs):\n%s", want, md)
	}

	header := "kind,epoch,step,seconds,loss,accuracy,max_feasibility,test_examples,skipped,train_seconds\n"
	good := "test,1,10,1.5,1.0,0.5,2e-6,1000,,1\n"
	for _, tc := range []struct {
		name, metrics, want string
	}{
		{"garbage kind", header + good + "zzz,1,20,2.5,1.0,0.6,2e-6,1000,,2\n", "row 3: kind \"zzz\""},
		{"garbage step", header + good + "test,1,x,2.5,1.0,0.6,2e-6,1000,,2\n", "row 3: step \"x\""},
		{"accuracy above 1", header + good + "test,1,20,2.5,1.0,1.5,2e-6,1000,,2\n", "row 3: accuracy \"1.5\""},
		{"negative accuracy", header + "test,1,10,1.5,1.0,-0.1,2e-6,1000,,1\n", "row 2: accuracy \"-0.1\""},
		{"NaN accuracy", header + good + "test,1,20,2.5,1.0,NaN,2e-6,1000,,2\n", "row 3: accuracy \"NaN\""},
		{"infinite time", header + good + "test,1,20,2.5,1.0,0.6,2e-6,1000,,+Inf\n", "row 3: train_seconds \"+Inf\""},
		{"time going back", header + good + "test,1,20,2.5,1.0,0.6,2e-6,1000,,0.5\n", "row 3: step 20 at 0.5 training seconds comes after step 10 at 1"},
		{"short row", header + good + "test,1,20\n", "record on line 3: wrong number of fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := t.TempDir()
			writeRun(t, bad, "a-1", []float64{1, 2, 3}, []float64{0.5, 0.6, 0.7})
			writeFile(t, bad, filepath.Join("a-2", "run-1"), "metrics.csv", tc.metrics)
			code, _, stderr := figureCode(t, "-out", t.TempDir(), "-every", "1s", "A="+filepath.Join(bad, "a-*"), "B="+filepath.Join(dir, "b-*"))
			file := filepath.Join(bad, "a-2", "run-1", "metrics.csv")
			if code != 1 || !strings.Contains(stderr, file) || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q: want one line naming %s and %q", code, stderr, file, tc.want)
			}
		})
	}

	// A child run resumed inside a seed's folder (train -resume of an older
	// checkpoint with -out that folder) carries its parent's evaluations.
	child := t.TempDir()
	writeRun(t, child, "a-1", []float64{1, 2, 3}, []float64{0.5, 0.6, 0.7})
	writeFile(t, child, filepath.Join("a-1", "run-1"), "run.json", `{"format":"orthonet.run","format_version":1,"id":"00000000000000aa","checkpoints":[30]}`)
	writeFile(t, child, filepath.Join("a-1", "run-2"), "metrics.csv", header+good)
	writeFile(t, child, filepath.Join("a-1", "run-2"), "run.json",
		`{"format":"orthonet.run","format_version":1,"id":"00000000000000bb","parent":{"path":"/x/step-000000010.safetensors","step":10,"run":"00000000000000aa"},"checkpoints":[]}`)
	code, _, stderr = figureCode(t, "-out", t.TempDir(), "-every", "1s", "A="+filepath.Join(child, "a-*"), "B="+filepath.Join(dir, "b-*"))
	if want := fmt.Sprintf("%s goes on from %s", filepath.Join(child, "a-1", "run-2"), filepath.Join(child, "a-1", "run-1")); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("a child run in a seed's folder: exit %d, stderr %q, want an error saying %q", code, stderr, want)
	}

	// One run copied into two seeds' folders (the same run id) is refused,
	// naming both, as is a run that two labels' patterns both match.
	dup := t.TempDir()
	for _, seed := range []string{"a-1", "a-2"} {
		writeRun(t, dup, seed, []float64{1, 2, 3}, []float64{0.5, 0.6, 0.7})
		writeFile(t, dup, filepath.Join(seed, "run-1"), "run.json", `{"format":"orthonet.run","format_version":1,"id":"00000000000000cc","checkpoints":[30]}`)
	}
	code, _, stderr = figureCode(t, "-out", t.TempDir(), "-every", "1s", "A="+filepath.Join(dup, "a-*"), "B="+filepath.Join(dir, "b-*"))
	if code != 1 || !strings.Contains(stderr, "are one run (run id 00000000000000cc") || !strings.Contains(stderr, filepath.Join(dup, "a-2")) {
		t.Errorf("one run in two seeds' folders: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = figureCode(t, "-out", t.TempDir(), "-every", "1s", "A="+filepath.Join(dir, "b-*"), "B="+filepath.Join(dir, "b-*"))
	if code != 1 || !strings.Contains(stderr, "of label A and of label B") {
		t.Errorf("a run under two labels: exit %d, stderr %q", code, stderr)
	}
}
