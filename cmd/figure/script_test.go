package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/internal/foldertest"
)

// script runs `bash scripts/dnn_figure.sh args...` from the folder dir
// ("": this one) with the environment env, bounded by limit, and returns
// its exit status and output. It skips t where there is no bash.
func script(t *testing.T, dir string, env []string, limit time.Duration, args ...string) (int, string) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "scripts", "dnn_figure.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash:", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the script did not end in %v:\n%s", limit, b)
	case err == nil:
		return 0, string(b)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(b)
	}
	t.Fatalf("the script: %v\n%s", err, b)
	return 0, ""
}

// figureEnv is the environment in which the script's figure is this test
// binary (TestMain).
func figureEnv() []string { return []string{"FIGURE=" + os.Args[0], "ORTHONET_FIGURE_MAIN=1"} }

// pageScript runs `bash scripts/dnn_figure.sh page OUT DOCS` from the
// folder caller, with this test binary as its figure, and returns its exit
// status and output.
func pageScript(t *testing.T, caller, out, docs string) (int, string) {
	t.Helper()
	return script(t, caller, append(os.Environ(), figureEnv()...), 120*time.Second, "page", out, docs)
}

// seedRun writes a finished run of the script: OUT/ffn/NAME holding done,
// command.txt, machine.txt, train.log and a run folder with metrics.csv.
func seedRun(t *testing.T, out, name string, accs []float64) {
	t.Helper()
	writeRun(t, filepath.Join(out, "ffn"), name, []float64{1, 2, 3}, accs)
	for file, text := range map[string]string{
		"done": "", "command.txt": "out/train -seed 1 -eval-interval 1s\n", "machine.txt": "cpu test\ncores 2\n",
		"train.log": "train: device cpu (test)\n", "load.txt": "cores 2\nbefore 0 0 0\nafter 0 0 0\nflag none\n",
	} {
		writeFile(t, filepath.Join(out, "ffn"), name, file, text)
	}
}

