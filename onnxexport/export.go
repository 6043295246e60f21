package onnxexport

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/onnx"
)

// Opset is the version of ONNX's default operator set that Export
// writes: 17, the first with LayerNormalization.
const Opset = 17

// ErrNotExportable reports a graph with an op that Export has no entry
// for (see exporters).
var ErrNotExportable = errors.New("onnxexport: no ONNX export")

// Config says what Export writes.
type Config struct {
	// Inputs are the leaves that become the ONNX graph's inputs, in order;
	// every other leaf the outputs need (parameters, constants) becomes an
	// initializer holding its value now.
	Inputs []*G.Node
	// InputNames name the inputs in the ONNX graph (default: the nodes'
	// names).
	InputNames []string
	// Outputs are the nodes the model computes (logits), and OutputNames
	// their names in the ONNX graph (default: output0, output1, ...).
	Outputs     []*G.Node
	OutputNames []string
	// Float32 writes a float64 graph as float32: its weights rounded, its
	// inputs and outputs FLOAT. By default the ONNX model keeps the graph's
	// element type (DOUBLE for float64), computing what a program of
	// package program compiled from the graph computes.
	Float32 bool
}

// Export returns the forward computation of cfg.Outputs in g as an ONNX
// model of opset Opset. It walks the nodes those outputs need, in the
// order program.Compile takes them (as with NoGrad: gorgoniaop.Order), and
// writes each op as the ONNX nodes of its entry in exporters, the table
// keyed by op type as the compiler names them
// (gorgonia's unexported type names, and the fused ops' type names); an op
// without an entry is refused with ErrNotExportable naming the op type and
// the node. The caller adds metadata (Model.Metadata, Model.DocString).
func Export(g *G.ExprGraph, cfg Config) (*onnx.Model, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	order, err := gorgoniaop.Order(g, cfg.Outputs, nil)
	if err != nil {
		return nil, fmt.Errorf("onnxexport: %w", err)
	}
	x := &exporter{g: g, names: map[*G.Node]string{}, used: map[string]bool{}, inputs: map[*G.Node]int{}}
	switch dt := cfg.Outputs[0].Dtype(); {
	case dt == tensor.Float32 || cfg.Float32:
		x.dt = onnx.Float
	case dt == tensor.Float64:
		x.dt = onnx.Double
	}
	for i, n := range cfg.Inputs {
		if n == nil || n.Op() != nil {
			return nil, fmt.Errorf("onnxexport: Export: input %v is not a leaf node", n)
		}
		x.inputs[n] = i
	}
	for _, n := range order {
		if dt := n.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
			return nil, fmt.Errorf("onnxexport: Export: node %q holds %v: only float32 and float64 are supported", n.Name(), dt)
		} else if dt != cfg.Outputs[0].Dtype() {
			return nil, fmt.Errorf("onnxexport: Export: node %q holds %v, the outputs %v: one element type throughout", n.Name(), dt, cfg.Outputs[0].Dtype())
		}
		if err := x.node(n, cfg); err != nil {
			return nil, err
		}
	}
	for _, n := range cfg.Inputs {
		if _, ok := x.names[n]; !ok {
			return nil, fmt.Errorf("onnxexport: Export: the outputs do not depend on input %q", n.Name())
		}
	}
	if err := x.outputs(cfg); err != nil {
		return nil, err
	}
	return &onnx.Model{Opset: Opset, ProducerName: "orthonet", Graph: x.m}, nil
}

// check reports an error for a config Export cannot follow: no
// outputs, a nil one, or names that do not match the nodes.
func (cfg Config) check() error {
	if len(cfg.Outputs) == 0 {
		return errors.New("onnxexport: Export: no outputs")
	}
	if len(cfg.InputNames) > 0 && len(cfg.InputNames) != len(cfg.Inputs) {
		return fmt.Errorf("onnxexport: Export: %d input names for %d inputs", len(cfg.InputNames), len(cfg.Inputs))
	}
	if len(cfg.OutputNames) > 0 && len(cfg.OutputNames) != len(cfg.Outputs) {
		return fmt.Errorf("onnxexport: Export: %d output names for %d outputs", len(cfg.OutputNames), len(cfg.Outputs))
	}
	for _, n := range cfg.Outputs {
		if n == nil {
			return errors.New("onnxexport: Export: an output is nil")
		}
	}
	return nil
}

