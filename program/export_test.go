package program

import (
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/internal/onnxrt"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/onnx"
	"github.com/orthonet/orthonet/onnxexport"
	"github.com/orthonet/orthonet/program/lower"
)

// exportCases are graphs whose ONNX export ONNX Runtime must compute as the
// compiled program does: every entry of exporters is used by one at least.
// Leaf 0 is the ONNX graph's input, the others initializers.
func exportCases() []graphCase {
	return append(coreCases(),
		unaryCase("log2", G.Log2, true),
		unaryCase("inverse-sqrt", G.InverseSqrt, true),
		unaryCase("sign", G.Sign, false),
		unaryCase("expm1", G.Expm1, false),
		graphCase{name: "param-scalar", shapes: [][]int{{4, 3}, {}}, build: two(func(a, b *G.Node) (*G.Node, error) { return G.Mul(b, a) })},
		graphCase{name: "comparisons", shapes: [][]int{{3, 5}, {3, 5}}, build: two(func(a, b *G.Node) (*G.Node, error) {
			lt := G.Must(G.Lt(a, b, true))
			eq := G.Must(G.Eq(a, a, true))
			ne := G.Must(G.Ne(a, b, true))
			gt := G.Must(G.Gt(a, b, true))
			lte := G.Must(G.Lte(a, b, true))
			gte := G.Must(G.Gte(a, b, true))
			return G.Add(G.Must(G.Add(lt, eq)), G.Must(G.Add(G.Must(G.Add(ne, gte)), G.Must(G.Add(gt, lte)))))
		})},
		graphCase{name: "slice-step", shapes: [][]int{{8, 3}}, build: one(func(a *G.Node) (*G.Node, error) { return G.Slice(a, G.S(1, 8, 3)) })},
		// Images: im2col (and so Conv2d), pooling.
		graphCase{name: "conv2d", shapes: [][]int{{2, 3, 7, 6}, {4, 3, 3, 3}}, build: two(func(x, w *G.Node) (*G.Node, error) {
			return G.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1})
		})},
		graphCase{name: "conv2d-stride-dilation", shapes: [][]int{{2, 2, 9, 8}, {3, 2, 2, 3}}, build: two(func(x, w *G.Node) (*G.Node, error) {
			return G.Conv2d(x, w, tensor.Shape{2, 3}, []int{2, 1}, []int{2, 3}, []int{2, 1})
		})},
		graphCase{name: "im2col", shapes: [][]int{{1, 2, 5, 4}}, build: one(func(x *G.Node) (*G.Node, error) {
			return G.Im2Col(x, tensor.Shape{2, 2}, tensor.Shape{0, 1}, tensor.Shape{1, 2}, tensor.Shape{1, 1})
		})},
		graphCase{name: "maxpool", shapes: [][]int{{2, 3, 6, 7}}, build: one(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
		})},
		graphCase{name: "maxpool-pad-overlap", shapes: [][]int{{1, 2, 5, 5}}, build: one(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(x, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2})
		})},
		graphCase{name: "relu-maxpool", shapes: [][]int{{2, 2, 4, 4}}, build: one(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(G.Must(G.Rectify(x)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
		})},
		graphCase{name: "global-avg-pool", shapes: [][]int{{2, 3, 4, 5}}, build: one(G.GlobalAveragePool2D)},
	)
}

// exportTolerance is the largest relative difference allowed between ONNX
// Runtime and the compiled program.
func exportTolerance(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-5
	}
	return 1e-10
}

// compileForward compiles the forward pass of out and returns its value
// (the other leaves are constants).
func compileForward(t *testing.T, g *G.ExprGraph, inputs []*G.Node, out *G.Node) []float64 {
	t.Helper()
	be := cpu.New(cpu.Options{})
	defer be.Close()
	prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{out}, Inputs: inputs, NoGrad: true})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	defer prog.Close()
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	host := any(make([]float64, max(out.Shape().TotalSize(), 1)))
	if out.Dtype() == tensor.Float32 {
		host = make([]float32, max(out.Shape().TotalSize(), 1))
	}
	if err := prog.Read(out, host); err != nil {
		t.Fatal(err)
	}
	return testval.Floats(host)
}