// TestPageScript publishes a page with scripts/dnn_figure.sh page from a
// caller's folder other than the repository's, with a relative OUT and
// DOCS: they are taken from the caller's folder, and an earlier page's
// PNG that the new page lacks goes once the page is in place, while a PNG
// no earlier page showed (the user's) stays. An OUT that
// does not exist, one without finished runs, and one whose runs make
// figure fail are each refused with a non-zero exit: the published page
// stays byte for byte as it was, the missing OUT is not created, and no
// temporary folder is left beside it.
func TestPageScript(t *testing.T) {
	caller := t.TempDir()
	out := filepath.Join(caller, "runs")
	seedRun(t, out, "rsdm-seed1", []float64{0.5, 0.6, 0.7})
	seedRun(t, out, "rgd-seed1", []float64{0.4, 0.5, 0.6})
	docs := filepath.Join(caller, "docs")
	writeFile(t, caller, "docs", "vit.png", "an earlier page's")
	writeFile(t, caller, "docs", "README.md", "an earlier page: ![](vit.png)\n")
	writeFile(t, caller, "docs", "mine.png", "the user's, on no page")

	code, text := pageScript(t, caller, "runs", "docs")
	if code != 0 {
		t.Fatalf("page: exit %d\n%s", code, text)
	}
	for _, f := range []string{"README.md", "ffn.png", "ffn-steps.png"} {
		if _, err := os.Stat(filepath.Join(docs, f)); err != nil {
			t.Errorf("the page lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(docs, "vit.png")); !os.IsNotExist(err) {
		t.Errorf("the earlier page's vit.png: %v, want it gone", err)
	}
	if b, err := os.ReadFile(filepath.Join(docs, "mine.png")); err != nil || string(b) != "the user's, on no page" {
		t.Errorf("a PNG of the user's that no earlier page showed: %q, %v; want it kept", b, err)
	}
	readme, _ := os.ReadFile(filepath.Join(docs, "README.md"))
	if !strings.Contains(string(readme), "from the runs in\n`"+out+"`") || !strings.Contains(string(readme), "- FFN: RSDM-P reaches") {
		t.Errorf("the page does not name %s's runs and their verdict:\n%s", out, readme)
	}

	published := foldertest.Snapshot(t, docs)
	if err := os.Mkdir(filepath.Join(caller, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(caller, "bad")
	seedRun(t, bad, "rsdm-seed1", []float64{0.5, 0.6, 0.7})
	seedRun(t, bad, "rgd-seed1", []float64{0.4, 0.5, 0.6})
	writeFile(t, filepath.Join(bad, "ffn"), filepath.Join("rgd-seed1", "run-1"), "metrics.csv",
		"kind,epoch,step,seconds,loss,accuracy,max_feasibility,test_examples,skipped,train_seconds\ntest,1,10,1,1,7,,1000,,1\n")
	for _, tc := range []struct{ out, want string }{
		{"missing", "is not a folder"},
		{"empty", "holds no finished runs"},
		{"bad", `accuracy "7"`},
	} {
		code, text := pageScript(t, caller, tc.out, "docs")
		if code == 0 || !strings.Contains(text, tc.want) {
			t.Errorf("page %s: exit %d, want a failure saying %q:\n%s", tc.out, code, tc.want, text)
		}
		foldertest.Same(t, "page "+tc.out, docs, published)
		if tc.out == "missing" {
			if _, err := os.Stat(filepath.Join(caller, "missing")); !os.IsNotExist(err) {
				t.Errorf("page missing created it: %v", err)
			}
		}
		ents, _ := os.ReadDir(caller)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("page %s left %s behind", tc.out, e.Name())
			}
		}
	}
	if _, err := os.Stat(filepath.Join("..", "..", "runs")); err == nil {
		t.Errorf("a relative OUT was taken from the repository root")
	}
}

// TestRunScriptKeepsUsersFolders runs `dnn_figure.sh ffn OUT` where OUT
// holds a folder of the user's at a run's place (train is /bin/true, never
// reached): the script refuses it, naming it, and the user's file stays.
func TestRunScriptKeepsUsersFolders(t *testing.T) {
	out := t.TempDir()
	mine := filepath.Join(out, "ffn", "rsdm-seed1", "mine.txt")
	writeFile(t, out, filepath.Join("ffn", "rsdm-seed1"), "mine.txt", "keep")
	code, text := script(t, "", append(os.Environ(), "TRAIN=/bin/true"), 60*time.Second, "ffn", out, "0.1", "0.1")
	if code == 0 || !strings.Contains(text, "is not a run folder of dnn_figure.sh") {
		t.Errorf("a folder of the user's where a run goes: exit %d, output:\n%s", code, text)
	}
	if got, err := os.ReadFile(mine); err != nil || string(got) != "keep" {
		t.Errorf("the user's file: %q, %v; want it kept", got, err)
	}
}

// TestGridScriptKeepsUsersFiles runs `dnn_figure.sh grid OUT` over two
// finished grid runs (kept, so train, /bin/true, is never reached; this
// test binary is its figure): a machine.txt or a grid.md of the user's in
// OUT stops it with the file as it was; without them it writes grid.md and
// choice.txt beside the user's other file, and a second grid replaces its
// own, leaving no temporary folder.
func TestGridScriptKeepsUsersFiles(t *testing.T) {
	out, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(out, "grid")
	ffn := "-model ffn -hidden 1024 -depth 5 -batch 16 -lr-other 0.1 -momentum 0 -rgd-momentum 0"
	for _, m := range []struct{ name, args string }{{"rsdm", "-optim rsdm -r 300"}, {"rgd", "-optim rgd"}} {
		name := m.name + "-lr0.1"
		writeRun(t, g, name, []float64{10, 20}, map[string][]float64{"rsdm": {0.5, 0.7}, "rgd": {0.4, 0.6}}[m.name])
		command := fmt.Sprintf("/bin/true -device auto -dataset fashion-mnist -schedule const -eval-every -1 -save-every 0 -keep 1 -epochs 1000 -out %s %s %s -lr 0.1 -seed 1 -time-limit 20s -eval-interval 20s",
			filepath.Join(g, name), ffn, m.args)
		for file, text := range map[string]string{"done": "", "command.txt": command + "\n", "load.txt": "cores 2\nflag none\n"} {
			writeFile(t, g, name, file, text)
		}
	}
	writeFile(t, g, "", "notes.txt", "the user's notes")
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "REDO", "EXTRA", "DATA", "DEVICE", "GRID_TIME", "GRID_LRS", "MOMENTUM":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, append([]string{"TRAIN=/bin/true", "GRID_LRS=0.1"}, figureEnv()...)...)
	grid := func() (int, string) {
		t.Helper()
		return script(t, "", env, 120*time.Second, "grid", out)
	}
	for _, f := range []string{filepath.Join(out, "machine.txt"), filepath.Join(g, "grid.md")} {
		if err := os.WriteFile(f, []byte("the user's\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, text := grid()
		if code == 0 || !strings.Contains(text, f+" exists and was not written by dnn_figure.sh") {
			t.Errorf("grid with the user's %s: exit %d, want a refusal naming it:\n%s", f, code, text)
		}
		if b, err := os.ReadFile(f); err != nil || string(b) != "the user's\n" {
			t.Errorf("the user's %s: %q, %v; want it as it was", f, b, err)
		}
		if err := os.Remove(f); err != nil { // the user moves it
			t.Fatal(err)
		}
	}
	for i := range 2 {
		code, text := grid()
		if code != 0 {
			t.Fatalf("grid %d: exit %d\n%s", i+1, code, text)
		}
		if b, err := os.ReadFile(filepath.Join(g, "choice.txt")); err != nil || string(b) != "best RSDM-P 0.1\nbest RGD 0.1\n" {
			t.Errorf("grid %d: choice.txt %q, %v", i+1, b, err)
		}
		readPage(t, filepath.Join(g, "grid.md"), "# FFN step-size grid", "| RSDM-P | 0.1 | **70.00** |")
		if b, err := os.ReadFile(filepath.Join(g, "notes.txt")); err != nil || string(b) != "the user's notes" {
			t.Errorf("grid %d: the user's notes.txt: %q, %v", i+1, b, err)
		}
		ents, _ := os.ReadDir(g)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("grid %d left %s", i+1, e.Name())
			}
		}
	}
}