// outputs names the graph's outputs: an Identity of each output node's
// value under its name.
func (x *exporter) outputs(cfg Config) error {
	for i, n := range cfg.Outputs {
		name := fmt.Sprintf("output%d", i)
		if len(cfg.OutputNames) > 0 {
			name = cfg.OutputNames[i]
		}
		if x.used[name] {
			return fmt.Errorf("onnxexport: Export: output name %q is taken by another value", name)
		}
		x.used[name] = true
		x.m.Nodes = append(x.m.Nodes, onnx.Node{Name: "output:" + name, OpType: "Identity", Inputs: []string{x.names[n]}, Outputs: []string{name}})
		x.m.Outputs = append(x.m.Outputs, onnx.ValueInfo{Name: name, Type: x.dt, Dims: onnx.Dims64(n.Shape())})
	}
	return nil
}

// exporter holds the state of one Export.
type exporter struct {
	g      *G.ExprGraph
	m      onnx.Graph
	dt     onnx.DataType      // of every float value
	names  map[*G.Node]string // the ONNX value holding each exported node's value
	used   map[string]bool    // value and node names taken
	inputs map[*G.Node]int
	count  int
}

// fresh returns an unused name made from base.
func (x *exporter) fresh(base string) string {
	name := base
	for x.used[name] {
		x.count++
		name = fmt.Sprintf("%s_%d", base, x.count)
	}
	x.used[name] = true
	return name
}