// runExported exports out (with inputs as the graph's inputs), runs it in
// ONNX Runtime on the inputs' current values, and returns the output.
func runExported(t *testing.T, g *G.ExprGraph, inputs []*G.Node, out *G.Node, f32 bool) []float64 {
	t.Helper()
	m, err := onnxexport.Export(g, onnxexport.Config{Inputs: inputs, Outputs: []*G.Node{out}, OutputNames: []string{"y"}, Float32: f32})
	if err != nil {
		t.Fatalf("ExportONNX: %v", err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	feeds := map[string]onnxrt.Tensor{}
	for _, n := range inputs {
		data, err := lower.HostData(n)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := data.([]float64); ok && f32 {
			data = testval.Float32s(d)
		}
		feeds[n.Name()] = onnxrt.Tensor{Dims: n.Shape(), Data: data}
	}
	res, err := onnxrt.Run(path, feeds)
	if err != nil {
		t.Fatal(err)
	}
	y, ok := res["y"]
	if !ok {
		t.Fatalf("ONNX Runtime returned %v, no output y", res)
	}
	if !slices.Equal(y.Dims, []int(out.Shape())) {
		t.Errorf("ONNX Runtime's output has dimensions %v, the node %v", y.Dims, out.Shape())
	}
	return testval.Floats(y.Data)
}

// TestExportONNXOps exports every case in float32 and float64 and checks
// that ONNX Runtime computes what the compiled program computes.
func TestExportONNXOps(t *testing.T) {
	onnxrt.Need(t)
	for _, c := range exportCases() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			g := G.NewGraph()
			rng := rand.New(rand.NewPCG(7, uint64(len(c.name))))
			var leaves []*G.Node
			for i, s := range c.shapes {
				v := make([]float64, numel(s))
				for j := range v {
					if c.positive {
						v[j] = 0.5 + 1.5*rng.Float64()
					} else {
						v[j] = rng.NormFloat64()
					}
				}
				leaves = append(leaves, newLeaf(g, dt, fmt.Sprintf("x%d", i), s, v))
			}
			out, err := c.build(leaves)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			want := compileForward(t, g, leaves[:1], out)
			got := runExported(t, g, leaves[:1], out, false)
			if len(got) != len(want) {
				t.Errorf("%s %v: ONNX Runtime gives %d values, the program %d", c.name, dt, len(got), len(want))
				continue
			}
			if d := testval.MaxRel(got, want); !(d <= exportTolerance(dt)) {
				t.Errorf("%s %v: ONNX Runtime differs from the program by %.3g (relative), tolerance %g\n got %v\nwant %v", c.name, dt, d, exportTolerance(dt), trim(got), trim(want))
			}
		}
	}
}

// TestExportONNXModels exports the FFN and a ViT and compares ONNX
// Runtime's logits with the program's: float32 models, and a float64 FFN
// exported both as DOUBLE and, rounded, as FLOAT (Float32).
func TestExportONNXModels(t *testing.T) {
	onnxrt.Need(t)
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			m, err := mc.build(dt)
			if err != nil {
				t.Fatal(err)
			}
			x := m.inputs[0]
			want := compileForward(t, m.g, []*G.Node{x}, m.logits)
			for _, f32 := range []bool{false, true} {
				if f32 && dt == tensor.Float32 {
					continue
				}
				got := runExported(t, m.g, []*G.Node{x}, m.logits, f32)
				tol := exportTolerance(dt)
				if f32 {
					tol = exportTolerance(tensor.Float32)
				}
				if d := testval.MaxRel(got, want); !(d <= tol) {
					t.Errorf("%s %v (as float32: %v): ONNX Runtime's logits differ from the program's by %.3g (relative), tolerance %g", mc.name, dt, f32, d, tol)
				}
			}
		}
	}
}

