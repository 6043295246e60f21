package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/foldertest"
)

func stepFile(step int) *File {
	f := New()
	f.Tensors["w"] = Tensor{Shape: []int{2}, Data: []float64{float64(step), -1}}
	f.Meta["note"] = "x"
	return f
}

// TestRunTouchesOnlyItsFiles plants files in a run's folder, under names a
// run uses (checkpoints that are not, a foreign checkpoint, hidden notes
// that look like temporary files, metrics and best as links to files
// outside, another run's leftover temporary file) and outside it, then
// saves, marks best, prunes and writes metrics: every planted file and
// every link target is byte-identical afterwards, the writes that would
// replace a planted file fail naming it, and only the run's own leftovers
// are cleaned up.
func TestRunTouchesOnlyItsFiles(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"metrics.csv", "metrics.png", "best.safetensors"} {
		if err := os.WriteFile(filepath.Join(outside, name), []byte("outside "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "run")
	r, err := CreateRun(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := CreateRun(filepath.Join(root, "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Save(4, stepFile(4))
	if err != nil {
		t.Fatal(err)
	}
	foreignBytes, _ := os.ReadFile(foreign)
	planted := map[string][]byte{
		"step-000000001.safetensors":                       []byte("not a checkpoint"),
		"step-000000002.safetensors":                       encode(t, stepFile(2)), // a checkpoint, of no run
		"step-000000003.safetensors":                       []byte{},
		"step-000000004.safetensors":                       foreignBytes, // another run's
		".draft.tmp-notes":                                 []byte("notes"),
		".step-000000001.safetensors.tmp-notes":            []byte("notes"),
		".step-000000001.safetensors.tmp-0123456789abcdef": []byte("another run's leftover"),
		".metrics.csv.tmp-0123456789ABCDEF":                []byte("upper case"),
		"notes.txt":                                        []byte("mine"),
	}
	for name, b := range planted {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"metrics.csv", "best.safetensors"} {
		if err := os.Symlink(filepath.Join(outside, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	before := foldertest.Snapshot(t, root)
	delete(before, filepath.Join("run", ManifestName))

	// The run's own leftovers: a killed write of a step it recorded, and of
	// its manifest.
	for _, s := range []int{10, 20, 30} {
		if _, err := r.Save(s, stepFile(s)); err != nil {
			t.Fatal(err)
		}
		if err := r.Prune(2); err != nil {
			t.Fatal(err)
		}
	}
	leftovers := []string{"." + StepName(30) + ".tmp-00000000deadbeef", "." + ManifestName + ".tmp-0123456789abcdef"}
	for _, name := range leftovers {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Save(40, stepFile(40)); err != nil {
		t.Fatal(err)
	}
	if err := r.Prune(2); err != nil {
		t.Fatal(err)
	}
	for _, name := range leftovers {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("leftover %s of the run's own write is still there: %v", name, err)
		}
	}

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"step-000000004.safetensors", func() error { _, err := r.Save(4, stepFile(4)); return err }()},
		{"step-000000001.safetensors", func() error { _, err := r.Save(1, stepFile(1)); return err }()},
		{"best.safetensors", r.MarkBest(40)},
		{"metrics.csv", r.WriteFile("metrics.csv", func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err })},
		{"notes.txt", r.WriteFile("notes.txt", func(w io.Writer) error { return nil })},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), filepath.Join(dir, tc.name)) || !strings.Contains(tc.err.Error(), "refusing to replace") {
			t.Errorf("replacing the planted %s: error %v, want a refusal naming it", tc.name, tc.err)
		}
	}
	// metrics.png was not planted in the folder: it is written there.
	if err := r.WriteFile("metrics.png", func(w io.Writer) error { _, err := io.WriteString(w, "png"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := r.Prune(1); err != nil {
		t.Fatal(err)
	}
	foldertest.Kept(t, "the planted files", root, before)
	if got := r.Checkpoints(); !reflect.DeepEqual(got, []int{40}) {
		t.Errorf("checkpoints %v, want [40]", got)
	}
	if p, s, ok := r.Latest(); !ok || s != 40 || p != filepath.Join(dir, StepName(40)) {
		t.Errorf("latest %s %d %v", p, s, ok)
	}
}

// TestRunReplacesLinks checks that a file of the run that was replaced by a
// symbolic link is replaced in turn, link and all, and the link's target
// stays byte-identical; and that a checkpoint turned into a link is not
// the run's any more.
func TestRunReplacesLinks(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "target")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "run")
	r, err := CreateRun(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := r.WriteFile("metrics.csv", write("one")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "metrics.csv")
	os.Remove(path)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("metrics.csv", write("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("the link's target holds %q", b)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("metrics.csv is not a regular file after the write: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("metrics.csv holds %q", b)
	}

	// Write, the library's plain atomic write, replaces a link too.
	link := filepath.Join(root, "link.safetensors")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, stepFile(1)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("Write wrote through a link: the target holds %q", b)
	}

	// A checkpoint of the run replaced by a link to a copy of itself is not
	// the run's: Latest passes over it, Save and Prune leave it.
	p10, _ := r.Save(10, stepFile(10))
	p20, _ := r.Save(20, stepFile(20))
	cp := filepath.Join(root, "copy")
	b, _ := os.ReadFile(p20)
	_ = os.WriteFile(cp, b, 0o644)
	os.Remove(p20)
	if err := os.Symlink(cp, p20); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := r.Latest(); p != p10 {
		t.Errorf("latest %s, want %s", p, p10)
	}
	if _, err := r.Save(20, stepFile(20)); err == nil {
		t.Error("Save replaced a link it did not make")
	}
	if err := r.Prune(0); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p20); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Prune removed the link: %v", err)
	}
	if b2, _ := os.ReadFile(cp); !bytes.Equal(b, b2) {
		t.Error("the link's target changed")
	}
}

// TestRunCrash checks the states a killed process leaves: a checkpoint
// listed in the manifest but never written, a checkpoint replaced by
// another run's file under its name. Latest takes the newest that is the
// run's, and reopening the folder gives the same answers.
func TestRunCrash(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run")
	r, err := CreateRun(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{1, 2, 3, 4} {
		if _, err := r.Save(s, stepFile(s)); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(dir, StepName(4))) // listed, never renamed into place
	other, _ := CreateRun(filepath.Join(root, "other"), nil)
	p3, _ := other.Save(3, stepFile(3))
	b3, _ := os.ReadFile(p3)
	_ = os.WriteFile(filepath.Join(dir, StepName(3)), b3, 0o644) // a copy over step 3
	for _, run := range []*Run{r, must(ReadRun(dir))} {
		if p, s, ok := run.Latest(); !ok || s != 2 || p != filepath.Join(dir, StepName(2)) {
			t.Errorf("latest %s %d %v, want step 2", p, s, ok)
		}
	}
	if err := r.Prune(5); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, StepName(3))); !bytes.Equal(b, b3) {
		t.Error("prune changed the copied file")
	}
	if got := must(ReadRun(dir)).Checkpoints(); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("after prune the manifest lists %v, want [1 2]", got)
	}
	if _, err := r.Save(4, stepFile(4)); err != nil {
		t.Errorf("saving the step whose write was killed: %v", err)
	}
	if _, s, _ := r.Latest(); s != 4 {
		t.Errorf("latest %d after saving 4", s)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestOpenRunErrors(t *testing.T) {
	root := t.TempDir()
	r, err := CreateRun(filepath.Join(root, "run"), &Origin{Path: "rel/step.safetensors", Step: 7, Run: "0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	back := must(ReadRun(r.Dir()))
	if p := back.Parent(); p == nil || !filepath.IsAbs(p.Path) || p.Step != 7 || p.Run != "0123456789abcdef" || back.ID() != r.ID() {
		t.Errorf("reopened run: parent %+v, id %s (want %s)", p, back.ID(), r.ID())
	}
	if _, err := CreateRun(r.Dir(), nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("creating a run in an existing folder: %v", err)
	}
	good, _ := os.ReadFile(filepath.Join(r.Dir(), ManifestName))
	for _, tc := range []struct {
		name  string
		setup func(dir string)
		want  string
	}{
		{"none", func(string) {}, "has no run.json"},
		{"garbage", func(d string) { _ = os.WriteFile(filepath.Join(d, ManifestName), []byte("{"), 0o644) }, "is not an orthonet.run manifest"},
		{"link", func(d string) { _ = os.Symlink(filepath.Join(r.Dir(), ManifestName), filepath.Join(d, ManifestName)) }, "not a regular file"},
		{"bad id", func(d string) {
			_ = os.WriteFile(filepath.Join(d, ManifestName), bytes.Replace(good, []byte(r.ID()), []byte("../../etc/passwd"), 1), 0o644)
		}, "malformed id"},
		{"bad file", func(d string) {
			_ = os.WriteFile(filepath.Join(d, ManifestName), bytes.Replace(good, []byte(`"checkpoints"`), []byte(`"files": ["../x"], "checkpoints"`), 1), 0o644)
		}, `lists the file "../x"`},
	} {
		d := filepath.Join(root, tc.name)
		_ = os.Mkdir(d, 0o755)
		tc.setup(d)
		if _, err := OpenRun(d); !errors.Is(err, ErrNotRun) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrNotRun saying %q", tc.name, err, tc.want)
		}
	}
	for _, name := range []string{"", ".hidden", "a/b", ManifestName, BestName, LockName, StepName(3), "step-x.safetensors"} {
		if err := r.WriteFile(name, func(io.Writer) error { return nil }); err == nil {
			t.Errorf("WriteFile(%q) succeeded", name)
		}
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".a.safetensors.tmp-0123456789abcdef":  true,
		".metrics.csv.tmp-00000000deadbeef":    true,
		".draft.tmp-notes":                     false,
		".a.tmp-0123456789ABCDEF":              false,
		".a.tmp-0123456789abcde":               false,
		".a.tmp-0123456789abcdef0":             false,
		"a.tmp-0123456789abcdef":               false,
		"..tmp-0123456789abcdef":               false,
		".a.safetensors.tmp-123456789":         false, // what os.CreateTemp made
		tempName("step-000000001.safetensors"): true,
	} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
	if b, ok := tempBase(tempName("x.csv")); !ok || b != "x.csv" {
		t.Errorf("tempBase of tempName(x.csv) = %q, %v", b, ok)
	}
}

// TestReadChecksSizeFirst gives Read files whose header declares far more
// data than the file holds, or far less: it must fail naming the fault
// without reading the file whole (a 2 GiB sparse file costs no memory).
func TestReadChecksSizeFirst(t *testing.T) {
	dir := t.TempDir()
	header := func(shape string, end int) []byte {
		h := []byte(`{"__metadata__":{"format":"orthonet.checkpoint","format_version":"1","checksum":"sha256:` + strings.Repeat("0", 64) +
			`"},"w":{"dtype":"F64","shape":[` + shape + `],"data_offsets":[0,` + strconv.Itoa(end) + `]}}`)
		for len(h)%8 != 0 {
			h = append(h, ' ')
		}
		return append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	}
	big := filepath.Join(dir, "big.safetensors")
	_ = os.WriteFile(big, append(header("1", 8), make([]byte, 8)...), 0o644)
	if err := os.Truncate(big, 2<<30); err != nil {
		t.Skip("no sparse files here:", err)
	}
	claims := filepath.Join(dir, "claims.safetensors")
	_ = os.WriteFile(claims, append(header("268435456", 8<<28), make([]byte, 64)...), 0o644)
	for _, tc := range []struct{ path, want string }{
		{big, "bytes of data after the last tensor"},
		{claims, "larger than the file"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Read(tc.path)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %v, want ErrCorrupt naming the file and %q", tc.path, err, tc.want)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: Read allocated %d bytes before failing", tc.path, n)
		}
	}
	// A valid file reads back through the streaming path, as Decode reads it.
	good := filepath.Join(dir, "good.safetensors")
	if err := Write(good, sample()); err != nil {
		t.Fatal(err)
	}
	f, err := Read(good)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := Decode(encode(t, sample()))
	if !reflect.DeepEqual(f, g) {
		t.Error("Read and Decode disagree")
	}
}

// TestCreateRunNeedsNewFolder creates a run in a folder that exists, empty:
// the error says that a run needs a new folder, names the way to go on
// with an existing run, and wraps fs.ErrExist.
func TestCreateRunNeedsNewFolder(t *testing.T) {
	dir := t.TempDir()
	_, err := CreateRun(dir, nil)
	if err == nil || !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "a new run needs a new folder") || !strings.Contains(err.Error(), "OpenRun") {
		t.Fatalf("CreateRun on an existing folder: %v", err)
	}
}

// TestRunDiscard discards a run that saved nothing (its folder goes), and
// refuses to discard one that saved a checkpoint or whose folder holds a
// file of someone else's.
func TestRunDiscard(t *testing.T) {
	root := t.TempDir()
	r, err := CreateRun(filepath.Join(root, "a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the discarded run's folder: %v, want it gone", err)
	}

	r, err = CreateRun(filepath.Join(root, "b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	f.Tensors["w"] = Tensor{Shape: []int{1}, Data: []float64{1}}
	if _, err := r.Save(1, f); err != nil {
		t.Fatal(err)
	}
	if err := r.Discard(); err == nil {
		t.Error("Discard of a run with a checkpoint succeeded")
	}
	if _, _, ok := r.Latest(); !ok {
		t.Error("a refused Discard removed the run's checkpoint")
	}

	r, err = CreateRun(filepath.Join(root, "c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(root, "c", "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Discard(); err == nil {
		t.Error("Discard of a folder holding a user's file succeeded")
	}
	if _, err := ReadRun(filepath.Join(root, "c")); err != nil {
		t.Errorf("a refused Discard broke the run: %v", err)
	}
}
