package program

import (
	"fmt"
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program/lower"
)

var floatTypes = []tensor.Dtype{tensor.Float64, tensor.Float32}

// readNode returns the program's values of n in float64.
func readNode(t *testing.T, p *Program, n *G.Node) []float64 {
	t.Helper()
	h := testval.Host(n.Dtype(), numel(n.Shape()))
	if err := p.Read(n, h); err != nil {
		t.Fatal(err)
	}
	return testval.Floats(h)
}

// readGrad returns the program's gradient of its parameter i.
func readGrad(t *testing.T, p *Program, i int) []float64 {
	t.Helper()
	pr := p.Params()[i]
	h := testval.Host(pr.Node.Dtype(), pr.Size)
	if err := p.Backend().CopyOut(h, pr.Grad.Buf, pr.Grad.Off); err != nil {
		t.Fatal(err)
	}
	return testval.Floats(h)
}

// readState returns the program's state tensor name in float64.
func readState(t *testing.T, p *Program, name string) []float64 {
	t.Helper()
	shape, dt, ok := p.StateInfo(name)
	if !ok {
		t.Fatalf("no state %q among %q", name, p.StateNames())
	}
	h := testval.Host(dt, shape.TotalSize())
	if err := p.ReadState(name, h); err != nil {
		t.Fatal(err)
	}
	return testval.Floats(h)
}

// channelShape is the shape of a per-channel scale of x's shape: its
// channel axis, 1 elsewhere.
func channelShape(shape []int) []int {
	s := make([]int, len(shape))
	for i := range s {
		s[i] = 1
	}
	s[1] = shape[1]
	return s
}

// bnGraph is a BatchNorm of an input x with constant scale and shift.
type bnGraph struct {
	g     *G.ExprGraph
	x, y  *G.Node
	bn    *G.Node // the BatchNormOp's node
	op    *G.BatchNormOp
	scale []float64
}

func newBNGraph(t *testing.T, dt tensor.Dtype, shape []int) *bnGraph {
	t.Helper()
	b := &bnGraph{g: G.NewGraph()}
	b.x = G.NewTensor(b.g, dt, len(shape), G.WithShape(shape...), G.WithName("x"), G.WithValue(fill(dt, shape, 1)))
	cs := channelShape(shape)
	b.scale = testval.Floats(fill(dt, cs, 2).Data())
	scale := newLeaf(b.g, dt, "scale", cs, b.scale)
	bias := newLeaf(b.g, dt, "bias", cs, testval.Floats(fill(dt, cs, 3).Data()))
	var err error
	if b.y, _, _, b.op, err = G.BatchNorm(b.x, scale, bias, 0.3, 1e-3); err != nil {
		t.Fatal(err)
	}
	for _, n := range b.g.AllNodes() {
		if n.Op() == G.Op(b.op) {
			b.bn = n
		}
	}
	return b
}

// batchOf returns the input of step k: N(0, 1) values shifted by k + 1, so
// that the running statistics move.
func batchOf(dt tensor.Dtype, shape []int, k int) tensor.Tensor {
	v := testval.Floats(fill(dt, shape, uint64(10+k)).Data())
	for i := range v {
		v[i] = 2*v[i] + float64(k+1)
	}
	return testval.Tensor(dt, shape, v)
}