// TestExportONNXPatches exports a ViT whose input is whole images, cut
// into patches in the graph (models.Patches): ONNX Runtime must give the
// logits the program gives for the patches models.Patchify cuts.
func TestExportONNXPatches(t *testing.T) {
	onnxrt.Need(t)
	cfg := models.ViTConfig{Image: 8, Patch: 4, Channels: 3, Dim: 16, Depth: 1, Heads: 2, MLP: 12, Classes: 10}
	const batch = 2
	side, d := cfg.Image, cfg.Channels*cfg.Image*cfg.Image
	images := make([]float32, batch*d)
	rng := rand.New(rand.NewPCG(8, 8))
	for i := range images {
		images[i] = float32(2*rng.Float64() - 1)
	}
	// The program on patches cut on the host.
	g := G.NewGraph()
	patches := make([]float32, batch*cfg.Tokens()*cfg.PatchDim())
	for i := 0; i < batch; i++ {
		models.Patchify(patches[i*d:(i+1)*d], images[i*d:(i+1)*d], cfg.Channels, side, cfg.Patch)
	}
	x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(batch, cfg.Tokens(), cfg.PatchDim()), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(batch, cfg.Tokens(), cfg.PatchDim()), tensor.WithBacking(patches))))
	vit, err := models.NewViT(g, cfg, tensor.Float32, rand.New(rand.NewPCG(9, 9)))
	if err != nil {
		t.Fatal(err)
	}
	logits, err := vit.Forward(x, false)
	if err != nil {
		t.Fatal(err)
	}
	want := compileForward(t, g, []*G.Node{x}, logits)
	// The export of images cut in the graph, with the same weights.
	g2 := G.NewGraph()
	img := G.NewTensor(g2, tensor.Float32, 4, G.WithShape(batch, cfg.Channels, side, side), G.WithName("images"),
		G.WithValue(tensor.New(tensor.WithShape(batch, cfg.Channels, side, side), tensor.WithBacking(images))))
	vit2, err := models.NewViT(g2, cfg, tensor.Float32, rand.New(rand.NewPCG(9, 9)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := models.Patches(img, cfg.Patch)
	if err != nil {
		t.Fatal(err)
	}
	logits2, err := vit2.Forward(p, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := testval.MaxRel(compileForward(t, g2, []*G.Node{img}, logits2), want); !(d <= 1e-6) {
		t.Errorf("the program on images cut in the graph differs from the program on Patchify's patches by %.3g", d)
	}
	got := runExported(t, g2, []*G.Node{img}, logits2, false)
	if d := testval.MaxRel(got, want); !(d <= exportTolerance(tensor.Float32)) {
		t.Errorf("ONNX Runtime's logits differ from the program's by %.3g (relative)", d)
	}
}

// absOp is an op that Compile lowers (it carries its kernel) but that has
// no ONNX export: a stand-in for an op added to the compiler alone.
type absOp struct{ elementwise }

func (o absOp) Do(v ...G.Value) (G.Value, error) { return fused.Do(o, v...) }
func (absOp) WriteHash(h hash.Hash)              { _, _ = h.Write([]byte("absOp")) }
func (absOp) Hashcode() uint32                   { return 7 }
func (absOp) String() string                     { return "absOp" }
func (absOp) Kernel(s [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.Map{Op: backend.Abs, N: numel(s[0]), Src: in[0], Dst: out}
}

// TestExportONNXRefusesUnknownOp builds a model with an op that Compile
// accepts but onnxexport has no entry for: onnxexport.Export must refuse it
// with ErrNotExportable, naming the op type and the node.
func TestExportONNXRefusesUnknownOp(t *testing.T) {
	g := G.NewGraph()
	x := newLeaf(g, tensor.Float32, "x", []int{2, 3}, []float64{1, -2, 3, -4, 5, -6})
	w := newLeaf(g, tensor.Float32, "w", []int{3, 2}, []float64{1, 0, 0, 1, 1, 1})
	h := G.Must(G.Mul(x, w))
	y, err := G.ApplyOp(absOp{}, h)
	if err != nil {
		t.Fatal(err)
	}
	if got := compileForward(t, g, []*G.Node{x}, y); fmt.Sprint(got) != "[4 1 10 1]" {
		t.Fatalf("the compiled program computes %v, want [4 1 10 1]", got)
	}
	_, err = onnxexport.Export(g, onnxexport.Config{Inputs: []*G.Node{x}, Outputs: []*G.Node{y}})
	if !errors.Is(err, onnxexport.ErrNotExportable) {
		t.Fatalf("error %v, want onnxexport.ErrNotExportable", err)
	}
	for _, want := range []string{"absOp", y.Name()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// batchCase is a graph built for a batch size, from an input x of shape
// in(batch): onnxexport.ExportBatch must export it for any batch (out names the
// output's first dimension) or refuse it with an error holding refusal.
type batchCase struct {
	name    string
	in      func(b int) []int
	build   func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error)
	runs    []int  // the batches ONNX Runtime runs the one file at
	out     string // the output's first dimension, symbolic
	refusal string
	// tol64, when set, replaces exportTolerance in float64: ONNX Runtime
	// rounds a deep model otherwise (the export at a fixed batch too).
	tol64 float64
}

// batchWeight returns a leaf of shape whose values depend on name alone:
// the same weights at every batch.
func batchWeight(g *G.ExprGraph, dt tensor.Dtype, name string, shape ...int) *G.Node {
	rng := rand.New(rand.NewPCG(uint64(len(name)), uint64(numel(shape))))
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return newLeaf(g, dt, name, shape, v)
}

// graph builds c at batch b with input values drawn from b.
func (c batchCase) graph(b int, dt tensor.Dtype) (g *G.ExprGraph, x, out *G.Node, err error) {
	g = G.NewGraph()
	s := c.in(b)
	rng := rand.New(rand.NewPCG(uint64(b), 3))
	v := make([]float64, numel(s))
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	x = newLeaf(g, dt, "x", s, v)
	out, err = c.build(g, x, b)
	return g, x, out, err
}

// export returns onnxexport.ExportBatch's model of c.
func (c batchCase) export(dt tensor.Dtype) (*onnx.Model, error) {
	return onnxexport.ExportBatch(func(b int) (*G.ExprGraph, onnxexport.Config, error) {
		g, x, out, err := c.graph(b, dt)
		return g, onnxexport.Config{Inputs: []*G.Node{x}, Outputs: []*G.Node{out}, OutputNames: []string{"y"}}, err
	})
}

// rows returns the shape of a batch of examples of shape d.
func rows(d ...int) func(int) []int {
	return func(b int) []int { return append([]int{b}, d...) }
}

// batchCases are graphs whose Reshape targets, Expand shapes, Slice
// bounds and constants' shapes depend on the batch in the ways
// onnxexport.ExportBatch writes.
func batchCases() []batchCase {
	return []batchCase{
		{name: "reshape", in: rows(6), runs: []int{1, 7}, out: "batch", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			h := G.Must(G.Tanh(G.Must(G.Reshape(x, tensor.Shape{2 * b, 3}))))
			return G.Reshape(h, tensor.Shape{b, 6})
		}},
		{name: "broadcast-zeros", in: rows(2, 3), runs: []int{1, 7}, out: "batch", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			zeros := G.NewTensor(g, x.Dtype(), 3, G.WithShape(b, 1, 3), G.WithName("zeros"), G.WithInit(G.Zeroes()))
			cls := G.Must(G.BroadcastAdd(zeros, batchWeight(g, x.Dtype(), "cls", 1, 1, 3), nil, []byte{0}))
			return G.Reshape(G.Must(G.Concat(1, cls, x)), tensor.Shape{b, 9})
		}},
		{name: "double-batch", in: rows(3), runs: []int{1, 4}, out: "batch", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			h := G.Must(G.BroadcastAdd(G.Must(G.Concat(0, x, x)), batchWeight(g, x.Dtype(), "p", 1, 3), nil, []byte{0}))
			return G.Reshape(h, tensor.Shape{b, 6})
		}},
		{name: "slice-rows", in: rows(3), runs: []int{2, 5}, out: "2*batch-2", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			return G.Slice(G.Must(G.Concat(0, x, G.Must(G.Neg(x)))), G.S(1, 2*b-1)) // a slice of one row would drop its axis
		}},
		{name: "steps", in: rows(12), runs: []int{1, 5}, out: "batch", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			steps := G.Must(G.Transpose(G.Must(G.Reshape(x, tensor.Shape{b, 3, 4})), 1, 0, 2))
			return G.Mul(G.Must(G.Slice(steps, G.S(1))), batchWeight(g, x.Dtype(), "W", 4, 2))
		}},
		{name: "vit", in: rows(3, 8, 8), runs: []int{1, 7}, out: "batch", tol64: 1e-9, build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			cfg := models.ViTConfig{Image: 8, Patch: 4, Channels: 3, Dim: 16, Depth: 2, Heads: 2, MLP: 12, Classes: 10}
			vit, err := models.NewViT(g, cfg, x.Dtype(), rand.New(rand.NewPCG(9, 9)))
			if err != nil {
				return nil, err
			}
			p, err := models.Patches(x, cfg.Patch)
			if err != nil {
				return nil, err
			}
			return vit.Forward(p, false)
		}},
	}
}

