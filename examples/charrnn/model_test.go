package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/runtest"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
	"github.com/orthonet/orthonet/training"
)

// build builds the model on a graph of its own with gradients, its weights
// drawn from seed: the same seed gives the same weights.
func build(t testing.TB, cfg modelConfig, seed uint64) (*G.ExprGraph, *charModel) {
	t.Helper()
	g := G.NewGraph()
	m, err := buildModel(g, cfg, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
		t.Fatal(err)
	}
	return g, m
}

// compile compiles m for the CPU backend, closed when t ends.
func compile(t testing.TB, g *G.ExprGraph, m *charModel) *program.Program {
	t.Helper()
	be := cpu.New(cpu.Options{})
	p, err := program.Compile(g, program.Config{Backend: be, Outputs: []*G.Node{m.loss, m.logits},
		Params: m.params, Inputs: m.inputs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); be.Close() })
	return p
}

// batch returns the examples idx of s, one after another.
func batch(t testing.TB, s *textSet, idx []int) []float32 {
	t.Helper()
	n := s.Shape()[0]
	x := make([]float32, len(idx)*n)
	for k, i := range idx {
		if _, err := s.Example(i, x[k*n:(k+1)*n]); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// letTensor is feed's set for a tape machine: gorgonia.Let of a tensor of
// the node's shape over data.
func letTensor(n *G.Node, data any) error {
	return G.Let(n, tensor.New(tensor.WithShape(n.Shape()...), tensor.WithBacking(data)))
}

// TestTapeAgreement runs one batch through the compiled program and through
// Gorgonia's tape machine, the model built alike for each, and compares the
// loss, the logits and every parameter's gradient.
func TestTapeAgreement(t *testing.T) {
	set, err := newTextSet(corpus, 12)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dt  tensor.Dtype
		tol float64
	}{{tensor.Float64, 1e-10}, {tensor.Float32, 1e-4}} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			cfg := modelConfig{Vocab: set.NumClasses(), Embedding: 10, Hidden: 16, SeqLen: 12, Batch: 5, Dtype: tc.dt}
			gp, mp := build(t, cfg, 7)
			gt, mt := build(t, cfg, 7)
			prog := compile(t, gp, mp)
			vm := G.NewTapeMachine(gt, G.BindDualValues(param.Nodes(mt.params)...))
			defer vm.Close()

			seqs := batch(t, set, []int{0, 3, 40, 41, 200})
			if err := mp.feed(seqs, prog.SetInput); err != nil {
				t.Fatal(err)
			}
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
			if err := mt.feed(seqs, letTensor); err != nil {
				t.Fatal(err)
			}
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}

			var worst float64
			for _, o := range []struct {
				name     string
				prog, tp *G.Node
			}{{"loss", mp.loss, mt.loss}, {"logits", mp.logits, mt.logits}} {
				got := testval.Host(tc.dt, o.prog.Shape().TotalSize())
				if err := prog.Read(o.prog, got); err != nil {
					t.Fatal(err)
				}
				d := testval.MaxRel(testval.Floats(got), testval.Floats(o.tp.Value().Data()))
				if !(d < tc.tol) {
					t.Errorf("%s: relative difference %.3g, want < %g", o.name, d, tc.tol)
				}
				worst = max(worst, d)
			}
			for i, pv := range prog.Params() {
				got := testval.Host(tc.dt, pv.Size)
				if err := prog.Backend().CopyOut(got, pv.Grad.Buf, pv.Grad.Off); err != nil {
					t.Fatal(err)
				}
				want, err := mt.params[i].Node.Grad()
				if err != nil {
					t.Fatal(err)
				}
				w := testval.Floats(want.Data())
				d := testval.MaxRel(testval.Floats(got), w)
				if !(d < tc.tol) {
					t.Errorf("gradient of %s: relative difference %.3g, want < %g (%s)", pv.Node.Name(), d, tc.tol, testval.Worst(testval.Floats(got), w))
				}
				worst = max(worst, d)
			}
			t.Logf("%d parameters: largest relative difference %.3g (loss, logits, gradients)", len(mp.params), worst)
		})
	}
}

