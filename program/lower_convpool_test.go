package program

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/param"
)

// block is a convolution block as gorgonia's examples and nn.Conv2d build
// one: gorgonia.Conv2d of x by w (padding pad, stride stride, dilation
// dil), the channel bias b added by BroadcastAdd where b is not nil,
// Rectify, MaxPool2D (window pool, padding ppad, stride pstride), and
// gorgonia.Dropout of probability drop where it is above 0.
type block struct {
	pad, stride, dil []int
	pool             tensor.Shape
	ppad, pstride    []int
	drop             float64
}

// apply builds the block.
func (k block) apply(x, w, b *G.Node) (*G.Node, error) {
	ws := w.Shape()
	y, err := G.Conv2d(x, w, tensor.Shape{ws[2], ws[3]}, k.pad, k.stride, k.dil)
	if err != nil {
		return nil, err
	}
	if b != nil {
		if y, err = G.BroadcastAdd(y, b, nil, []byte{0, 2, 3}); err != nil {
			return nil, err
		}
	}
	if y, err = G.Rectify(y); err != nil {
		return nil, err
	}
	if y, err = G.MaxPool2D(y, k.pool, k.ppad, k.pstride); err != nil {
		return nil, err
	}
	if k.drop > 0 {
		return G.Dropout(y, k.drop)
	}
	return y, nil
}

// same is a 3 x 3 convolution with padding 1 and 2 x 2 max pooling, the
// examples' block.
var same = block{pad: []int{1, 1}, stride: []int{1, 1}, dil: []int{1, 1}, pool: tensor.Shape{2, 2}, ppad: []int{0, 0}, pstride: []int{2, 2}}

// withDrop returns k with dropout p.
func (k block) withDrop(p float64) block { k.drop = p; return k }

// blockCase is a graphCase of one block over leaves x, w and, with bias,
// b (1, F, 1, 1).
func blockCase(name string, k block, x, w []int, bias bool) graphCase {
	shapes := [][]int{x, w}
	if bias {
		shapes = append(shapes, []int{1, w[0], 1, 1})
	}
	return graphCase{name: name, shapes: shapes, build: func(l []*G.Node) (*G.Node, error) {
		var b *G.Node
		if bias {
			b = l[2]
		}
		return k.apply(l[0], l[1], b)
	}}
}

// twoBlocks is a small CNN: two biased blocks, the second's output
// flattened into a dense layer (leaves x, w1, b1, w2, b2, dense).
func twoBlocks(k1, k2 block) func(l []*G.Node) (*G.Node, error) {
	return func(l []*G.Node) (*G.Node, error) {
		h, err := k1.apply(l[0], l[1], l[2])
		if err != nil {
			return nil, err
		}
		if h, err = k2.apply(h, l[3], l[4]); err != nil {
			return nil, err
		}
		s := h.Shape()
		return G.Mul(G.Must(G.Reshape(h, tensor.Shape{s[0], s.TotalSize() / s[0]})), l[5])
	}
}

// TestConvPoolLowerings compares convolution blocks (convolution, channel
// bias, ReLU, max pooling), compiled with backend.ConvPool and its
// gradients, with the tape machine: values and gradients, float64 and
// float32, on one thread and three and on the CUDA host model; 2 x 2 tiles
// with an odd side left out, overlapping windows in the padding after a
// strided and dilated convolution, images wide enough for the CPU to
// multiply one at a time, channels enough for Winograd's products (and
// convolutions of as many alone), constant images or bias, the forward
// pass alone, dropout in inference, and two blocks in a row.
func TestConvPoolLowerings(t *testing.T) {
	overlap := block{pad: []int{1, 2}, stride: []int{2, 1}, dil: []int{1, 2}, pool: tensor.Shape{3, 2}, ppad: []int{1, 1}, pstride: []int{2, 1}}
	imagesConstant := blockCase("conv-pool-images-constant", same, []int{3, 2, 5, 6}, []int{3, 2, 3, 3}, true)
	imagesConstant.constant = []bool{true}
	biasConstant := blockCase("conv-pool-bias-constant", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, true)
	biasConstant.constant = []bool{false, false, true}
	forward := blockCase("conv-pool-forward", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, true)
	forward.noGrad = true
	dropEval := blockCase("conv-pool-dropout-inference", same.withDrop(0.3), []int{2, 3, 6, 6}, []int{4, 3, 3, 3}, true)
	dropEval.evalMode, dropEval.noGrad = true, true // gorgonia's gradient divides by p in inference too (lower_norm.go)
	cases := []graphCase{
		blockCase("conv-pool", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, false),
		blockCase("conv-pool-bias", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, true),
		blockCase("conv-pool-overlap", overlap, []int{2, 3, 5, 7}, []int{3, 3, 3, 2}, true),
		blockCase("conv-pool-wide", same, []int{3, 2, 17, 16}, []int{3, 2, 3, 3}, true),
		imagesConstant, biasConstant, forward, dropEval,
		// Channels enough for the CPU's Winograd products, alone and in a
		// block, paddings 0 to 2.
		convCase("conv-winograd", []int{2, 16, 5, 7}, []int{17, 16, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}, false),
		convCase("conv-winograd-pads", []int{2, 16, 6, 4}, []int{16, 16, 3, 3}, []int{0, 2}, []int{1, 1}, []int{1, 1}, false),
		blockCase("conv-pool-winograd", same, []int{3, 16, 6, 7}, []int{17, 16, 3, 3}, true),
		{name: "conv-pool-two-blocks", shapes: [][]int{{3, 2, 8, 9}, {4, 2, 3, 3}, {1, 4, 1, 1}, {5, 4, 3, 3}, {1, 5, 1, 1}, {20, 3}},
			build: twoBlocks(same, same)},
	}
	runCases(t, cases)
}

