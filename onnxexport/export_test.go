package onnxexport

import (
	"errors"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/onnx"
)

// The tests that run the exports in ONNX Runtime against the compiled
// program (TestExportONNX*) are program's: they use its table of graph
// cases and compile each graph. These check what needs no program.

// TestExportRefusesPooling checks that a max pooling ONNX has no
// equivalent of (gorgonia's four paddings) is refused naming the reason.
func TestExportRefusesPooling(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(1, 1, 4, 4), G.WithName("x"), G.WithInit(G.Zeroes()))
	y := G.Must(G.MaxPool2D(x, tensor.Shape{2, 2}, []int{1, 0, 0, 1}, []int{2, 2}))
	_, err := Export(g, Config{Inputs: []*G.Node{x}, Outputs: []*G.Node{y}})
	if !errors.Is(err, ErrNotExportable) || !strings.Contains(err.Error(), "four paddings") {
		t.Errorf("error %v, want ErrNotExportable naming the four paddings", err)
	}
}

// broadcastZeros builds, at batch b, zeros of shape (b, 1, 3) plus a
// weight, concatenated with the input (b, 2, 3) and reshaped to (b, 9):
// Expand, Concat and a Reshape target that grows with the batch.
func broadcastZeros(b int) (*G.ExprGraph, Config, error) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 3, G.WithShape(b, 2, 3), G.WithName("x"), G.WithInit(G.Zeroes()))
	zeros := G.NewTensor(g, tensor.Float32, 3, G.WithShape(b, 1, 3), G.WithName("zeros"), G.WithInit(G.Zeroes()))
	cls := G.NewTensor(g, tensor.Float32, 3, G.WithShape(1, 1, 3), G.WithName("cls"), G.WithInit(G.Ones()))
	h, err := G.BroadcastAdd(zeros, cls, nil, []byte{0})
	if err != nil {
		return nil, Config{}, err
	}
	out, err := G.Reshape(G.Must(G.Concat(1, h, x)), tensor.Shape{b, 9})
	return g, Config{Inputs: []*G.Node{x}, Outputs: []*G.Node{out}, OutputNames: []string{"y"}}, err
}

// TestExportBatchSame checks that the model does not depend on the
// batch: two exports give the same bytes, the batch's zeros are no
// initializer (they are expanded from one value), and the last Reshape's
// target is (-1, 9).
func TestExportBatchSame(t *testing.T) {
	var files [][]byte
	for range 2 {
		m, err := ExportBatch(broadcastZeros)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
		var targets [][]int64
		for _, init := range m.Graph.Initializers {
			if init.Name == "zeros" {
				t.Errorf("initializer %s %v: the zeros of a batch", init.Name, init.Dims)
			}
			if init.Type == onnx.Int64 {
				targets = append(targets, int64s(&init))
			}
		}
		if !slices.ContainsFunc(targets, func(v []int64) bool { return slices.Equal(v, []int64{-1, 9}) }) {
			t.Errorf("INT64 initializers %v: no Reshape target (-1, 9), the output's", targets)
		}
	}
	if string(files[0]) != string(files[1]) {
		t.Error("two exports differ")
	}
}
