package checkpoint_test

import (
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/checkpoint"
)

// TestLoadProgramAllOrNothing loads checkpoints that do not fit into a
// compiled program: a missing solver buffer leaves the nodes and the
// program's parameters as they were, a missing parameter the solver.
func TestLoadProgramAllOrNothing(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	m := compileModel(be)
	m.train(0, 3)
	f := checkpoint.New()
	if err := f.PutProgram("model.", "optim.", m.prog, m.solver); err != nil {
		t.Fatal(err)
	}
	weights := func(c *compiled) []float64 {
		var out []float64
		for _, n := range c.prog.ParamNodes() {
			h := make([]float64, n.Shape().TotalSize())
			if err := c.prog.Read(n, h); err != nil {
				t.Fatal(err)
			}
			out = append(out, h...)
			out = append(out, n.Value().Data().([]float64)...)
		}
		return out
	}
	without := func(name string) *checkpoint.File {
		g := checkpoint.New()
		for k, v := range f.Tensors {
			if k != name {
				g.Tensors[k] = v
			}
		}
		for k, v := range f.Meta {
			g.Meta[k] = v
		}
		return g
	}
	var buffer string
	for k := range f.Tensors {
		if strings.HasPrefix(k, "optim.") {
			buffer = k
		}
	}
	if buffer == "" {
		t.Fatal("the checkpoint holds no solver buffer")
	}

	r := compileModel(be)
	before := weights(r)
	if err := without(buffer).LoadProgram("model.", "optim.", r.prog, r.solver); err == nil || !strings.Contains(err.Error(), buffer) {
		t.Fatalf("LoadProgram without %s: %v, want an error naming it", buffer, err)
	}
	after := weights(r)
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("a failed LoadProgram changed the parameters (value %d: %v, was %v)", i, after[i], before[i])
		}
	}
	if err := without("model.v").LoadProgram("model.", "optim.", r.prog, r.solver); err == nil || !strings.Contains(err.Error(), "model.v") {
		t.Fatalf("LoadProgram without model.v: %v, want an error naming it", err)
	}
	if r.solver.Steps() != 0 {
		t.Errorf("a failed LoadProgram set the solver's steps to %d", r.solver.Steps())
	}
	if err := f.LoadProgram("model.", "optim.", r.prog, r.solver); err != nil {
		t.Fatal(err)
	}
	if r.solver.Steps() != 3 {
		t.Errorf("after LoadProgram the solver's steps are %d, want 3", r.solver.Steps())
	}
}
