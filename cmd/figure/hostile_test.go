package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tests of issue 30's hostile uses of the figure command: flags, and run
// folders that are missing, empty, doubled or damaged.

// TestMain runs this test binary as the command where ORTHONET_FIGURE_MAIN
// is 1 (the script tests give it to scripts/dnn_figure.sh as FIGURE).
func TestMain(m *testing.M) {
	if os.Getenv("ORTHONET_FIGURE_MAIN") == "1" {
		os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

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
	writeRun(t, dir, "a-1", []float64{1, 2, 3}, []float64{0.5, 0.6, 0.7})
	writeRun(t, dir, "a-2", []float64{1, 2, 3}, []float64{0.7, 0.8, 0.9})
	writeRun(t, dir, "b-1", []float64{1, 2, 3}, []float64{0.2, 0.4, 0.45})
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
