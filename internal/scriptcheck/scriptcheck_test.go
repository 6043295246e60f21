package scriptcheck

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// root is the repository's root, from this package's folder.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// need skips t where a command it runs is missing.
func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("no %s: %v", c, err)
		}
	}
}

// write writes text to root/rel, making its folders, with mode perm.
func write(t *testing.T, root, rel, text string, perm os.FileMode) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the repository's file rel to dst/rel.
func copyFile(t *testing.T, dst, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	write(t, dst, rel, string(b), fi.Mode().Perm())
}

// run runs name with args in dir, with env added to this process's
// environment, and returns its exit status and output.
func run(t *testing.T, dir string, env []string, name string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q did not end in 60 s:\n%s", name, args, b)
	case err == nil:
		return 0, string(b)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(b)
	}
	t.Fatalf("%s %q: %v", name, args, err)
	return 0, ""
}

// kept fails t unless each file of files (root-relative path to text) is
// there with its text.
func kept(t *testing.T, what, root string, files map[string]string) {
	t.Helper()
	for rel, text := range files {
		if b, err := os.ReadFile(filepath.Join(root, rel)); err != nil || string(b) != text {
			t.Errorf("%s: %s is %q (%v); want it as it was", what, rel, b, err)
		}
	}
}

// gone fails t unless each of rels is absent under root.
func gone(t *testing.T, what, root string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		if _, err := os.Lstat(filepath.Join(root, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %s is there (%v); want it removed", what, rel, err)
		}
	}
}