// refusedBatchCases are graphs whose export changes with the batch
// otherwise than onnxexport.ExportBatch can write, and a builder that fails.
func refusedBatchCases() []batchCase {
	return []batchCase{
		{name: "one-hot selector", in: func(b int) []int { return []int{2 * b, 3} }, refusal: `initializer "sel" (FLOAT [2 4] at batch 2), read by node "gemm" (Gemm): onnxexport: the ONNX export depends on the batch: it holds several values at batch 2`, build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			sel := make([]float64, 2*b*b)
			for i := 0; i < b; i++ {
				sel[i*2*b+2*i] = 1
			}
			return G.Mul(newLeaf(g, x.Dtype(), "sel", []int{b, 2 * b}, sel), x)
		}},
		{name: "batch-valued scale", in: rows(3), refusal: "its value at batch 3 is not the one at batch 2", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			return G.Mul(x, newLeaf(g, x.Dtype(), "scale", nil, []float64{float64(b)}))
		}},
		{name: "quadratic input", in: func(b int) []int { return []int{b * b, 3} }, refusal: "is not a*batch + c", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			return G.Tanh(x)
		}},
		{name: "structure", in: rows(3), refusal: "ONNX node", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			if b%2 == 0 {
				return G.Tanh(x)
			}
			return G.Sigmoid(x)
		}},
		{name: "builder error", in: rows(3), refusal: "building the graph at batch 3: no batch of 3", build: func(g *G.ExprGraph, x *G.Node, b int) (*G.Node, error) {
			if b == 3 {
				return nil, errors.New("no batch of 3")
			}
			return G.Tanh(x)
		}},
	}
}

