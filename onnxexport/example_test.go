package onnxexport_test

import (
	"fmt"
	"log"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/onnxexport"
)

// ExampleExport writes a dense layer with a fused bias and ReLU as an
// ONNX model: the input x becomes the graph's input, the weight and the
// bias initializers, and each op the ONNX nodes of its exporter.
func ExampleExport() {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"), G.WithInit(G.Zeroes()))
	w := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 4), G.WithName("W"), G.WithInit(G.Ones()))
	b := G.NewMatrix(g, tensor.Float32, G.WithShape(1, 4), G.WithName("b"), G.WithInit(G.Zeroes()))
	y := G.Must(fused.BiasAct(G.Must(G.Mul(x, w)), b, fused.ReLU))

	m, err := onnxexport.Export(g, onnxexport.Config{Inputs: []*G.Node{x}, Outputs: []*G.Node{y}, OutputNames: []string{"y"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range m.Graph.Nodes {
		fmt.Println(n.OpType, n.Inputs, "->", n.Outputs)
	}
	for _, t := range m.Graph.Initializers {
		fmt.Println("initializer", t.Name, t.Type, t.Dims)
	}
	fmt.Println("opset", m.Opset)
	// Output:
	// Gemm [x W] -> [gemm]
	// Add [gemm b] -> [add]
	// Relu [add] -> [relu]
	// Identity [relu] -> [y]
	// initializer W FLOAT [3 4]
	// initializer b FLOAT [1 4]
	// opset 17
}

// ExampleExportBatch writes a model whose input is a batch of 2x3
// matrices as one ONNX model for any batch: the function builds the graph
// at the batch it is given, the same weights each time. The Reshape to
// (batch, 6) gets the target (-1, 6), and the input and output the
// symbolic first dimension "batch".
func ExampleExportBatch() {
	build := func(batch int) (*G.ExprGraph, onnxexport.Config, error) {
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(batch, 2, 3), G.WithName("x"), G.WithInit(G.Zeroes()))
		w := G.NewMatrix(g, tensor.Float32, G.WithShape(6, 4), G.WithName("W"), G.WithInit(G.Ones()))
		flat, err := G.Reshape(x, tensor.Shape{batch, 6})
		if err != nil {
			return nil, onnxexport.Config{}, err
		}
		y, err := G.Mul(flat, w)
		return g, onnxexport.Config{Inputs: []*G.Node{x}, Outputs: []*G.Node{y}, OutputNames: []string{"y"}}, err
	}
	m, err := onnxexport.ExportBatch(build)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range m.Graph.Nodes {
		fmt.Println(n.OpType, n.Inputs, "->", n.Outputs)
	}
	for _, v := range append(m.Graph.Inputs, m.Graph.Outputs...) {
		fmt.Printf("%s %q %v\n", v.Name, v.Params, v.Dims)
	}
	// Output:
	// Reshape [x shape] -> [reshape]
	// Gemm [reshape W] -> [gemm]
	// Identity [gemm] -> [y]
	// x ["batch" "" ""] [-1 2 3]
	// y ["batch" ""] [-1 4]
}
