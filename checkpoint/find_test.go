package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/internal/foldertest"
)

// saveRun creates a run in dir and saves the checkpoints of steps.
func saveRun(t *testing.T, dir string, steps ...int) *Run {
	t.Helper()
	r, err := CreateRun(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if _, err := r.Save(s, stepFile(s)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// damage cuts the checkpoint at path inside its header.
func damage(t *testing.T, path string) {
	t.Helper()
	if err := os.Truncate(path, 20); err != nil {
		t.Fatal(err)
	}
}

// TestCreateRunIn creates runs under one stem, the first name's folder
// already taken by a planted folder: each run gets a new folder (-2, -3),
// the planted one stays as it was, and CreateRunIn names its folder by the
// time.
func TestCreateRunIn(t *testing.T) {
	out := t.TempDir()
	planted := filepath.Join(out, "run-x")
	if err := os.MkdirAll(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(planted, "notes"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := foldertest.Snapshot(t, planted)
	var dirs []string
	for range 2 {
		r, err := createRunNamed(out, "run-x", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		if _, err := ReadRun(r.Dir()); err != nil {
			t.Errorf("%s: %v", r.Dir(), err)
		}
		dirs = append(dirs, r.Dir())
	}
	if want := []string{planted + "-2", planted + "-3"}; !reflect.DeepEqual(dirs, want) {
		t.Errorf("runs in %v, want %v", dirs, want)
	}
	foldertest.Same(t, "the planted folder", planted, before)

	r, err := CreateRunIn(filepath.Join(out, "new", "out"), &Origin{Path: "p", Step: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !regexp.MustCompile(`^run-\d{8}-\d{6}$`).MatchString(filepath.Base(r.Dir())) {
		t.Errorf("CreateRunIn made %s, want run-YYYYMMDD-HHMMSS", r.Dir())
	}
	if p := r.Parent(); p == nil || p.Step != 3 {
		t.Errorf("parent %+v, want step 3", p)
	}
}

// TestParseStepName reads back StepName's names and refuses other names.
func TestParseStepName(t *testing.T) {
	for _, step := range []int{0, 7, 123456789, 1234567890} {
		if got, ok := ParseStepName(StepName(step)); !ok || got != step {
			t.Errorf("%s: step %d, %v; want %d", StepName(step), got, ok, step)
		}
	}
	if got, ok := ParseStepName("step-12.safetensors"); !ok || got != 12 {
		t.Errorf("step-12.safetensors: %d, %v", got, ok)
	}
	for _, name := range []string{"best.safetensors", "step-.safetensors", "step--1.safetensors", "step-x.safetensors",
		"step-5.safetensors.tmp", ".step-5.safetensors.tmp-0123456789abcdef", "step-5"} {
		if got, ok := ParseStepName(name); ok {
			t.Errorf("%s: step %d, want no step", name, got)
		}
	}
}

// TestNewestIn finds the newest checkpoint of a run, of a damaged one (with
// why it does not load), of a run whose newest file is gone, and of a
// folder of an earlier version without a manifest (by the highest step of
// its regular files).
func TestNewestIn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := saveRun(t, dir, 1, 2, 3)
	defer r.Close()
	newest := func(want string, wantBad bool) {
		t.Helper()
		p, bad, err := NewestIn(dir)
		if err != nil || p != want || (bad != nil) != wantBad {
			t.Errorf("NewestIn: %q, bad %v, %v; want %q, bad %v", p, bad, err, want, wantBad)
		}
	}
	newest(filepath.Join(dir, StepName(3)), false)
	damage(t, filepath.Join(dir, StepName(3)))
	newest(filepath.Join(dir, StepName(3)), true)
	os.Remove(filepath.Join(dir, StepName(3)))
	newest(filepath.Join(dir, StepName(2)), false)

	legacy := t.TempDir()
	newest = func(want string, _ bool) {
		t.Helper()
		if p, bad, err := NewestIn(legacy); err != nil || p != want || bad != nil {
			t.Errorf("NewestIn of a folder without a manifest: %q, %v, %v; want %q", p, bad, err, want)
		}
	}
	newest("", false)
	for _, name := range []string{"step-5.safetensors", "step-000000012.safetensors", "notes"} {
		if err := os.WriteFile(filepath.Join(legacy, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(legacy, StepName(99)), 0o755); err != nil { // a folder, not a checkpoint
		t.Fatal(err)
	}
	newest(filepath.Join(legacy, "step-000000012.safetensors"), false)
	if _, _, err := NewestIn(filepath.Join(legacy, "missing")); err == nil {
		t.Error("NewestIn of a missing folder: no error")
	}
}

// TestLatestUnder picks, among the run folders under out, the one whose
// newest checkpoint was written last (not the last by name), passing over
// folders not named as runs and runs without checkpoints.
func TestLatestUnder(t *testing.T) {
	out := t.TempDir()
	if p, bad, err := LatestUnder(out); p != "" || bad != nil || err != nil {
		t.Errorf("an empty -out: %q, %v, %v", p, bad, err)
	}
	a := saveRun(t, filepath.Join(out, "run-a"), 1, 2)
	b := saveRun(t, filepath.Join(out, "run-b"), 5)
	c := saveRun(t, filepath.Join(out, "run-c")) // no checkpoint
	d := saveRun(t, filepath.Join(out, "other"), 9)
	for _, r := range []*Run{a, b, c, d} {
		r.Close()
	}
	now := time.Now()
	for dir, age := range map[string]time.Duration{"run-a": 0, "run-b": time.Hour, "other": -time.Hour} {
		p, _, err := NewestIn(filepath.Join(out, dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(out, "run-a", StepName(2))
	if p, bad, err := LatestUnder(out); p != want || bad != nil || err != nil {
		t.Errorf("LatestUnder: %q, %v, %v; want %q", p, bad, err, want)
	}
	damage(t, want)
	if err := os.Chtimes(want, now, now); err != nil {
		t.Fatal(err)
	}
	if p, bad, err := LatestUnder(out); p != want || bad == nil || err != nil {
		t.Errorf("LatestUnder with its newest damaged: %q, %v, %v; want %q and why it does not load", p, bad, err, want)
	}
	if _, _, err := LatestUnder(filepath.Join(out, "[")); !errors.Is(err, filepath.ErrBadPattern) {
		t.Errorf("LatestUnder of a malformed folder name: %v, want filepath.ErrBadPattern", err)
	}
}

// TestOthersThatLoad damages the newest checkpoint of a run that keeps two
// step checkpoints and a best.safetensors of an older step: the others
// that load are the older step checkpoint, then best; best.safetensors of
// a step still kept is not listed twice.
func TestOthersThatLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := saveRun(t, dir, 1, 2, 3)
	defer r.Close()
	if err := r.MarkBest(1); err != nil {
		t.Fatal(err)
	}
	if err := r.Prune(2); err != nil {
		t.Fatal(err)
	}
	step2, step3 := filepath.Join(dir, StepName(2)), filepath.Join(dir, StepName(3))
	damage(t, step3)
	best := Saved{filepath.Join(dir, BestName), 1}
	if got, want := OthersThatLoad(step3), []Saved{{step2, 2}, best}; !reflect.DeepEqual(got, want) {
		t.Errorf("others of the damaged newest: %v, want %v", got, want)
	}
	if got, want := OthersThatLoad(step2), []Saved{best}; !reflect.DeepEqual(got, want) {
		t.Errorf("others of step 2 (step 3 damaged): %v, want %v", got, want)
	}
	if err := r.MarkBest(2); err != nil {
		t.Fatal(err)
	}
	if got := OthersThatLoad(step3); !reflect.DeepEqual(got, []Saved{{step2, 2}}) {
		t.Errorf("with best at step 2: %v, want step 2 once", got)
	}
	if got := OthersThatLoad(filepath.Join(t.TempDir(), "x.safetensors")); got != nil {
		t.Errorf("a folder without a run: %v", got)
	}
}

// TestOpenRunOf resumes from each kind of checkpoint: the run's newest is
// opened for writing in its folder; an older one, one behind a damaged
// newest, a copy and a file of a folder without a manifest go elsewhere,
// for a reason that names what is wrong; a folder another Run holds is an
// error wrapping ErrLocked, and asNewest keeps a path found as the newest
// even when a newer one was saved since.
func TestOpenRunOf(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := saveRun(t, dir, 1, 2)
	r.Close()
	step1, step2 := filepath.Join(dir, StepName(1)), filepath.Join(dir, StepName(2))
	copied := filepath.Join(t.TempDir(), "copy.safetensors")
	b, _ := os.ReadFile(step2)
	if err := os.WriteFile(copied, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		step       int
		why        string
	}{
		{"older", step1, 1, "the newest checkpoint of its run is " + StepName(2)},
		{"copy", copied, 2, filepath.Dir(copied) + " holds no run manifest " + ManifestName},
	} {
		if r, why, err := OpenRunOf(tc.path, tc.step, false); r != nil || err != nil || why != tc.why {
			t.Errorf("%s: %v, %q, %v; want no run, for %q", tc.name, r, why, err, tc.why)
		}
	}
	held, why, err := OpenRunOf(step2, 2, false)
	if held == nil || why != "" || err != nil {
		t.Fatalf("the newest: %v, %q, %v; want its run, open", held, why, err)
	}
	if r, _, err := OpenRunOf(step2, 2, false); r != nil || !errors.Is(err, ErrLocked) {
		t.Errorf("the newest of a held folder: %v, %v; want ErrLocked", r, err)
	}
	if _, err := held.Save(3, stepFile(3)); err != nil { // the holder goes on
		t.Fatal(err)
	}
	if r, _, err := OpenRunOf(step2, 2, true); r != nil || !errors.Is(err, ErrLocked) {
		t.Errorf("step 2 found as the newest, the holder having saved step 3: %v, %v; want ErrLocked", r, err)
	}
	held.Close()
	if r, why, err := OpenRunOf(step2, 2, true); r != nil || err != nil || why != "the newest checkpoint of its run is now "+StepName(3) {
		t.Errorf("step 2 found as the newest, step 3 saved since: %v, %q, %v", r, why, err)
	}
	damage(t, filepath.Join(dir, StepName(3)))
	if r, why, err := OpenRunOf(step2, 2, false); r != nil || err != nil || !strings.HasPrefix(why, "the newest checkpoint of its run, "+StepName(3)+", does not load: ") {
		t.Errorf("step 2 behind a damaged step 3: %v, %q, %v", r, why, err)
	}
}
