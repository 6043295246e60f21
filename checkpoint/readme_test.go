package checkpoint_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/paramopt"
)

// readmeSnippet is docs/checkpoints.md's checkpoint block pasted into a
// function: it must compile as it stands there. TestReadmeSnippet checks
// that the lines between the markers are the block's (but its "// given:"
// line, which names the arguments), and runs them.
func readmeSnippet(params []param.Param, solver checkpoint.Solver, step int, path, dir string) error {
	// README begin
	f := checkpoint.New()
	if err := f.PutNodes("model.", param.Nodes(params)); err != nil { // parameter values by node name
		return err
	}
	if err := f.PutSolver("optim.", solver); err != nil { // momentum, Adam moments, RSDM sampler states
		return err
	}
	if err := f.SetJSON("step", step); err != nil {
		return err
	}
	if err := checkpoint.Write(path, f); err != nil { // atomic
		return err
	}
	// or, in a run folder that prunes and marks best only its own files:
	run, err := checkpoint.CreateRun(dir, nil) // dir must not exist yet; checkpoint.OpenRun(dir) goes on with a run
	if err != nil {
		return err
	}
	saved, err := run.Save(step, f)
	if err != nil {
		return err
	}
	if err := run.MarkBest(step); err != nil {
		return err
	}
	if err := run.Prune(3); err != nil { // keep the newest 3
		return err
	}

	loaded, err := checkpoint.Read(saved) // verified
	if err != nil {
		return err
	}
	if err := loaded.LoadNodes("model.", param.Nodes(params)); err != nil { // all or nothing
		return err
	}
	if err := loaded.LoadSolver("optim.", solver); err != nil {
		return err
	}
	// README end
	return nil
}

// TestReadmeSnippet checks that docs/checkpoints.md's checkpoint block is
// readmeSnippet's body, line for line (so it compiles pasted into a
// function), and that it runs: it saves, keeps a run folder and loads.
func TestReadmeSnippet(t *testing.T) {
	doc, err := os.ReadFile("../docs/checkpoints.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "runs this block as it stands here")
	if !ok {
		t.Fatal("docs/checkpoints.md: the checkpoint block's sentence is gone")
	}
	_, after, ok = strings.Cut(after, "```go\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("docs/checkpoints.md: no Go block after the sentence")
	}
	if given, rest, ok := strings.Cut(block, "\n"); ok && strings.HasPrefix(given, "// given:") {
		block = rest
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "\t// README begin\n")
	body, _, _ = strings.Cut(body, "\t// README end\n")
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	if got, want := strings.TrimSpace(block), strings.TrimSpace(strings.Join(lines, "\n")); got != want {
		t.Errorf("docs/checkpoints.md's block differs from readmeSnippet's body:\n--- docs/checkpoints.md\n%s\n--- readme_test.go\n%s", got, want)
	}

	m := build()
	s, err := paramopt.NewSolver(m.params, []optim.Group{{Select: optim.Param.Constrained, LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}}, {LR: 0.05}}, optim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.train(s, 3)
	tmp := t.TempDir()
	if err := readmeSnippet(m.params, s, 3, filepath.Join(tmp, "a.safetensors"), filepath.Join(tmp, "run")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "run", checkpoint.StepName(3))); err != nil {
		t.Errorf("the snippet's run folder: %v", err)
	}
}