// TestBatchNormRunningStats trains a BatchNorm for three steps of
// different batches on the tape machine and as a program, on every test
// backend, on a matrix and an image batch, and checks that the outputs and
// the running statistics agree after every step (the momentum and the
// unbiased variance as gorgonia has them); that StoreParams gives the op
// the program's statistics; that an evaluation program (EvalMode) sharing
// the training program's state agrees with a tape machine made with
// gorgonia.EvalMode(), sees the next training step's statistics, and that
// one compiled without Share starts from the op's statistics.
func TestBatchNormRunningStats(t *testing.T) {
	for bi, be := range testBackends(t) {
		for _, shape := range [][]int{{6, 5}, {3, 4, 2, 5}} {
			for _, dt := range floatTypes {
				t.Run(fmt.Sprintf("backend%d/%v/%v", bi, shape, dt), func(t *testing.T) {
					tol := tolerance(dt)
					tape, prg := newBNGraph(t, dt, shape), newBNGraph(t, dt, shape)
					vm := G.NewTapeMachine(tape.g)
					defer vm.Close()
					prog, err := Compile(prg.g, Config{Backend: be, Outputs: []*G.Node{prg.y}, Inputs: []*G.Node{prg.x}})
					if err != nil {
						t.Fatal(err)
					}
					defer prog.Close()
					names := []string{prg.bn.Name() + "/running_mean", prg.bn.Name() + "/running_var"}
					if got := prog.StateNames(); fmt.Sprint(got) != fmt.Sprint(names) {
						t.Fatalf("state names %q, want %q", got, names)
					}
					if v := readState(t, prog, names[1]); v[0] != 1 {
						t.Errorf("running variance starts at %v, want 1 (a training VM's reset)", v[0])
					}
					for k := range 3 {
						xv := batchOf(dt, shape, k)
						if err := G.Let(tape.x, xv); err != nil {
							t.Fatal(err)
						}
						if err := vm.RunAll(); err != nil {
							t.Fatal(err)
						}
						vm.Reset()
						if err := prog.SetInput(prg.x, xv.Data()); err != nil {
							t.Fatal(err)
						}
						if err := prog.Run(); err != nil {
							t.Fatal(err)
						}
						if d := testval.MaxRel(readNode(t, prog, prg.y), testval.Floats(tape.y.Value().Data())); !(d <= tol) {
							t.Errorf("step %d: output differs from the tape machine's by %.3g", k, d)
						}
						mean, vr := tape.op.Stats()
						for i, want := range []tensor.Tensor{mean, vr} {
							if d := testval.MaxRel(readState(t, prog, names[i]), testval.Floats(want.Data())); !(d <= tol) {
								t.Errorf("step %d: %s differs from the tape machine's by %.3g", k, names[i], d)
							}
						}
					}
					if err := prog.StoreParams(); err != nil {
						t.Fatal(err)
					}
					mean, vr := prg.op.Stats()
					for i, got := range []tensor.Tensor{mean, vr} {
						if d := testval.MaxRel(testval.Floats(got.Data()), readState(t, prog, names[i])); d != 0 {
							t.Errorf("after StoreParams the op's %s differs from the program's by %.3g", names[i], d)
						}
					}

					// Evaluation: the tape machine in eval mode, a program
					// sharing the state and one starting from the op's.
					ev := G.NewTapeMachine(tape.g, G.EvalMode())
					defer ev.Close()
					xv := batchOf(dt, shape, 7)
					if err := G.Let(tape.x, xv); err != nil {
						t.Fatal(err)
					}
					if err := ev.RunAll(); err != nil {
						t.Fatal(err)
					}
					shared, err := Compile(prg.g, Config{Backend: be, Outputs: []*G.Node{prg.y}, Inputs: []*G.Node{prg.x}, NoGrad: true, EvalMode: true, Share: prog})
					if err != nil {
						t.Fatal(err)
					}
					defer shared.Close()
					own, err := Compile(prg.g, Config{Backend: be, Outputs: []*G.Node{prg.y}, Inputs: []*G.Node{prg.x}, NoGrad: true, EvalMode: true})
					if err != nil {
						t.Fatal(err)
					}
					defer own.Close()
					eval := func(p *Program) []float64 {
						if err := p.SetInput(prg.x, xv.Data()); err != nil {
							t.Fatal(err)
						}
						if err := p.Run(); err != nil {
							t.Fatal(err)
						}
						return readNode(t, p, prg.y)
					}
					s0, o0 := eval(shared), eval(own)
					if d := testval.MaxRel(s0, testval.Floats(tape.y.Value().Data())); !(d <= tol) {
						t.Errorf("evaluation differs from the tape machine's (EvalMode) by %.3g", d)
					}
					if d := testval.MaxRel(o0, s0); d != 0 {
						t.Errorf("evaluation from the op's statistics differs from the shared one by %.3g", d)
					}
					// One more training step moves the shared statistics only.
					if err := prog.SetInput(prg.x, batchOf(dt, shape, 3).Data()); err != nil {
						t.Fatal(err)
					}
					if err := prog.Run(); err != nil {
						t.Fatal(err)
					}
					if d := testval.MaxRel(eval(shared), s0); d == 0 {
						t.Error("the shared evaluation program did not see the training step's statistics")
					}
					if d := testval.MaxRel(eval(own), o0); d != 0 {
						t.Errorf("the evaluation program of its own statistics changed by %.3g after a training step", d)
					}
				})
			}
		}
	}
}

