// Package layercheck holds the test of the module's layering: imports point
// down only. Every package of the module has a layer (the table layers in
// its test, from the leaves the library shares, through the manifolds, the
// backend and its implementations, the optimizers, the graph's ops, layers
// and models, the compiler, to training, the test harnesses and the
// commands), and imports only packages of lower layers; a package with no
// layer fails the test, which says where it fits. Besides, its rules say
// what no package may reach even through others: the op layer (fused) runs
// its kernels through package backend and imports no concrete backend; the
// manifolds, the layers and the models (manifold, param, nn, models) do not
// import the optimizers, which package paramopt joins to them from above;
// the optimizers (optim) import neither Gorgonia nor a backend; the
// compiler (program, over its lowering, program/lower) and the ONNX export
// (onnxexport) do not import each other, both reading Gorgonia's graphs
// through internal/gorgoniaop. Its test reads each package's imports from
// go list, for the default build, a build without cgo and one with the
// openblas tag. It has no code of its own.
package layercheck