// TestTrain trains the compiled model for 30 steps on random batches of the
// corpus, RSDM (r = hidden/2) on the Stiefel weight and Adam on the rest,
// and checks that the loss of a fixed batch falls and that the weight
// stays orthogonal.
func TestTrain(t *testing.T) {
	const T, B, H, steps = 16, 8, 32, 30
	set, err := newTextSet(corpus, T)
	if err != nil {
		t.Fatal(err)
	}
	cfg := modelConfig{Vocab: set.NumClasses(), Hidden: H, SeqLen: T, Batch: B}
	g, m := build(t, cfg, 1)
	prog := compile(t, g, m)
	solver, err := program.NewSolver(prog, (&training.Flags{R: H / 2, LR: 0.2, LROther: 1e-2, Seed: 1}).Groups(), optim.Options{})
	if err != nil {
		t.Fatal(err)
	}

	fixed := batch(t, set, []int{0, 20, 40, 60, 80, 100, 120, 140})
	lossOf := func(seqs []float32) float64 {
		if err := m.feed(seqs, prog.SetInput); err != nil {
			t.Fatal(err)
		}
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, 1)
		if err := prog.Read(m.loss, l); err != nil {
			t.Fatal(err)
		}
		return float64(l[0])
	}
	w0 := slices.Clone(m.stiefel.Node.Value().Data().([]float32))
	before := lossOf(fixed)
	rng := rand.New(rand.NewPCG(3, 4))
	idx := make([]int, B)
	for range steps {
		for k := range idx {
			idx[k] = rng.IntN(set.Len())
		}
		lossOf(batch(t, set, idx))
		if err := solver.Step(); err != nil {
			t.Fatal(err)
		}
	}
	after := lossOf(fixed)
	t.Logf("loss of a fixed batch: %.4f before (log %d = %.4f), %.4f after %d steps", before, cfg.Vocab, math.Log(float64(cfg.Vocab)), after, steps)
	if !(after < 0.85*before) {
		t.Errorf("loss %.4f after %d steps, want below 85%% of %.4f", after, steps, before)
	}

	runtest.Stepped(t, prog, m.stiefel, w0, steps)
}