// TestNormGradients checks the gradients that gorgonia's own gradient ops
// get wrong (see lower/norm.go) against their closed forms, on every test
// backend: batch norm in inference on an image batch (x's gradient is the
// loss's weights times scale / sqrt(running variance + eps)), and group norm
// over groups of 600 and 800 values (values against a direct float64
// normalization, x's gradient against rstd (r - mean(r) - xhat mean(r
// xhat)) per group, r the loss's weights).
func TestNormGradients(t *testing.T) {
	for bi, be := range testBackends(t) {
		for _, dt := range floatTypes {
			tol := tolerance(dt)
			t.Run(fmt.Sprintf("backend%d/%v/batchnorm-inference", bi, dt), func(t *testing.T) {
				shape := []int{3, 4, 2, 5}
				b := newBNGraph(t, dt, shape)
				if err := setStats(b.op, dt, shape[1]); err != nil {
					t.Fatal(err)
				}
				r := newLeaf(b.g, dt, "R", shape, testval.Floats(fill(dt, shape, 4).Data()))
				loss := G.Must(G.Sum(G.Must(G.HadamardProd(b.y, r))))
				if _, err := G.Grad(loss, b.x); err != nil {
					t.Fatal(err)
				}
				prog, err := Compile(b.g, Config{Backend: be, Outputs: []*G.Node{loss}, Params: []param.Param{param.Plain(b.x)}, EvalMode: true})
				if err != nil {
					t.Fatal(err)
				}
				defer prog.Close()
				if err := prog.Run(); err != nil {
					t.Fatal(err)
				}
				_, vr := b.op.Stats()
				v, rv := testval.Floats(vr.Data()), testval.Floats(r.Value().Data())
				want := make([]float64, len(rv))
				spatial := shape[2] * shape[3]
				for i := range want {
					c := i / spatial % shape[1]
					want[i] = rv[i] * b.scale[c] / math.Sqrt(v[c]+1e-3)
				}
				if d := testval.MaxRel(readGrad(t, prog, 0), want); !(d <= tol) {
					t.Errorf("gradient differs from its closed form by %.3g", d)
				}
			})
			for _, c := range []struct {
				shape  []int
				groups int
			}{{[]int{2, 4, 20, 20}, 2}, {[]int{1, 6, 300}, 3}} {
				t.Run(fmt.Sprintf("backend%d/%v/groupnorm%v", bi, dt, c.shape), func(t *testing.T) {
					g := G.NewGraph()
					x := G.NewTensor(g, dt, len(c.shape), G.WithShape(c.shape...), G.WithName("x"), G.WithValue(batchOf(dt, c.shape, 2)))
					cs := channelShape(c.shape)
					ones := make([]float64, c.shape[1])
					for i := range ones {
						ones[i] = 1
					}
					scale := newLeaf(g, dt, "scale", cs, ones)
					bias := newLeaf(g, dt, "bias", cs, make([]float64, c.shape[1]))
					y := G.Must(G.GroupNorm(x, scale, bias, c.groups, c.shape[1], 1e-4))
					r := newLeaf(g, dt, "R", c.shape, testval.Floats(fill(dt, c.shape, 5).Data()))
					loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
					if _, err := G.Grad(loss, x); err != nil {
						t.Fatal(err)
					}
					prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{y}, Params: []param.Param{param.Plain(x)}})
					if err != nil {
						t.Fatal(err)
					}
					defer prog.Close()
					if err := prog.Run(); err != nil {
						t.Fatal(err)
					}
					xv, rv := testval.Floats(x.Value().Data()), testval.Floats(r.Value().Data())
					rows := c.shape[0] * c.groups
					d := len(xv) / rows
					wantY, wantG := make([]float64, len(xv)), make([]float64, len(xv))
					for row := range rows {
						xs, rs := xv[row*d:(row+1)*d], rv[row*d:(row+1)*d]
						var mean, vr float64
						for _, a := range xs {
							mean += a
						}
						mean /= float64(d)
						for _, a := range xs {
							vr += (a - mean) * (a - mean)
						}
						rstd := 1 / math.Sqrt(vr/float64(d)+1e-4)
						var mr, mrx float64
						for j, a := range xs {
							wantY[row*d+j] = (a - mean) * rstd
							mr += rs[j]
							mrx += rs[j] * (a - mean) * rstd
						}
						mr, mrx = mr/float64(d), mrx/float64(d)
						for j, a := range xs {
							wantG[row*d+j] = rstd * (rs[j] - mr - (a-mean)*rstd*mrx)
						}
					}
					if d := testval.MaxRel(readNode(t, prog, y), wantY); !(d <= tol) {
						t.Errorf("values differ from the direct normalization by %.3g", d)
					}
					if d := testval.MaxRel(readGrad(t, prog, 0), wantG); !(d <= tol) {
						t.Errorf("gradient differs from its closed form by %.3g", d)
					}
				})
			}
		}
	}
}