// TestMakeClean runs `make clean` in a copy of the Makefile whose out/
// holds runs' results and whose bin/ and build/ hold what the build made
// beside files of the user's: clean removes what the build made alone,
// leaves out/ and every file of the user's, and says so.
func TestMakeClean(t *testing.T) {
	need(t, "make", "bash")
	dir := t.TempDir()
	for _, rel := range []string{"Makefile", "scripts/onnxruntime/install.sh", "scripts/onnxruntime/package.json", "scripts/onnxruntime/package-lock.json"} {
		copyFile(t, dir, rel)
	}
	pkg, err := os.ReadFile(filepath.Join(dir, "scripts/onnxruntime/package.json"))
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]string{ // what the build made
		"bin/staticcheck":                       "lint's",
		"build/onnxruntime/package.json":        string(pkg),
		"build/onnxruntime/package-lock.json":   "{}",
		"build/onnxruntime/node_modules/x/a.js": "npm's",
		"build/gpu-smoke/gpu-check.tgz":         "smoke's pack",
		"build/gpu-smoke/build.txt":             "gpu_check pack",
	}
	mine := map[string]string{ // results of runs, and the user's files
		"out/bench-small/run-20260101-000000/bench.csv": "a bench run's",
		"out/dnn-figure/ffn/rsdm-seed1/train.log":       "an hour's run",
		"out/notes.txt":           "the user's",
		"bin/mytool":              "the user's tool",
		"build/gpu/gpu-check.tgz": "a pack",
		"build/gpu/mine.txt":      "the user's, beside a pack",
	}
	for rel, text := range made {
		write(t, dir, rel, text, 0o644)
	}
	for rel, text := range mine {
		write(t, dir, rel, text, 0o644)
	}
	code, text := run(t, dir, nil, "make", "--no-print-directory", "clean")
	if code != 0 {
		t.Fatalf("make clean: exit %d\n%s", code, text)
	}
	gone(t, "make clean", dir, "bin/staticcheck", "build/onnxruntime", "build/gpu-smoke")
	kept(t, "make clean", dir, mine)
	for _, want := range []string{"clean: out left as it is", "build/gpu holds mine.txt", "removed build/onnxruntime"} {
		if !strings.Contains(text, want) {
			t.Errorf("make clean does not say %q:\n%s", want, text)
		}
	}

	// An ONNX Runtime folder with a file of the user's in it stays whole;
	// with the user's files gone, clean leaves no empty bin/ or build/.
	write(t, dir, "build/onnxruntime/package.json", string(pkg), 0o644)
	write(t, dir, "build/onnxruntime/model.onnx", "the user's model", 0o644)
	if code, text = run(t, dir, nil, "make", "clean"); code != 0 || !strings.Contains(text, "build/onnxruntime holds model.onnx") {
		t.Errorf("make clean over the user's model: exit %d, want 0 and a line naming it:\n%s", code, text)
	}
	kept(t, "make clean", dir, map[string]string{"build/onnxruntime/model.onnx": "the user's model", "build/onnxruntime/package.json": string(pkg)})
	for _, rel := range []string{"bin/mytool", "build/gpu/mine.txt", "build/onnxruntime/model.onnx"} {
		if err := os.Remove(filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	if code, text = run(t, dir, nil, "make", "clean"); code != 0 {
		t.Fatalf("make clean: exit %d\n%s", code, text)
	}
	gone(t, "make clean of the build's alone", dir, "bin", "build")
	kept(t, "make clean", dir, map[string]string{"out/notes.txt": "the user's"})
}

// fakeNpm writes an npm that installs a stand-in onnxruntime-node into
// the folder it runs in, or fails where FAKE_NPM_FAIL is set.
func fakeNpm(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	write(t, bin, "npm", `#!/bin/sh
[ -z "$FAKE_NPM_FAIL" ] || { echo "npm: failed" >&2; exit 1; }
mkdir -p node_modules/onnxruntime-node && echo '{"name":"onnxruntime-node"}' >node_modules/onnxruntime-node/package.json
`, 0o755)
	return bin
}

// TestOnnxruntimeInstall runs make deps' install of ONNX Runtime
// (scripts/onnxruntime/install.sh, npm a stand-in) into a folder that
// holds a file of the user's (refused, the folder as it was), a new one
// (installed), the same again (found), an earlier install of another lock
// (replaced), and with npm failing (the earlier install stays); no
// temporary folder is left beside it.
func TestOnnxruntimeInstall(t *testing.T) {
	need(t, "bash")
	script := filepath.Join(root(t), "scripts", "onnxruntime", "install.sh")
	base := t.TempDir()
	dir := filepath.Join(base, "onnxruntime")
	env := []string{"PATH=" + fakeNpm(t) + string(os.PathListSeparator) + os.Getenv("PATH"), "FAKE_NPM_FAIL="}
	install := func(env ...string) (int, string) { return run(t, base, env, "bash", script, dir) }
	leftovers := func(what string) {
		t.Helper()
		ents, _ := os.ReadDir(base)
		if len(ents) != 1 || ents[0].Name() != "onnxruntime" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("%s: %s holds %q, want onnxruntime alone", what, base, names)
		}
	}

	mine := map[string]string{"onnxruntime/notes.txt": "the user's"}
	write(t, base, "onnxruntime/notes.txt", "the user's", 0o644)
	if code, text := install(env...); code != 1 || !strings.Contains(text, dir+" holds notes.txt") {
		t.Errorf("install over the user's folder: exit %d, want 1 and a refusal naming notes.txt:\n%s", code, text)
	}
	kept(t, "a refused install", base, mine)
	leftovers("a refused install")
	if err := os.Remove(filepath.Join(dir, "notes.txt")); err != nil { // the user moves it
		t.Fatal(err)
	}

	if code, text := install(env...); code != 0 || !strings.Contains(text, "installing ONNX Runtime") {
		t.Fatalf("install into an empty folder: exit %d\n%s", code, text)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json")); err != nil {
		t.Errorf("no onnxruntime-node installed: %v", err)
	}
	leftovers("an install")
	if code, text := install(env...); code != 0 || !strings.Contains(text, "ONNX Runtime found in") {
		t.Errorf("a second install: exit %d, want it found:\n%s", code, text)
	}

	// An earlier install of another lock is replaced; where npm fails, it
	// stays as it was.
	write(t, base, "onnxruntime/package-lock.json", `{"earlier": true}`, 0o644)
	earlier := map[string]string{"onnxruntime/package-lock.json": `{"earlier": true}`}
	if code, text := install(append(env, "FAKE_NPM_FAIL=1")...); code == 0 {
		t.Errorf("an install whose npm fails: exit 0\n%s", text)
	}
	kept(t, "a failed install", base, earlier)
	leftovers("a failed install")
	if code, text := install(env...); code != 0 || !strings.Contains(text, "installing ONNX Runtime") {
		t.Fatalf("an install over an earlier one: exit %d\n%s", code, text)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "package-lock.json")); strings.Contains(string(b), "earlier") {
		t.Errorf("the earlier install's lock is still there")
	}
	leftovers("a replacing install")
}

