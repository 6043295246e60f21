// Package onnxexport writes the forward computation of a Gorgonia graph as
// an ONNX model (package onnx holds the file format): Export for a graph
// as built, ExportBatch for a model built at any batch size, its batch axis
// symbolic. It reads the graph as package program's compiler does (package
// internal/gorgoniaop) and exports what a compiled program computes, op
// for op; it does not import package program, nor program it.
package onnxexport