// TestGorgoniaDropout compiles gorgonia's Dropout (p = 0.3) over ~10^5
// values on every test backend and checks that the program draws the mask
// of backend.DropoutDraw for the seed, the node's stream and the step; that
// kept values are divided by 1 - p exactly as gorgonia's op divides them
// (float32 divides by float32(1 - p)); that about 1 - p of them are kept
// (within 5 standard errors); that the gradient keeps the same elements,
// scaled the same way; that a step draws the same mask again and another
// step another one; that Run advances the step; that every backend draws
// the same bits; and that in EvalMode the op and its gradient are the
// identity.
func TestGorgoniaDropout(t *testing.T) {
	p := 0.3
	keep := 1.0 - p // as gorgonia computes it, at run time
	shape := []int{300, 301}
	first := map[tensor.Dtype][]float64{}
	for bi, be := range testBackends(t) {
		for _, dt := range floatTypes {
			t.Run(fmt.Sprintf("backend%d/%v", bi, dt), func(t *testing.T) {
				g := G.NewGraph()
				x := G.NewMatrix(g, dt, G.WithShape(shape...), G.WithName("x"), G.WithValue(fill(dt, shape, 1)))
				y := G.Must(G.Dropout(x, p))
				r := newLeaf(g, dt, "R", shape, testval.Floats(fill(dt, shape, 2).Data()))
				loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
				if _, err := G.Grad(loss, x); err != nil {
					t.Fatal(err)
				}
				xv, rv := testval.Floats(x.Value().Data()), testval.Floats(r.Value().Data())
				scaled := func(v float64) float64 {
					if dt == tensor.Float32 {
						return float64(float32(v) / float32(keep))
					}
					return v / keep
				}
				for _, eval := range []bool{false, true} {
					prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{y}, Params: []param.Param{param.Plain(x)}, DropoutSeed: 7, EvalMode: eval})
					if err != nil {
						t.Fatal(err)
					}
					defer prog.Close()
					runAt := func(step int) ([]float64, []float64) {
						if step >= 0 {
							if err := prog.SetStep(step); err != nil {
								t.Fatal(err)
							}
						}
						if err := prog.Run(); err != nil {
							t.Fatal(err)
						}
						return readNode(t, prog, y), readGrad(t, prog, 0)
					}
					yv, gv := runAt(5)
					if eval {
						if testval.MaxRel(yv, xv) != 0 || testval.MaxRel(gv, rv) != 0 {
							t.Error("in EvalMode dropout or its gradient is not the identity")
						}
						continue
					}
					kept := 0
					for i := range xv {
						wy, wg := 0.0, 0.0
						if backend.DropoutDraw(7, lower.StreamOf(y), 5, uint64(i)) >= p {
							wy, wg = scaled(xv[i]), scaled(rv[i])
							kept++
						}
						if yv[i] != wy || gv[i] != wg {
							t.Fatalf("element %d: value %v and gradient %v, want %v and %v", i, yv[i], gv[i], wy, wg)
						}
					}
					n := float64(len(xv))
					if f := float64(kept) / n; math.Abs(f-keep) > 5*math.Sqrt(keep*p/n) {
						t.Errorf("kept %.4f of the values, want %v within 5 standard errors", f, keep)
					}
					if f, ok := first[dt]; !ok {
						first[dt] = yv
					} else if testval.MaxRel(yv, f) != 0 {
						t.Errorf("%s drew another mask than the first backend", be.Name())
					}
					if prog.Step() != 6 {
						t.Errorf("after a Run at step 5 the step is %d, want 6", prog.Step())
					}
					y6, _ := runAt(-1) // step 6, by Run's advance
					if testval.MaxRel(y6, yv) == 0 {
						t.Error("steps 5 and 6 drew the same mask")
					}
					if again, _ := runAt(5); testval.MaxRel(again, yv) != 0 {
						t.Error("step 5 drew another mask the second time")
					}
					if again, _ := runAt(6); testval.MaxRel(again, y6) != 0 {
						t.Error("SetStep(6) drew another mask than the advance to step 6")
					}
				}
			})
		}
	}
}