// kernelCount returns how many kernels of p have the given name.
func kernelCount(p *Program, name string) int { return kernelTypes(p)[name] }

// TestConvPoolMatchesUnfused compiles convolution blocks with gorgonia's
// Dropout in training (the tape machine draws other masks; one after the
// block's output is flattened; one with channels enough for Winograd's
// products) fused and, the
// same graph, unfused, and checks on every test backend, float64 and
// float32, over two steps, that the outputs, the loss and every gradient
// agree within 1e-10 (1e-5 for float32), and that the fused program runs
// ConvPool and no separate dropout or pooling.
func TestConvPoolMatchesUnfused(t *testing.T) {
	for _, c := range []struct {
		name   string
		shapes [][]int
		build  func(l []*G.Node) (*G.Node, error)
	}{
		{"dropout", [][]int{{3, 2, 6, 5}, {4, 2, 3, 3}, {1, 4, 1, 1}}, func(l []*G.Node) (*G.Node, error) {
			return same.withDrop(0.3).apply(l[0], l[1], l[2])
		}},
		{"dropout-wide-overlap", [][]int{{2, 3, 16, 17}, {3, 3, 3, 3}, {1, 3, 1, 1}}, func(l []*G.Node) (*G.Node, error) {
			k := same.withDrop(0.5)
			k.pool, k.ppad, k.pstride = tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}
			return k.apply(l[0], l[1], l[2])
		}},
		{"winograd-dropout", [][]int{{3, 16, 6, 7}, {17, 16, 3, 3}, {1, 17, 1, 1}}, func(l []*G.Node) (*G.Node, error) {
			return same.withDrop(0.3).apply(l[0], l[1], l[2])
		}},
		{"flattened-dropout", [][]int{{2, 3, 6, 6}, {4, 3, 3, 3}, {1, 4, 1, 1}, {36, 5}}, func(l []*G.Node) (*G.Node, error) {
			p, err := same.apply(l[0], l[1], l[2])
			if err != nil {
				return nil, err
			}
			d := G.Must(G.Dropout(G.Must(G.Reshape(p, tensor.Shape{2, 36})), 0.35))
			return G.Mul(d, l[3])
		}},
		{"two-blocks-dropout", [][]int{{3, 2, 8, 9}, {4, 2, 3, 3}, {1, 4, 1, 1}, {5, 4, 3, 3}, {1, 5, 1, 1}, {20, 3}},
			twoBlocks(same.withDrop(0.2), same.withDrop(0.4))},
	} {
		for bi, be := range testBackends(t) {
			for _, dt := range floatTypes {
				t.Run(fmt.Sprintf("%s/backend%d/%v", c.name, bi, dt), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(11, 12))
					values := make([][]float64, len(c.shapes))
					for i, s := range c.shapes {
						values[i] = make([]float64, numel(s))
						for j := range values[i] {
							values[i][j] = rng.NormFloat64()
						}
					}
					var progs [2]*Program
					var nodes [2][2]*G.Node // output and loss
					for i, unfused := range []bool{false, true} {
						g := G.NewGraph()
						var leaves []*G.Node
						var params []param.Param
						for j, s := range c.shapes {
							l := newLeaf(g, dt, fmt.Sprintf("x%d", j), s, values[j])
							leaves, params = append(leaves, l), append(params, param.Plain(l))
						}
						out, err := c.build(leaves)
						if err != nil {
							t.Fatal(err)
						}
						rr := rand.New(rand.NewPCG(13, 14))
						rv := make([]float64, out.Shape().TotalSize())
						for j := range rv {
							rv[j] = rr.NormFloat64()
						}
						loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, newLeaf(g, dt, "R", []int(out.Shape()), rv)))))
						if _, err := G.Grad(loss, leaves...); err != nil {
							t.Fatal(err)
						}
						p, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{out, loss}, Params: params, DropoutSeed: 3, unfused: unfused})
						if err != nil {
							t.Fatal(err)
						}
						defer p.Close()
						progs[i], nodes[i] = p, [2]*G.Node{out, loss}
					}
					if n := kernelCount(progs[0], "conv-pool"); n == 0 || kernelCount(progs[0], "dropout")+kernelCount(progs[0], "max-pool") != 0 {
						t.Fatalf("fused: %v", kernelTypes(progs[0]))
					}
					if kernelCount(progs[1], "conv-pool") != 0 || kernelCount(progs[1], "dropout") == 0 {
						t.Fatalf("unfused: %v", kernelTypes(progs[1]))
					}
					tol := tolerance(dt)
					for step := range 2 {
						var got [2][][]float64
						for i, p := range progs {
							if err := p.SetStep(step); err != nil {
								t.Fatal(err)
							}
							if err := p.Run(); err != nil {
								t.Fatal(err)
							}
							got[i] = append(got[i], readNode(t, p, nodes[i][0]), readNode(t, p, nodes[i][1]))
							for j := range c.shapes {
								got[i] = append(got[i], readGrad(t, p, j))
							}
						}
						for j := range got[0] {
							if d := testval.MaxRel(got[0][j], got[1][j]); !(d <= tol) {
								t.Errorf("step %d: value %d (output, loss, then gradients) of the fused program differs from the unfused one's by %.3g, %s",
									step, j, d, testval.Worst(got[0][j], got[1][j]))
							}
						}
					}
				})
			}
		}
	}
}

