//go:build cgo

package program

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// deviceConfigs names the solver configurations of solverConfigs that a
// device's steppers (optim/device) take.
var deviceConfigs = []string{"rsdm-p+sgd", "rsdm-blocks", "rgd-momentum+adam"}

// eachDeviceCase runs fn for every model, float type and device
// configuration, each in a subtest named for them.
func eachDeviceCase(t *testing.T, fn func(t *testing.T, mc modelCase, dt tensor.Dtype, cfg []optim.Group)) {
	cfgs := solverConfigs()
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			for _, name := range deviceConfigs {
				t.Run(fmt.Sprintf("%s/%v/%s", mc.name, dt, name), func(t *testing.T) { fn(t, mc, dt, cfgs[name]) })
			}
		}
	}
}

// compareBackends runs mc as a compiled program on ref (the CPU backend,
// itself checked against the tape machine) and on be, each with its
// Solver, for two steps from the same inputs and dropout masks, and checks
// that the loss, the logits, every gradient and every parameter after each
// step agree (float64 to 1e-10, float32 to 1e-5, relative).
func compareBackends(t *testing.T, ref, be backend.Backend, mc modelCase, dt tensor.Dtype, cfg []optim.Group) {
	type side struct {
		m    *model
		prog *Program
		s    *optim.Solver
		rng  *rand.Rand
	}
	var sides [2]side
	for i, b := range []backend.Backend{ref, be} {
		m, err := mc.build(dt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := G.Grad(m.loss, nodesOf(m.params)...); err != nil {
			t.Fatal(err)
		}
		prog, err := Compile(m.g, Config{Backend: b, Outputs: []*G.Node{m.logits, m.loss}, Params: m.params, Inputs: m.inputs})
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		t.Cleanup(func() { prog.Close() })
		s, err := NewSolver(prog, cfg, optim.Options{})
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		t.Cleanup(func() { s.Close() })
		sides[i] = side{m: m, prog: prog, s: s, rng: rand.New(rand.NewPCG(1, 2))}
	}
	tol := tolerance(dt)
	read := func(p *Program, n *G.Node) []float64 {
		var h any = make([]float64, numel(n.Shape()))
		if dt == tensor.Float32 {
			h = make([]float32, numel(n.Shape()))
		}
		if err := p.Read(n, h); err != nil {
			t.Fatal(err)
		}
		return floats(h)
	}
	grad := func(p *Program, i int) []float64 {
		pv := p.Params()[i]
		var h any = make([]float64, pv.Size)
		if dt == tensor.Float32 {
			h = make([]float32, pv.Size)
		}
		if err := p.Backend().CopyOut(h, pv.Grad.Buf, pv.Grad.Off); err != nil {
			t.Fatal(err)
		}
		return floats(h)
	}
	check := func(what string, a, b []float64) {
		t.Helper()
		if d := relDiff(a, b); !(d <= tol) {
			t.Errorf("%s: %s differs from %s's by %.3g (relative), tolerance %g, %s", what, be.Name(), ref.Name(), d, tol, worst(a, b))
		}
	}
	for step := range 2 {
		for _, s := range sides {
			if s.m.masks != nil {
				s.m.masks(s.rng)
			}
			for _, in := range s.m.inputs {
				if err := s.prog.SetInput(in, in.Value().Data()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.prog.Run(); err != nil {
				t.Fatal(err)
			}
		}
		r, g := sides[0], sides[1]
		check(fmt.Sprintf("step %d loss", step), read(g.prog, g.m.loss), read(r.prog, r.m.loss))
		check(fmt.Sprintf("step %d logits", step), read(g.prog, g.m.logits), read(r.prog, r.m.logits))
		for i, p := range r.prog.Params() {
			check(fmt.Sprintf("step %d gradient of %s", step, p.Node.Name()), grad(g.prog, i), grad(r.prog, i))
		}
		for _, s := range sides {
			if err := s.s.Step(); err != nil {
				t.Fatal(err)
			}
			if err := s.prog.StoreParams(); err != nil {
				t.Fatal(err)
			}
		}
		for i, n := range nodesOf(r.m.params) {
			check(fmt.Sprintf("step %d %s after the step", step, n.Name()), floats(nodesOf(g.m.params)[i].Value().Data()), floats(n.Value().Data()))
		}
	}
}