// TestRandomNodes compiles gorgonia's random nodes (uniform on [-1, 3),
// normal of mean 0.5 and deviation 2, binomial of 5 trials of 0.3 and of 1
// of 0.2), ~10^5 values each, on every test backend, and checks that each
// value is backend.RandomDraw's for the seed, the node's stream and the
// step, bit for bit, on every backend; that the samples' mean and variance
// (and the normal's share beyond two deviations) are within 5 standard
// errors of the distribution's; that two nodes of one distribution draw
// apart; that a scalar node draws one value; and that a step draws the
// same values again and another step others.
func TestRandomNodes(t *testing.T) {
	const n = 317 * 331
	type dist struct {
		name         string
		d            backend.RandomDist
		a, b         float64
		mean, vr, m4 float64 // moments: the 4th central one for the variance's error
	}
	dists := []dist{
		{"uniform", backend.DrawUniform, -1, 3, 1, 16.0 / 12, math.Pow(4, 4) / 80},
		{"gaussian", backend.DrawGaussian, 0.5, 2, 0.5, 4, 48},
		{"binomial", backend.DrawBinomial, 5, 0.3, 1.5, 1.05, 1.05 * (1 + 3*3*0.21)},
		{"bernoulli", backend.DrawBinomial, 1, 0.2, 0.2, 0.16, 0.16 * (1 - 3*0.16)},
	}
	first := map[tensor.Dtype][][]float64{}
	for bi, be := range testBackends(t) {
		for _, dt := range floatTypes {
			t.Run(fmt.Sprintf("backend%d/%v", bi, dt), func(t *testing.T) {
				// Gorgonia takes random nodes of one type and shape for one
				// node (it hashes them as inputs, by name, and they have
				// none): each has a shape of its own.
				g := G.NewGraph()
				var nodes []*G.Node
				for k, d := range dists {
					shape := [][]int{{317, 331}, {n}, {n, 1}, {1, n}}[k]
					switch d.d {
					case backend.DrawUniform:
						nodes = append(nodes, G.UniformRandomNode(g, dt, d.a, d.b, shape...))
					case backend.DrawGaussian:
						nodes = append(nodes, G.GaussianRandomNode(g, dt, d.a, d.b, shape...))
					default:
						nodes = append(nodes, G.BinomialRandomNode(g, dt, d.a, d.b, shape...))
					}
				}
				twin := G.UniformRandomNode(g, dt, -1, 3, 331, 317)
				scalar := G.BinomialRandomNode(g, dt, 1, 0.5) // a scalar, as gorgonia's stacked autoencoder draws
				prog, err := Compile(g, Config{Backend: be, Outputs: append(nodes, twin, scalar), NoGrad: true, DropoutSeed: 11})
				if err != nil {
					t.Fatal(err)
				}
				defer prog.Close()
				runAt := func(step int) [][]float64 {
					if err := prog.SetStep(step); err != nil {
						t.Fatal(err)
					}
					if err := prog.Run(); err != nil {
						t.Fatal(err)
					}
					var out [][]float64
					for _, nd := range append(nodes, twin) {
						out = append(out, readNode(t, prog, nd))
					}
					return out
				}
				vals := runAt(3)
				if s, want := readNode(t, prog, scalar), backend.RandomDraw(backend.DrawBinomial, 1, 0.5, 11, lower.StreamOf(scalar), 3, 0); len(s) != 1 || s[0] != want {
					t.Errorf("scalar node: %v, want RandomDraw's %v", s, want)
				}
				for k, d := range dists {
					v := vals[k]
					var mean, m2, tail float64
					for i, x := range v {
						want := backend.RandomDraw(d.d, d.a, d.b, 11, lower.StreamOf(nodes[k]), 3, uint64(i))
						if dt == tensor.Float32 {
							want = float64(float32(want))
						}
						if x != want {
							t.Fatalf("%s: value %d is %v, want RandomDraw's %v", d.name, i, x, want)
						}
						mean += x
					}
					mean /= n
					for _, x := range v {
						m2 += (x - d.mean) * (x - d.mean)
						if math.Abs(x-d.mean) > 2*math.Sqrt(d.vr) {
							tail++
						}
					}
					m2 /= n
					if se := math.Sqrt(d.vr / n); math.Abs(mean-d.mean) > 5*se {
						t.Errorf("%s: mean %.5f, want %v within 5 standard errors (%.2g)", d.name, mean, d.mean, se)
					}
					if se := math.Sqrt((d.m4 - d.vr*d.vr) / n); math.Abs(m2-d.vr) > 5*se {
						t.Errorf("%s: variance %.5f, want %v within 5 standard errors (%.2g)", d.name, m2, d.vr, se)
					}
					if d.d == backend.DrawGaussian {
						const p = 0.04550026389635842 // P(|z| > 2)
						if f, se := tail/n, math.Sqrt(p*(1-p)/n); math.Abs(f-p) > 5*se {
							t.Errorf("%s: %.5f of the values beyond two deviations, want %.5f within 5 standard errors", d.name, f, p)
						}
					}
				}
				if testval.MaxRel(vals[len(vals)-1], vals[0]) == 0 {
					t.Error("two uniform nodes drew the same values")
				}
				if f, ok := first[dt]; !ok {
					first[dt] = vals
				} else {
					for k := range f {
						if testval.MaxRel(vals[k], f[k]) != 0 {
							t.Errorf("%s: %s drew other values than the first backend", dists[min(k, len(dists)-1)].name, be.Name())
						}
					}
				}
				again, other := runAt(3), runAt(4)
				for k := range vals {
					if testval.MaxRel(again[k], vals[k]) != 0 {
						t.Errorf("node %d: step 3 drew other values the second time", k)
					}
					if testval.MaxRel(other[k], vals[k]) == 0 {
						t.Errorf("node %d: steps 3 and 4 drew the same values", k)
					}
				}
			})
		}
	}
}