// TestConvPoolFusion checks which path a convolution block takes: one
// ConvPool and its gradients, with no pooling, dropout, comparison or
// reduction (but the loss's) left; the dropout left out where the pooled values have
// another user; and the general path (a plain convolution) where the
// convolution's output, its biased or its rectified values have another
// user or are an output.
func TestConvPoolFusion(t *testing.T) {
	for _, c := range []struct {
		name string
		// use returns, from the block's inner nodes, a node to add to the
		// loss, and whether it is an output instead.
		use           func(y, z, a, p *G.Node) (*G.Node, bool)
		want, notWant []string
	}{
		{name: "fused", want: []string{"conv-pool", "conv-pool-grad-filter", "conv-pool-grad-input", "conv-pool-grad-bias"},
			notWant: []string{"conv", "max-pool", "max-pool-grad", "dropout", "zip"}},
		{name: "pooled-shared", use: func(_, _, _, p *G.Node) (*G.Node, bool) { return p, false },
			want: []string{"conv-pool", "conv-pool-grad-filter", "conv-pool-grad-input", "dropout"}, notWant: []string{"conv", "max-pool"}},
		{name: "rectified-shared", use: func(_, _, a, _ *G.Node) (*G.Node, bool) { return a, false },
			want: []string{"conv", "conv-grad-filter", "max-pool"}, notWant: []string{"conv-pool"}},
		{name: "biased-shared", use: func(_, z, _, _ *G.Node) (*G.Node, bool) { return z, false },
			want: []string{"conv", "max-pool"}, notWant: []string{"conv-pool"}},
		{name: "conv-output", use: func(y, _, _, _ *G.Node) (*G.Node, bool) { return y, true },
			want: []string{"conv", "max-pool"}, notWant: []string{"conv-pool"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := newLeaf(g, tensor.Float64, "x", []int{2, 3, 6, 6}, make([]float64, 216))
			w := newLeaf(g, tensor.Float64, "w", []int{4, 3, 3, 3}, make([]float64, 108))
			b := newLeaf(g, tensor.Float64, "b", []int{1, 4, 1, 1}, make([]float64, 4))
			y := G.Must(G.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
			z := G.Must(G.BroadcastAdd(y, b, nil, []byte{0, 2, 3}))
			a := G.Must(G.Rectify(z))
			p := G.Must(G.MaxPool2D(a, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			l := G.Must(G.Dropout(p, 0.25))
			loss := G.Must(G.Sum(l))
			outputs := []*G.Node{loss}
			if c.use != nil {
				n, output := c.use(y, z, a, p)
				if output {
					outputs = append(outputs, n)
				} else {
					loss = G.Must(G.Add(loss, G.Must(G.Sum(n))))
					outputs[0] = loss
				}
			}
			if _, err := G.Grad(loss, x, w, b); err != nil {
				t.Fatal(err)
			}
			be := testBackends(t)[0]
			prog, err := Compile(g, Config{Backend: be, Outputs: outputs, Params: []param.Param{param.Plain(x), param.Plain(w), param.Plain(b)}})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			checkKernels(t, prog, c.want, c.notWant)
			if got := kernelTypes(prog); c.name == "fused" && got["reduce"] != 1 {
				t.Errorf("%d reductions among %v: want only the loss's", got["reduce"], got)
			}
		})
	}
}