// TestFeed checks the one-hot layout: row t*B+b of x is character t of
// sequence b, of y character t+1; bad indices are refused.
func TestFeed(t *testing.T) {
	const V, T, B = 5, 3, 2
	m, err := buildModel(G.NewGraph(), modelConfig{Vocab: V, Hidden: 4, SeqLen: T, Batch: B}, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	seqs := []float32{0, 1, 2, 3, 4, 3, 2, 1}
	got := map[*G.Node][]float32{}
	if err := m.feed(seqs, func(n *G.Node, data any) error {
		got[n] = data.([]float32)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node  *G.Node
		shift int
	}{{m.x, 0}, {m.y, 1}} {
		for s := range T {
			for b := range B {
				row := got[c.node][(s*B+b)*V : (s*B+b+1)*V]
				want := int(seqs[b*(T+1)+s+c.shift])
				for k, v := range row {
					if (k == want) != (v == 1) || (v != 0 && v != 1) {
						t.Fatalf("%s row %d (step %d, sequence %d) = %v, want one-hot %d", c.node.Name(), s*B+b, s, b, row, want)
					}
				}
			}
		}
	}
	for _, bad := range [][]float32{seqs[:7], {0, 1, 2, 5, 4, 3, 2, 1}, {0, 1, 2, 3, 4, -1, 2, 1}, {0, 1.5, 2, 3, 4, 3, 2, 1}} {
		if err := m.feed(bad, func(*G.Node, any) error { return nil }); err == nil {
			t.Errorf("feed(%v) took it", bad)
		}
	}
}

// TestTextSet checks that the examples are the text's consecutive windows,
// overlapping by one character, and that the set refuses what it cannot
// hold.
func TestTextSet(t *testing.T) {
	const text = "abcabcabd\n"
	s, err := newTextSet(text, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 || s.NumClasses() != 5 || len(s.Shape()) != 1 || s.Shape()[0] != 4 {
		t.Fatalf("Len %d, NumClasses %d, Shape %v; want 3, 5, [4]", s.Len(), s.NumClasses(), s.Shape())
	}
	var windows []string
	x := make([]float32, 4)
	for i := range s.Len() {
		label, err := s.Example(i, x)
		if err != nil || label != 0 {
			t.Fatalf("Example(%d) = %d, %v", i, label, err)
		}
		ids := make([]int, len(x))
		for j, v := range x {
			ids[j] = int(v)
		}
		windows = append(windows, s.vocab.decode(ids))
	}
	if got, want := strings.Join(windows, "|"), "abca|abca|abd\n"; got != want {
		t.Errorf("windows %q, want %q", got, want)
	}
	if _, err := s.Example(3, x); err == nil {
		t.Error("Example(3) of 3 took it")
	}
	if _, err := s.Example(0, x[:3]); err == nil {
		t.Error("Example into 3 values took it")
	}
	if _, err := newTextSet("abc", 3); err == nil {
		t.Error("a text of 3 characters gave sequences of 4")
	}
	if _, err := newVocabulary("ab").encode("abc"); err == nil {
		t.Error("encode took a character outside the vocabulary")
	}
}

// BenchmarkStep times one training step (feed, forward and backward, RSDM
// and Adam) of Gorgonia's sizes (embedding 10, hidden 100) on batches of 16
// sequences of 32 steps.
func BenchmarkStep(b *testing.B) {
	const T, B = 32, 16
	set, err := newTextSet(corpus, T)
	if err != nil {
		b.Fatal(err)
	}
	cfg := modelConfig{Vocab: set.NumClasses(), SeqLen: T, Batch: B}
	g, m := build(b, cfg, 1)
	prog := compile(b, g, m)
	solver, err := program.NewSolver(prog, (&training.Flags{R: 50, LR: 0.2, LROther: 1e-2, Seed: 1}).Groups(), optim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	seqs := batch(b, set, []int{0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75})
	b.ResetTimer()
	for range b.N {
		if err := m.feed(seqs, prog.SetInput); err != nil {
			b.Fatal(err)
		}
		if err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		if err := solver.Step(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBatchIndependent checks that a sequence's logits do not depend on the
// batch it is in: a batch of 16 sequences of 20 characters (320 rows, past
// the 256 that Gorgonia's slice hashes tell apart) against each sequence
// alone, compiled, the weights the same.
func TestBatchIndependent(t *testing.T) {
	text, err := newTextSet(corpus, 20)
	if err != nil {
		t.Fatal(err)
	}
	const B, T = 16, 20
	cfg := modelConfig{Vocab: text.NumClasses(), Hidden: 12, SeqLen: T, Batch: B}
	g, m := build(t, cfg, 3)
	p := compile(t, g, m)
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if err := m.feed(batch(t, text, idx), p.SetInput); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	V := cfg.Vocab
	all := make([]float32, T*B*V)
	if err := p.Read(m.logits, all); err != nil {
		t.Fatal(err)
	}
	cfg.Batch = 1
	g1, m1 := build(t, cfg, 3)
	p1 := compile(t, g1, m1)
	one := make([]float32, T*V)
	for _, b := range []int{0, 13} {
		if err := m1.feed(batch(t, text, []int{b}), p1.SetInput); err != nil {
			t.Fatal(err)
		}
		if err := p1.Run(); err != nil {
			t.Fatal(err)
		}
		if err := p1.Read(m1.logits, one); err != nil {
			t.Fatal(err)
		}
		for step := range T {
			got := all[(step*B+b)*V : (step*B+b+1)*V]
			want := one[step*V : (step+1)*V]
			for i := range want {
				if math.Abs(float64(got[i]-want[i])) > 1e-4 {
					t.Fatalf("sequence %d, step %d: logit %d is %g in the batch, %g alone", b, step, i, got[i], want[i])
				}
			}
		}
	}
}