// TestNormRefusals checks that Compile refuses, naming the node and the
// problem, what the lowerings cannot compute: a group norm whose channels
// are not a multiple of its groups, a batch norm in training over one value
// per channel, dropout of probability 1, a binomial node of more trials than
// backend.MaxTrials or a probability above 1, and an evaluation program
// sharing a program without its batch norm's statistics.
func TestNormRefusals(t *testing.T) {
	be := testBackends(t)[0]
	leaf := func(g *G.ExprGraph, shape ...int) *G.Node {
		return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName("x"), G.WithValue(fill(tensor.Float64, shape, 1)))
	}
	ones := func(g *G.ExprGraph, name string, shape ...int) *G.Node {
		return newLeaf(g, tensor.Float64, name, shape, testval.Floats(fill(tensor.Float64, shape, 2).Data()))
	}
	g0 := G.NewGraph()
	other, err := Compile(g0, Config{Backend: be, Outputs: []*G.Node{G.NewScalar(g0, tensor.Float64, G.WithName("s"), G.WithValue(1.0))}, NoGrad: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, c := range []struct {
		name  string
		build func(g *G.ExprGraph) (*G.Node, error)
		cfg   Config
		want  string
	}{
		{"groups", func(g *G.ExprGraph) (*G.Node, error) {
			x := leaf(g, 2, 6, 3)
			return G.GroupNorm(x, ones(g, "s", 1, 6, 1), ones(g, "b", 1, 6, 1), 4, 6, 1e-5)
		}, Config{}, "channels a multiple of the groups"},
		{"batch of one", func(g *G.ExprGraph) (*G.Node, error) {
			x := leaf(g, 1, 5)
			y, _, _, _, err := G.BatchNorm(x, ones(g, "s", 1, 5), ones(g, "b", 1, 5), 0.9, 1e-5)
			return y, err
		}, Config{}, "1 value(s) per channel"},
		{"dropout of 1", func(g *G.ExprGraph) (*G.Node, error) { return G.Dropout(leaf(g, 3, 4), 1) }, Config{}, "dropout of probability 1"},
		{"trials", func(g *G.ExprGraph) (*G.Node, error) {
			return G.BinomialRandomNode(g, tensor.Float64, 1e6, 0.5, 4), nil
		}, Config{}, "binomial of 1e+06 trials"},
		{"probability", func(g *G.ExprGraph) (*G.Node, error) {
			return G.BinomialRandomNode(g, tensor.Float64, 3, 1.5, 4), nil
		}, Config{}, "probability 1.5"},
		{"share", func(g *G.ExprGraph) (*G.Node, error) {
			x := leaf(g, 4, 5)
			y, _, _, _, err := G.BatchNorm(x, ones(g, "s", 1, 5), ones(g, "b", 1, 5), 0.9, 1e-5)
			return y, err
		}, Config{EvalMode: true, Share: other}, "has no state"},
	} {
		g := G.NewGraph()
		y, err := c.build(g)
		if err != nil {
			t.Fatalf("%s: building: %v", c.name, err)
		}
		cfg := c.cfg
		cfg.Backend, cfg.Outputs, cfg.NoGrad = be, []*G.Node{y}, true
		p, err := Compile(g, cfg)
		if err == nil {
			p.Close()
			t.Errorf("%s: Compile succeeded", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "node") {
			t.Errorf("%s: %v, want an error naming the node and saying %q", c.name, err, c.want)
		}
	}
}