// op appends an ONNX node of type opType and returns its output's name.
func (x *exporter) op(opType string, inputs []string, attrs ...onnx.Attr) string {
	out := x.fresh(strings.ToLower(opType))
	x.m.Nodes = append(x.m.Nodes, onnx.Node{Name: out, OpType: opType, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
	return out
}

// ints returns the name of a new INT64 initializer holding v (a shape, axes).
func (x *exporter) ints(base string, v ...int) string {
	name := x.fresh(base)
	vals := make([]int64, len(v))
	for i, d := range v {
		vals[i] = int64(d)
	}
	x.m.Initializers = append(x.m.Initializers, onnx.Int64Tensor(name, []int64{int64(len(v))}, vals))
	return name
}

// scalar returns the name of a new scalar initializer of the graph's float
// type holding v.
func (x *exporter) scalar(v float64) string {
	name := x.fresh("const")
	x.m.Initializers = append(x.m.Initializers, x.tensor(name, nil, []float64{v}))
	return name
}

// tensor returns an initializer of the graph's float type.
func (x *exporter) tensor(name string, dims []int, v any) onnx.Tensor {
	d := onnx.Dims64(dims)
	switch v := v.(type) {
	case []float32:
		if x.dt == onnx.Double {
			return onnx.DoubleTensor(name, d, convert[float64](v))
		}
		return onnx.FloatTensor(name, d, v)
	case []float64:
		if x.dt == onnx.Float {
			return onnx.FloatTensor(name, d, convert[float32](v))
		}
		return onnx.DoubleTensor(name, d, v)
	}
	panic(fmt.Sprintf("onnxexport: tensor of %T", v)) // hostData returns only these
}

// hostData returns a copy of a leaf's float value as a host slice,
// []float32 or []float64.
func hostData(n *G.Node) (any, error) {
	data, ok, err := gorgoniaop.FloatData(n)
	if err == nil && !ok {
		err = fmt.Errorf("leaf %q holds %T, want float32 or float64 values", n.Name(), n.Value().Data())
	}
	if err != nil {
		return nil, fmt.Errorf("onnxexport: %w", err)
	}
	return data, nil
}

// convert returns v's values as a new []T.
func convert[T, S linalg.Float](v []S) []T {
	w := make([]T, len(v))
	linalg.Convert(w, v)
	return w
}

// reshape returns value v, of shape from, reshaped to shape to: v itself
// when the shapes are equal.
func (x *exporter) reshape(v string, from, to tensor.Shape) string {
	if slices.Equal(from, to) {
		return v
	}
	return x.reshapeTo(v, to)
}

// reshapeTo returns value v reshaped to shape to.
func (x *exporter) reshapeTo(v string, to tensor.Shape) string {
	return x.op("Reshape", []string{v, x.ints("shape", to...)})
}

// node exports one node: a leaf as a graph input or an initializer, an op
// by its entry in exporters.
func (x *exporter) node(n *G.Node, cfg Config) error {
	if n.Op() == nil {
		return x.leaf(n, cfg)
	}
	ch := gorgoniaop.Args(n)
	in := make([]string, len(ch))
	for i, c := range ch {
		in[i] = x.names[c]
	}
	name := gorgoniaop.OpName(n.Op())
	export, ok := exporters[name]
	if !ok {
		return fmt.Errorf("%w for op type %s (%v) at node %q: add an entry for it to onnxexport's exporters", ErrNotExportable, name, n.Op(), n.Name())
	}
	out, err := export(x, n, ch, in)
	if err != nil {
		if errors.Is(err, ErrNotExportable) {
			return err
		}
		return fmt.Errorf("onnxexport: exporting node %q (op %v, %s) to ONNX: %w", n.Name(), n.Op(), name, err)
	}
	x.names[n] = out
	return nil
}

// leaf exports an input as a graph input and any other leaf (a parameter,
// a constant) as an initializer holding its current value.
func (x *exporter) leaf(n *G.Node, cfg Config) error {
	if i, ok := x.inputs[n]; ok {
		name := n.Name()
		if len(cfg.InputNames) > 0 {
			name = cfg.InputNames[i]
		}
		if x.used[name] {
			return fmt.Errorf("onnxexport: Export: input name %q is taken", name)
		}
		x.used[name] = true
		x.names[n] = name
		x.m.Inputs = append(x.m.Inputs, onnx.ValueInfo{Name: name, Type: x.dt, Dims: onnx.Dims64(n.Shape())})
		return nil
	}
	data, err := hostData(n)
	if err != nil {
		return err
	}
	name := x.fresh(n.Name())
	x.m.Initializers = append(x.m.Initializers, x.tensor(name, n.Shape(), data))
	x.names[n] = name
	return nil
}

// exporters write each op type as ONNX nodes, one entry per op type, keyed
// as the compiler's lowerings are (gorgoniaop.OpName). An entry gets the
// node, its arguments and the ONNX values holding them, and returns the
// ONNX value holding the node's value, of the node's shape. A new op is
// exportable once it has an entry here (and a case in export_test.go).
var exporters = map[gorgoniaop.OpType]func(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error){
	gorgoniaop.ConstantScalar: exportConstant,
	gorgoniaop.ConstantTensor: exportConstant,
	gorgoniaop.SizeOp:         exportSize,
	gorgoniaop.ReshapeOp:      exportReshape,
	gorgoniaop.SliceOp:        exportSlice,
	gorgoniaop.TransposeOp:    exportTranspose,
	gorgoniaop.ElemUnaryOp:    exportUnary,
	gorgoniaop.ElemBinOp:      exportBinary,
	gorgoniaop.LinAlgBinOp:    exportLinAlg,
	gorgoniaop.SoftmaxOp:      exportSoftmax,
	gorgoniaop.RepeatOp:       exportRepeat,
	gorgoniaop.ConcatOp:       exportConcat,
	gorgoniaop.SumOp:          exportSum,
	gorgoniaop.MaxOp:          exportMax,
	gorgoniaop.BiasActOp:      exportBiasAct,
	gorgoniaop.GELUOp:         exportGELU,
	gorgoniaop.LayerNormOp:    exportLayerNorm,
	gorgoniaop.AttentionOp:    exportAttention,
	// Image ops (export_conv.go).
	gorgoniaop.Im2colOp:            exportIm2col,
	gorgoniaop.MaxPoolOp:           exportMaxPool,
	gorgoniaop.GlobalAveragePoolOp: exportGlobalAvgPool,
}

func exportReshape(x *exporter, n *G.Node, _ []*G.Node, in []string) (string, error) {
	return x.reshapeTo(in[0], n.Shape()), nil
}

func exportSum(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	return exportReduce(x, n, args, in, "ReduceSum")
}

func exportMax(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	return exportReduce(x, n, args, in, "ReduceMax")
}

func exportGELU(x *exporter, _ *G.Node, _ []*G.Node, in []string) (string, error) {
	return x.gelu(in[0]), nil
}

func exportConstant(x *exporter, n *G.Node, _ []*G.Node, _ []string) (string, error) {
	data, err := hostData(n)
	if err != nil {
		return "", err
	}
	name := x.fresh("const")
	x.m.Initializers = append(x.m.Initializers, x.tensor(name, n.Shape(), data))
	return name, nil
}

func exportSize(x *exporter, n *G.Node, args []*G.Node, _ []string) (string, error) {
	v, err := gorgoniaop.SizeOf(n.Op(), args[0].Shape())
	if err != nil {
		return "", err
	}
	return x.reshape(x.scalar(v), tensor.Shape{}, n.Shape()), nil
}

// exportSlice writes a slice as Slice along its axis, then Reshape where
// gorgonia drops the axis (a single index).
func exportSlice(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	shape := args[0].Shape()
	w, err := gorgoniaop.SliceOf(n.Op(), shape)
	if err != nil {
		return "", err
	}
	axis, err := gorgoniaop.IntField(n.Op(), "along")
	if err != nil {
		return "", err
	}
	stride := shape.CalcStrides()[axis]
	start, step, count := w.Off/stride, w.Strides[axis]/stride, w.Shape[axis]
	if start == 0 && step == 1 && count == shape[axis] { // the whole axis (gorgonia's nil slice)
		return x.reshape(in[0], shape, n.Shape()), nil
	}
	end := start + (count-1)*step + 1 // ONNX takes ceil((end-start)/step) elements: count
	out := x.op("Slice", []string{in[0], x.ints("starts", start), x.ints("ends", end), x.ints("axes", axis), x.ints("steps", step)})
	return x.reshape(out, w.Shape, n.Shape()), nil
}

func exportTranspose(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	pattern, err := gorgoniaop.TransposeOf(n.Op(), args[0].Shape())
	if err != nil {
		return "", err
	}
	perm := make([]int64, len(pattern))
	for i, p := range pattern {
		perm[i] = int64(p)
	}
	return x.op("Transpose", in, onnx.Ints("perm", perm...)), nil
}

// unaryONNX maps the compiler's unary functions to ONNX ops; those ONNX has
// no op for are composed in exportUnary.
var unaryONNX = map[gorgoniaop.UnaryFunc]string{
	gorgoniaop.Abs: "Abs", gorgoniaop.Sign: "Sign", gorgoniaop.Ceil: "Ceil", gorgoniaop.Floor: "Floor",
	gorgoniaop.Sin: "Sin", gorgoniaop.Cos: "Cos", gorgoniaop.Exp: "Exp", gorgoniaop.Ln: "Log", gorgoniaop.Neg: "Neg",
	gorgoniaop.Sqrt: "Sqrt", gorgoniaop.Inv: "Reciprocal", gorgoniaop.Tanh: "Tanh", gorgoniaop.Sigmoid: "Sigmoid",
	gorgoniaop.Softplus: "Softplus",
}

func exportUnary(x *exporter, n *G.Node, _ []*G.Node, in []string) (string, error) {
	name := gorgoniaop.UnaryOf(n.Op())
	v := in[0]
	if name == gorgoniaop.Softplus && x.dt == onnx.Double {
		// ONNX Runtime (1.24) has no DOUBLE Softplus: max(x, 0) + log(1 + exp(-|x|)).
		e := x.op("Exp", []string{x.op("Neg", []string{x.op("Abs", in)})})
		return x.op("Add", []string{x.op("Relu", in), x.op("Log", []string{x.op("Add", []string{e, x.scalar(1)})})}), nil
	}
	if op, ok := unaryONNX[name]; ok {
		return x.op(op, in), nil
	}
	switch name {
	case gorgoniaop.Square:
		return x.op("Mul", []string{v, v}), nil
	case gorgoniaop.Cube:
		return x.op("Mul", []string{v, x.op("Mul", []string{v, v})}), nil
	case gorgoniaop.InvSqrt:
		return x.op("Reciprocal", []string{x.op("Sqrt", in)}), nil
	case gorgoniaop.Log2:
		return x.op("Div", []string{x.op("Log", in), x.scalar(math.Ln2)}), nil
	case gorgoniaop.Log1p:
		return x.op("Log", []string{x.op("Add", []string{v, x.scalar(1)})}), nil
	case gorgoniaop.Expm1:
		return x.op("Sub", []string{x.op("Exp", in), x.scalar(1)}), nil
	}
	return "", fmt.Errorf("%w for unary function %q at node %q", ErrNotExportable, name, n.Name())
}

// binaryONNX maps the compiler's binary functions to ONNX ops.
var binaryONNX = map[gorgoniaop.BinaryFunc]binaryExport{
	gorgoniaop.Add: {op: "Add"}, gorgoniaop.Sub: {op: "Sub"}, gorgoniaop.Mul: {op: "Mul"}, gorgoniaop.Div: {op: "Div"},
	gorgoniaop.Pow: {op: "Pow"},
	gorgoniaop.Lt:  {op: "Less", compare: true}, gorgoniaop.Gt: {op: "Greater", compare: true},
	gorgoniaop.Lte: {op: "LessOrEqual", compare: true}, gorgoniaop.Gte: {op: "GreaterOrEqual", compare: true},
	gorgoniaop.Eq: {op: "Equal", compare: true}, gorgoniaop.Ne: {op: "Equal", not: true, compare: true},
}

// binaryExport is an entry of binaryONNX: the ONNX op, whether its
// boolean result is negated (Not), and whether it is a comparison, whose
// boolean exportBinary casts back to 0 and 1 in the element type.
type binaryExport struct {
	op           string
	not, compare bool
}

func exportBinary(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	sym := gorgoniaop.BinaryOf(n.Op())
	out := n.Shape()
	// The compiler takes operands of the output's size, or scalars: give
	// ONNX's broadcasting the output's shape or a scalar.
	ops := make([]string, 2)
	for i, a := range args {
		switch s := a.Shape(); {
		case slices.Equal(s, out):
			ops[i] = in[i]
		case s.TotalSize() == 1 && out.TotalSize() != 1:
			ops[i] = x.reshape(in[i], s, nil)
		case s.TotalSize() == out.TotalSize():
			ops[i] = x.reshape(in[i], s, out)
		default:
			return "", fmt.Errorf("elementwise %s of shapes %v and %v into %v", sym, args[0].Shape(), args[1].Shape(), out)
		}
	}
	e, ok := binaryONNX[sym]
	if !ok {
		return "", fmt.Errorf("%w for binary function %q at node %q", ErrNotExportable, sym, n.Name())
	}
	v := x.op(e.op, ops)
	if e.not {
		v = x.op("Not", []string{v})
	}
	if e.compare {
		v = x.op("Cast", []string{v}, onnx.Int("to", int64(x.dt)))
	}
	return v, nil
}

func exportLinAlg(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	kind, tA, tB, err := gorgoniaop.LinAlgOf(n.Op())
	if err != nil {
		return "", err
	}
	a, b := in[0], in[1]
	as, bs := args[0].Shape(), args[1].Shape()
	var v string
	var shape tensor.Shape // of v, as ONNX computes it
	switch kind {
	case gorgoniaop.MatMul:
		v, shape, err = x.matMul(a, b, as, bs, tA, tB)
	case gorgoniaop.MatVecMul:
		v, shape, err = x.matVecMul(a, b, as, bs, tA)
	case gorgoniaop.VecDot:
		shape = tensor.Shape{}
		v = x.op("MatMul", []string{a, b})
	case gorgoniaop.OuterProd:
		shape = tensor.Shape{as.TotalSize(), bs.TotalSize()}
		v = x.op("MatMul", []string{x.reshape(a, as, tensor.Shape{as.TotalSize(), 1}), x.reshape(b, bs, tensor.Shape{1, bs.TotalSize()})})
	case gorgoniaop.BatchedMatMul:
		v, shape, err = x.batchedMatMul(a, b, as, bs, tA, tB)
	default:
		return "", fmt.Errorf("%w for linear algebra op kind %d (%v) at node %q", ErrNotExportable, kind, n.Op(), n.Name())
	}
	if err != nil {
		return "", err
	}
	return x.reshape(v, shape, n.Shape()), nil
}

// ONNX Runtime (1.24) fuses a Transpose into a following MatMul even in
// double precision, where the fused kernel does not exist and the model
// then fails to load: DOUBLE products with a transposed operand are
// written as Einsum instead (matVecMul, batchedMatMul).

// swap transposes the last two axes of value v of rank r.
func (x *exporter) swap(v string, r int) string {
	perm := make([]int64, r)
	for i := range perm {
		perm[i] = int64(i)
	}
	perm[r-2], perm[r-1] = perm[r-1], perm[r-2]
	return x.op("Transpose", []string{v}, onnx.Ints("perm", perm...))
}

// matMul writes the product of matrices a and b, each transposed where
// asked, as Gemm; it returns the value and its shape.
func (x *exporter) matMul(a, b string, as, bs tensor.Shape, tA, tB bool) (string, tensor.Shape, error) {
	if len(as) != 2 || len(bs) != 2 {
		return "", nil, fmt.Errorf("matrix product of shapes %v and %v", as, bs)
	}
	shape := tensor.Shape{as[0], bs[1]}
	var attrs []onnx.Attr
	if tA {
		shape[0] = as[1]
		attrs = append(attrs, onnx.Int("transA", 1))
	}
	if tB {
		shape[1] = bs[0]
		attrs = append(attrs, onnx.Int("transB", 1))
	}
	return x.op("Gemm", []string{a, b}, attrs...), shape, nil
}

// matVecMul writes the product of matrix a (transposed where asked) and
// vector b.
func (x *exporter) matVecMul(a, b string, as, bs tensor.Shape, tA bool) (string, tensor.Shape, error) {
	if len(as) != 2 {
		return "", nil, fmt.Errorf("matrix-vector product of shapes %v and %v", as, bs)
	}
	shape := tensor.Shape{as[0]}
	if tA {
		shape[0] = as[1]
		if x.dt == onnx.Double {
			return x.op("Einsum", []string{a, b}, onnx.String("equation", "ji,j->i")), shape, nil
		}
		a = x.swap(a, 2)
	}
	return x.op("MatMul", []string{a, b}), shape, nil
}

// batchedMatMul writes the products of the matrices a and b hold in their
// last two axes, each transposed where asked.
func (x *exporter) batchedMatMul(a, b string, as, bs tensor.Shape, tA, tB bool) (string, tensor.Shape, error) {
	r := len(as)
	if r < 3 || len(bs) != r {
		return "", nil, fmt.Errorf("batched product of shapes %v and %v", as, bs)
	}
	shape := append(slices.Clone(as[:r-1]), bs[r-1])
	if tA {
		shape[r-2] = as[r-1]
	}
	if tB {
		shape[r-1] = bs[r-2]
	}
	if x.dt == onnx.Double && (tA || tB) {
		eq := map[bool]string{false: "...ij", true: "...ji"}[tA] + "," + map[bool]string{false: "...jk", true: "...kj"}[tB] + "->...ik"
		return x.op("Einsum", []string{a, b}, onnx.String("equation", eq)), shape, nil
	}
	if tA {
		a = x.swap(a, r)
	}
	if tB {
		b = x.swap(b, r)
	}
	return x.op("MatMul", []string{a, b}), shape, nil
}

func exportSoftmax(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	s := args[0].Shape()
	isLog, axis, err := gorgoniaop.SoftmaxOf(n.Op(), s) // the axis the compiler takes
	if err != nil {
		return "", err
	}
	kind := "Softmax"
	if isLog {
		kind = "LogSoftmax"
	}
	return x.op(kind, in, onnx.Int("axis", int64(axis))), nil
}

// exportRepeat writes gorgonia's repeatOp (every element repeated along an
// axis, as the compiler lowers it) as Reshape, Expand and Reshape.
func exportRepeat(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	along, err := gorgoniaop.IntField(n.Op(), "along")
	if err != nil {
		return "", err
	}
	os := n.Shape()
	if along < 0 || along >= len(os) {
		return "", fmt.Errorf("repeat along axis %d into shape %v", along, os)
	}
	xs := make(tensor.Shape, len(os)) // the argument's shape, padded with unit axes to the output's rank
	for i := range xs {
		xs[i] = 1
	}
	copy(xs, args[0].Shape())
	rep := os[along] / xs[along]
	if xs.TotalSize() != args[0].Shape().TotalSize() || xs[along]*rep != os[along] {
		return "", fmt.Errorf("repeat of shape %v into %v along %d", args[0].Shape(), os, along)
	}
	split := slices.Insert(slices.Clone(xs), along+1, 1)
	v := x.reshape(in[0], args[0].Shape(), split)
	split[along+1] = rep
	v = x.op("Expand", []string{v, x.ints("shape", split...)})
	return x.reshapeTo(v, os), nil
}

func exportConcat(x *exporter, n *G.Node, _ []*G.Node, in []string) (string, error) {
	axis, err := gorgoniaop.IntField(n.Op(), "axis")
	if err != nil {
		return "", err
	}
	return x.op("Concat", in, onnx.Int("axis", int64(axis))), nil
}

// exportReduce writes Sum or Max along axes (all of them when none are
// given), then Reshape to the node's shape.
func exportReduce(x *exporter, n *G.Node, args []*G.Node, in []string, op string) (string, error) {
	along, err := gorgoniaop.IntsField(n.Op(), "along")
	if err != nil {
		return "", err
	}
	s := args[0].Shape()
	if len(along) == 0 {
		for i := range s {
			along = append(along, i)
		}
	}
	for _, a := range along {
		if a < 0 || a >= len(s) {
			return "", fmt.Errorf("reduction along %v of shape %v", along, s)
		}
	}
	var kept tensor.Shape // the shape ONNX gives the result
	for i, d := range s {
		if !slices.Contains(along, i) {
			kept = append(kept, d)
		}
	}
	var v string
	if op == "ReduceSum" { // axes is an input from opset 13, an attribute of ReduceMax until opset 18
		v = x.op(op, []string{in[0], x.ints("axes", along...)}, onnx.Int("keepdims", 0))
	} else {
		axes := make([]int64, len(along))
		for i, a := range along {
			axes[i] = int64(a)
		}
		v = x.op(op, in, onnx.Ints("axes", axes...), onnx.Int("keepdims", 0))
	}
	if kept == nil {
		kept = tensor.Shape{}
	}
	return x.reshape(v, kept, n.Shape()), nil
}

// gelu writes the tanh form of GELU, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715
// x^3))), which opset 17 has no op for.
func (x *exporter) gelu(v string) string {
	cube := x.op("Mul", []string{v, x.op("Mul", []string{v, v})})
	inner := x.op("Add", []string{v, x.op("Mul", []string{cube, x.scalar(0.044715)})})
	t := x.op("Tanh", []string{x.op("Mul", []string{inner, x.scalar(math.Sqrt(2 / math.Pi))})})
	half := x.op("Mul", []string{v, x.scalar(0.5)})
	return x.op("Mul", []string{half, x.op("Add", []string{t, x.scalar(1)})})
}

func exportBiasAct(x *exporter, n *G.Node, _ []*G.Node, in []string) (string, error) {
	op := n.Op().(*fused.BiasActOp)
	v := x.op("Add", in)
	switch op.Act {
	case fused.Identity:
		return v, nil
	case fused.ReLU:
		return x.op("Relu", []string{v}), nil
	case fused.GELUTanh:
		return x.gelu(v), nil
	}
	return "", fmt.Errorf("%w for activation %v of %v at node %q", ErrNotExportable, op.Act, op, n.Name())
}

// exportLayerNorm writes LayerNormalization over the last axis, its scale
// and bias reshaped from (1, d) to (d).
func exportLayerNorm(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	op := n.Op().(*fused.LayerNormOp)
	d := args[0].Shape()[1]
	gamma := x.reshape(in[1], args[1].Shape(), tensor.Shape{d})
	beta := x.reshape(in[2], args[2].Shape(), tensor.Shape{d})
	return x.op("LayerNormalization", []string{in[0], gamma, beta}, onnx.Int("axis", -1), onnx.Float32("epsilon", float32(op.Eps))), nil
}

// exportAttention writes fused attention over (seqs*tokens, d) queries,
// keys and values as per-head products: softmax(Q_h K_h^T Scale) V_h, the
// heads side by side.
func exportAttention(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	op := n.Op().(*fused.AttentionOp)
	s := args[0].Shape()
	rows, d := s[0], s[1]
	if op.Heads < 1 || d%op.Heads != 0 || op.Tokens < 1 || rows%op.Tokens != 0 {
		return "", fmt.Errorf("attention of %v with %d heads over %d tokens", s, op.Heads, op.Tokens)
	}
	seqs, dh := rows/op.Tokens, d/op.Heads
	heads := func(v string, perm ...int64) string { // (rows, d) -> (seqs, tokens, heads, dh), permuted
		return x.op("Transpose", []string{x.reshape(v, s, tensor.Shape{seqs, op.Tokens, op.Heads, dh})}, onnx.Ints("perm", perm...))
	}
	q := heads(in[0], 0, 2, 1, 3) // (seqs, heads, tokens, dh)
	k := heads(in[1], 0, 2, 3, 1) // (seqs, heads, dh, tokens)
	v := heads(in[2], 0, 2, 1, 3)
	scores := x.op("Mul", []string{x.op("MatMul", []string{q, k}), x.scalar(op.Scale)})
	p := x.op("Softmax", []string{scores}, onnx.Int("axis", -1))
	o := x.op("Transpose", []string{x.op("MatMul", []string{p, v})}, onnx.Ints("perm", 0, 2, 1, 3)) // (seqs, tokens, heads, dh)
	return x.reshapeTo(o, s), nil
}
