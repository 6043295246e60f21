package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/foldertest"
	"github.com/orthonet/orthonet/internal/runtest"
)

// runFolders lists the run folders under out.
func runFolders(t *testing.T, out string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(out, "run-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// csvRows reads metrics.csv without its clock columns (seconds, and
// train_seconds, the last).
func csvRows(t *testing.T, path string) [][]string {
	t.Helper()
	rows := readCSV(t, path)
	for i := range rows {
		rows[i] = append(rows[i][:3:3], rows[i][4:len(rows[i])-1]...)
	}
	return rows
}

// TestResumeElsewhere reproduces the resumes that lost data. (1) A
// finished run resumed from an older checkpoint, with and without -out:
// the run's folder stays byte-identical and a new run folder records the
// parent, carries its metrics and ends where the run ended, bit for bit.
// (2) A checkpoint copied into a folder holding another run's files and
// planted ones (step-00000000{1,2,3}.safetensors that are not checkpoints,
// .draft.tmp-notes, metrics.csv and metrics.png linked to files outside):
// resuming it leaves every file there and every link target byte-identical;
// resuming that folder's own run in place replaces the links, not their
// targets, and removes nothing it did not write.
func TestResumeElsewhere(t *testing.T) {
	data := mnistDir(t, 200, 50)
	out := t.TempDir()
	base := []string{"-dataset", "mnist", "-data", data, "-hidden", "32", "-depth", "2", "-r", "8", "-batch", "10",
		"-epochs", "2", "-save-every", "10", "-keep", "10", "-eval-every", "-1"}
	train := func(args ...string) string {
		t.Helper()
		c, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := run(context.Background(), c, &buf, hooks{}); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, buf.String())
		}
		return buf.String()
	}
	train(append(base, "-out", out)...)
	runs := runFolders(t, out)
	if len(runs) != 1 {
		t.Fatalf("run folders %v", runs)
	}
	orig := runs[0]
	origRun, err := checkpoint.ReadRun(orig)
	if err != nil {
		t.Fatal(err)
	}
	if got := origRun.Checkpoints(); !reflect.DeepEqual(got, []int{10, 20, 30, 40}) {
		t.Fatalf("checkpoints %v", got)
	}
	want, wantProgress := runtest.Read(t, filepath.Join(orig, checkpoint.StepName(40)))
	wantRows := csvRows(t, filepath.Join(orig, "metrics.csv"))
	for _, r := range wantRows[1:] {
		if measured := r[5] != ""; measured != (r[0] == "test") {
			t.Errorf("metrics.csv row %v: max_feasibility must be given on test rows only", r)
		}
	}
	step20 := filepath.Join(orig, checkpoint.StepName(20))
	_, p20 := runtest.Read(t, step20)
	for _, m := range p20.Metrics {
		if (m.Feasibility != nil) != (m.Kind == "test") {
			t.Errorf("metric %+v loaded from a checkpoint: feasibility measured only on test rows", m)
		}
	}

	// (1) From step 20 of the finished run, once under the saved -out and
	// once under another.
	origTree := foldertest.Snapshot(t, orig)
	other := t.TempDir()
	for _, tc := range []struct {
		out  string
		args []string
	}{
		{out, nil},
		{other, []string{"-out", other}},
	} {
		before := runFolders(t, tc.out)
		msg := train(append([]string{"-resume", step20}, tc.args...)...)
		foldertest.Kept(t, "resume from step 20", orig, origTree)
		after := runFolders(t, tc.out)
		if len(after) != len(before)+1 {
			t.Fatalf("resume from step 20 %v: run folders %v, then %v; want one more under %s", tc.args, before, after, tc.out)
		}
		var child string
		for _, d := range after {
			if !slices.Contains(before, d) {
				child = d
			}
		}
		if !strings.Contains(msg, "going on in a new run folder "+child) {
			t.Errorf("resume from step 20 does not say where it goes:\n%s", msg)
		}
		r, err := checkpoint.ReadRun(child)
		if err != nil {
			t.Fatal(err)
		}
		if p := r.Parent(); p == nil || p.Step != 20 || p.Run != origRun.ID() || p.Path != step20 {
			t.Errorf("the new run's parent is %+v, want step 20 of run %s at %s", p, origRun.ID(), step20)
		}
		got, gotProgress := runtest.Read(t, filepath.Join(child, checkpoint.StepName(40)))
		sameTraining(t, "resumed from step 20", want, got, wantProgress, gotProgress)
		if rows := csvRows(t, filepath.Join(child, "metrics.csv")); !reflect.DeepEqual(rows, wantRows) {
			t.Errorf("the new run's metrics.csv:\n%v\nwant the original's:\n%v", rows, wantRows)
		}
	}

	// A finished run resumed from its newest checkpoint says so and does
	// nothing.
	var buf bytes.Buffer
	c, err := parseFlags([]string{"-resume", orig}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), c, &buf, hooks{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"the run is finished: 2 epochs done, step 40", "nothing to do", "-epochs N, N larger than 2"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("resuming a finished run prints\n%s\nwant it to say %q", buf.String(), s)
		}
	}
	foldertest.Kept(t, "resume of a finished run", orig, origTree)

	// (2) Another run's folder with planted files, and the step-30
	// checkpoint copied into it as step 90: the newest file by name, not by
	// the run.
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	_ = os.Mkdir(outside, 0o755)
	train(append(base, "-out", filepath.Join(root, "b"), "-seed", "2", "-epochs", "1", "-keep", "3")...)
	folder := runFolders(t, filepath.Join(root, "b"))[0]
	for _, name := range []string{"metrics.csv", "metrics.png"} {
		target := filepath.Join(outside, name)
		_ = os.WriteFile(target, []byte("the user's "+name), 0o644)
		os.Remove(filepath.Join(folder, name))
		if err := os.Symlink(target, filepath.Join(folder, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string]string{
		"step-000000001.safetensors": "not a checkpoint",
		"step-000000002.safetensors": "not one either",
		"step-000000003.safetensors": "",
		".draft.tmp-notes":           "notes",
	} {
		_ = os.WriteFile(filepath.Join(folder, name), []byte(b), 0o644)
	}
	copied := filepath.Join(folder, checkpoint.StepName(90))
	b30, _ := os.ReadFile(filepath.Join(orig, checkpoint.StepName(30)))
	_ = os.WriteFile(copied, b30, 0o644)
	planted := foldertest.Snapshot(t, root)

	elsewhere := t.TempDir()
	train("-resume", copied, "-out", elsewhere)
	foldertest.Kept(t, "resume of a copied checkpoint", root, planted)
	if len(runFolders(t, elsewhere)) != 1 {
		t.Errorf("no new run folder under -out %s", elsewhere)
	}

	// The folder's own run, resumed in place for another epoch: the
	// planted files stay, the link targets stay, the links are replaced.
	train("-resume", folder, "-epochs", "2")
	rel, _ := filepath.Rel(root, folder)
	kept := maps.Clone(planted)
	for _, name := range []string{checkpoint.ManifestName, checkpoint.BestName, "metrics.csv", "metrics.png", checkpoint.StepName(10)} {
		delete(kept, filepath.Join(rel, name)) // the run's own, to replace (or prune: -keep 3)
	}
	foldertest.Kept(t, "resume of the folder's own run", root, kept)
	for _, name := range []string{"metrics.csv", "metrics.png"} {
		if fi, err := os.Lstat(filepath.Join(folder, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not the run's regular file after it wrote it: %v", name, err)
		}
	}
	r, _ := checkpoint.ReadRun(folder)
	if got := r.Checkpoints(); !reflect.DeepEqual(got, []int{20, 30, 40}) {
		t.Errorf("the run in place holds checkpoints %v, want [20 30 40]", got)
	}
}
