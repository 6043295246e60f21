package program

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/onnxrt"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/onnx"
	"github.com/orthonet/orthonet/onnxexport"
	"github.com/orthonet/orthonet/program/lower"
)

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