// TestThroughputProfileOut runs `throughput.sh cuda` (train and python
// stand-ins) with a PROFILE_OUT that holds a profile log of the user's
// (refused before any run, exit 2, the log as it was), then one that holds
// another file of the user's: the profile logs are written beside it.
func TestThroughputProfileOut(t *testing.T) {
	need(t, "bash")
	script := filepath.Join(root(t), "scripts", "throughput.sh")
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	write(t, bin, "train", `#!/bin/bash
echo "train $*" >>"`+calls+`"
while [[ $# -gt 0 ]]; do [[ $1 == -out ]] && out=$2; shift; done
mkdir -p "$out/run-1"
{ echo kind,epoch,step,seconds; for i in 1 2 3 4 5 6 7 8; do echo "train,1,$((i*10)),$i"; done; } >"$out/run-1/metrics.csv"
echo "device profile: stand-in"
`, 0o755)
	write(t, bin, "python", `#!/bin/sh
[ "$1" = -c ] && exit 0
echo "stand-in: 100.0 samples/s"
`, 0o755)
	env := []string{"TRAIN=" + filepath.Join(bin, "train"), "PYTHON=" + filepath.Join(bin, "python")}

	prof, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{"vit-cuda-profile.log": "the user's log"}
	write(t, prof, "vit-cuda-profile.log", "the user's log", 0o644)
	code, text := run(t, prof, append(env, "PROFILE_OUT=."), "bash", script, "cuda")
	if code != 2 || !strings.Contains(text, prof+"/vit-cuda-profile.log exists") {
		t.Errorf("PROFILE_OUT holding the user's log: exit %d, want 2 and a refusal naming it:\n%s", code, text)
	}
	kept(t, "a refused run", prof, mine)
	if _, err := os.Stat(calls); err == nil {
		t.Errorf("a refused run ran train")
	}

	prof = t.TempDir()
	mine = map[string]string{"notes.txt": "the user's notes"}
	write(t, prof, "notes.txt", "the user's notes", 0o644)
	code, text = run(t, root(t), append(env, "PROFILE_OUT="+prof), "bash", script, "cuda")
	if code != 0 {
		t.Fatalf("throughput.sh cuda: exit %d\n%s", code, text)
	}
	if !strings.Contains(text, "ffn-cuda-rsdm") || !strings.Contains(text, "samples/s") {
		t.Errorf("no throughput rows:\n%s", text)
	}
	kept(t, "a run", prof, mine)
	for _, f := range []string{"ffn-cuda-profile.log", "vit-cuda-profile.log"} {
		if b, err := os.ReadFile(filepath.Join(prof, f)); err != nil || !strings.Contains(string(b), "device profile: stand-in") {
			t.Errorf("%s: %q, %v; want the run's log", f, b, err)
		}
	}
	if ents, _ := os.ReadDir(prof); len(ents) != 3 {
		t.Errorf("PROFILE_OUT holds %d entries, want notes.txt and the two logs", len(ents))
	}
}