// TestExportONNXBatch exports each case of batchCases once, in float32 and
// float64, and runs the one file in ONNX Runtime at two batch sizes: the
// output must be the compiled program's for the graph built at that batch,
// the input's first dimension "batch" and the output's c.out. No
// initializer may hold a dimension that grows with the batch.
func TestExportONNXBatch(t *testing.T) {
	onnxrt.Need(t)
	for _, c := range batchCases() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			m, err := c.export(dt)
			if err != nil {
				t.Fatalf("%s %v: %v", c.name, dt, err)
			}
			if in, out := m.Graph.Inputs[0], m.Graph.Outputs[0]; len(in.Params) == 0 || in.Params[0] != "batch" || len(out.Params) == 0 || out.Params[0] != c.out {
				t.Errorf("%s %v: input %+v, output %+v: want first dimensions batch and %s", c.name, dt, in, out, c.out)
			}
			b, err := m.Marshal()
			if err != nil {
				t.Fatalf("%s %v: %v", c.name, dt, err)
			}
			path := filepath.Join(t.TempDir(), "model.onnx")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, batch := range c.runs {
				checkBatchRun(t, c, dt, path, batch)
			}
		}
	}
}

// checkBatchRun runs the exported file of c at batch in ONNX Runtime and
// compares its output with the compiled program's for c built at batch.
func checkBatchRun(t *testing.T, c batchCase, dt tensor.Dtype, path string, batch int) {
	t.Helper()
	g, x, out, err := c.graph(batch, dt)
	if err != nil {
		t.Fatalf("%s at batch %d: %v", c.name, batch, err)
	}
	want := compileForward(t, g, []*G.Node{x}, out)
	data, err := lower.HostData(x)
	if err != nil {
		t.Fatal(err)
	}
	res, err := onnxrt.Run(path, map[string]onnxrt.Tensor{"x": {Dims: x.Shape(), Data: data}})
	if err != nil {
		t.Fatalf("%s %v at batch %d: %v", c.name, dt, batch, err)
	}
	y := res["y"]
	if !slices.Equal(y.Dims, []int(out.Shape())) {
		t.Errorf("%s %v at batch %d: ONNX Runtime's output has dimensions %v, the node %v", c.name, dt, batch, y.Dims, out.Shape())
	}
	tol := exportTolerance(dt)
	if dt == tensor.Float64 && c.tol64 > 0 {
		tol = c.tol64
	}
	if got := testval.Floats(y.Data); !(testval.MaxRel(got, want) <= tol) {
		t.Errorf("%s %v at batch %d: ONNX Runtime differs from the program by %.3g (tolerance %g)\n got %v\nwant %v", c.name, dt, batch, testval.MaxRel(got, want), tol, trim(got), trim(want))
	}
}

// TestExportONNXBatchRefusals checks that graphs whose export changes with
// the batch otherwise than by shapes (a constant of several values, a
// dimension not affine in the batch, another node) are refused with
// onnxexport.ErrBatchDependent naming what changes, and a builder's error
// is passed on.
func TestExportONNXBatchRefusals(t *testing.T) {
	for _, c := range refusedBatchCases() {
		_, err := c.export(tensor.Float32)
		if err == nil || !strings.Contains(err.Error(), c.refusal) || !strings.HasPrefix(err.Error(), "onnxexport: ExportBatch: ") {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.refusal)
		}
		if builderErr := c.name == "builder error"; errors.Is(err, onnxexport.ErrBatchDependent) == builderErr {
			t.Errorf("%s: error %v: errors.Is(onnxexport.ErrBatchDependent) is %v", c.name, err, !builderErr)
		}
	}
	if _, err := onnxexport.ExportBatch(nil); err == nil {
		t.Error("onnxexport.ExportBatch(nil) gave no error")
	}
}
