// Package onnx writes ONNX models: the protobuf messages of onnx.proto
// (ModelProto, GraphProto, NodeProto, TensorProto, ValueInfoProto,
// AttributeProto, StringStringEntryProto, OperatorSetIdProto) encoded by
// hand in protobuf's wire format, with no protobuf library. It knows the
// file format only; package onnxexport turns a Gorgonia graph into a
// Model.
//
// Marshal checks the graph before it encodes it: every node's inputs are
// graph inputs, initializers or outputs of earlier nodes (ONNX wants nodes
// in topological order), and no value is defined twice.
package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
)

// IRVersion is the ONNX IR version Marshal writes when Model.IRVersion is
// 0: 8, the IR of ONNX 1.12 and 1.13, which introduced opset 17.
const IRVersion = 8

// DataType is an element type of TensorProto.DataType.
type DataType int32

// The element types this package writes.
const (
	Float  DataType = 1
	Int64  DataType = 7
	Bool   DataType = 9
	Double DataType = 11
)

// dataTypes are the names onnx.proto gives the types this package writes,
// and the bytes of one element.
var dataTypes = map[DataType]struct {
	name string
	size int
}{Float: {"FLOAT", 4}, Int64: {"INT64", 8}, Bool: {"BOOL", 1}, Double: {"DOUBLE", 8}}

// String returns the name onnx.proto gives the type.
func (t DataType) String() string {
	if d, ok := dataTypes[t]; ok {
		return d.name
	}
	return fmt.Sprintf("DataType(%d)", int32(t))
}

// size returns the bytes of one element, or 0 for a type without a fixed
// width known here.
func (t DataType) size() int { return dataTypes[t].size }

// Model is an ONNX model: one graph of operators of the default domain at
// version Opset, and metadata.
type Model struct {
	// IRVersion is the IR version; 0 means IRVersion.
	IRVersion int64
	// Opset is the version of the default ONNX operator set the nodes use.
	Opset int64
	// ProducerName and ProducerVersion name what wrote the model.
	ProducerName, ProducerVersion string
	// DocString describes the model.
	DocString string
	// Graph is the computation.
	Graph Graph
	// Metadata is written as metadata_props, in sorted key order.
	Metadata map[string]string
}

// Graph is a GraphProto: nodes in topological order, their constant
// inputs as initializers, and the graph's inputs and outputs.
type Graph struct {
	Name         string
	Nodes        []Node
	Initializers []Tensor
	Inputs       []ValueInfo
	Outputs      []ValueInfo
	DocString    string
}

// Node is a NodeProto: one operator applied to named values.
type Node struct {
	Name    string
	OpType  string
	Inputs  []string
	Outputs []string
	Attrs   []Attr
}

// Attr is an AttributeProto holding one int, float or string, or a list of
// ints; build it with Int, Ints, Float or String.
type Attr struct {
	name string
	kind attrKind
	i    int64
	f    float32
	s    string
	ints []int64
}

// attrKind is AttributeProto.AttributeType.
type attrKind int32

const (
	attrFloat  attrKind = 1
	attrInt    attrKind = 2
	attrString attrKind = 3
	attrInts   attrKind = 7
)

// Int returns an integer attribute.
func Int(name string, v int64) Attr { return Attr{name: name, kind: attrInt, i: v} }

// Ints returns an attribute holding a list of integers.
func Ints(name string, v ...int64) Attr {
	return Attr{name: name, kind: attrInts, ints: append([]int64(nil), v...)}
}

// Float32 returns a float attribute.
func Float32(name string, v float32) Attr { return Attr{name: name, kind: attrFloat, f: v} }

// String returns a string attribute.
func String(name, v string) Attr { return Attr{name: name, kind: attrString, s: v} }

// Name returns the attribute's name.
func (a Attr) Name() string { return a.name }

// Tensor is a TensorProto: a named array of Type held as little-endian
// bytes (raw_data), row-major.
type Tensor struct {
	Name string
	Type DataType
	Dims []int64
	Raw  []byte
}

// ValueInfo is a ValueInfoProto of a tensor: a graph input's or output's
// name, element type and dimensions.
//
// A dimension is fixed (dim_value Dims[i]) unless Params names it: a
// non-empty Params[i] is written as the symbolic dimension dim_param
// Params[i] (Dims[i] is then not written), as torch.onnx's dynamic_axes
// writes a batch axis, so that one file takes any size there. Params is nil
// or as long as Dims.
type ValueInfo struct {
	Name   string
	Type   DataType
	Dims   []int64
	Params []string
}

// Dims64 returns dims as int64s.
func Dims64(dims []int) []int64 {
	out := make([]int64, len(dims))
	for i, d := range dims {
		out[i] = int64(d)
	}
	return out
}

// FloatTensor returns a FLOAT tensor of dims holding v.
func FloatTensor(name string, dims []int64, v []float32) Tensor {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, Type: Float, Dims: dims, Raw: raw}
}

// DoubleTensor returns a DOUBLE tensor of dims holding v.
func DoubleTensor(name string, dims []int64, v []float64) Tensor {
	raw := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(x))
	}
	return Tensor{Name: name, Type: Double, Dims: dims, Raw: raw}
}

// Int64Tensor returns an INT64 tensor of dims holding v.
func Int64Tensor(name string, dims []int64, v []int64) Tensor {
	raw := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(x))
	}
	return Tensor{Name: name, Type: Int64, Dims: dims, Raw: raw}
}

// ErrInvalid reports a model that Marshal refuses to write.
var ErrInvalid = errors.New("onnx: invalid model")

// check returns an error naming the first fault of the model's structure.
func (m *Model) check() error {
	if m.Opset < 1 {
		return fmt.Errorf("%w: opset %d", ErrInvalid, m.Opset)
	}
	g := &m.Graph
	defined := map[string]string{} // value name -> what defines it
	define := func(name, by string) error {
		if name == "" {
			return fmt.Errorf("%w: %s defines a value without a name", ErrInvalid, by)
		}
		if prev, ok := defined[name]; ok {
			return fmt.Errorf("%w: value %q is defined by %s and again by %s", ErrInvalid, name, prev, by)
		}
		defined[name] = by
		return nil
	}
	for _, v := range g.Inputs {
		if err := define(v.Name, "a graph input"); err != nil {
			return err
		}
		if v.Type.size() == 0 {
			return fmt.Errorf("%w: graph input %q has element type %v", ErrInvalid, v.Name, v.Type)
		}
		if err := v.checkDims("graph input"); err != nil {
			return err
		}
	}
	for _, t := range g.Initializers {
		if err := define(t.Name, "an initializer"); err != nil {
			return err
		}
		if err := t.check(); err != nil {
			return err
		}
	}
	for i, n := range g.Nodes {
		if n.OpType == "" {
			return fmt.Errorf("%w: node %d (%q) has no op type", ErrInvalid, i, n.Name)
		}
		for _, in := range n.Inputs {
			if _, ok := defined[in]; !ok && in != "" { // "" is an omitted optional input
				return fmt.Errorf("%w: node %q (%s) takes %q, which no graph input, initializer or earlier node defines", ErrInvalid, n.Name, n.OpType, in)
			}
		}
		for _, out := range n.Outputs {
			if err := define(out, fmt.Sprintf("node %q (%s)", n.Name, n.OpType)); err != nil {
				return err
			}
		}
	}
	for _, v := range g.Outputs {
		if _, ok := defined[v.Name]; !ok {
			return fmt.Errorf("%w: graph output %q is not defined", ErrInvalid, v.Name)
		}
		if err := v.checkDims("graph output"); err != nil {
			return err
		}
	}
	return nil
}

// check returns an error when t's dimensions are negative or its bytes do
// not hold as many values as they say.
func (t *Tensor) check() error {
	n := int64(1)
	for _, d := range t.Dims {
		if d < 0 {
			return fmt.Errorf("%w: initializer %q has dimensions %v", ErrInvalid, t.Name, t.Dims)
		}
		n *= d
	}
	if sz := t.Type.size(); sz == 0 || int64(len(t.Raw)) != n*int64(sz) {
		return fmt.Errorf("%w: initializer %q of %v %v holds %d bytes", ErrInvalid, t.Name, t.Type, t.Dims, len(t.Raw))
	}
	return nil
}

// checkDims returns an error when v's Params do not match its Dims or a
// fixed dimension is negative; what names v ("graph input").
func (v ValueInfo) checkDims(what string) error {
	if v.Params != nil && len(v.Params) != len(v.Dims) {
		return fmt.Errorf("%w: %s %q has %d dimensions and %d symbolic names (Params): want one per dimension, empty where fixed", ErrInvalid, what, v.Name, len(v.Dims), len(v.Params))
	}
	for i, d := range v.Dims {
		if d < 0 && (v.Params == nil || v.Params[i] == "") {
			return fmt.Errorf("%w: %s %q has dimensions %v", ErrInvalid, what, v.Name, v.Dims)
		}
	}
	return nil
}

// Marshal returns the model encoded as an ONNX file (a ModelProto), after
// checking its graph.
func (m *Model) Marshal() ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	var b buf
	ir := m.IRVersion
	if ir == 0 {
		ir = IRVersion
	}
	b.varintField(1, uint64(ir)) // ir_version
	b.stringField(2, m.ProducerName)
	b.stringField(3, m.ProducerVersion)
	b.stringField(6, m.DocString)
	b.message(7, encodeGraph(&m.Graph)) // graph
	var opset buf
	opset.varintField(2, uint64(m.Opset)) // OperatorSetIdProto.version; domain "" is the default
	b.message(8, opset.b)                 // opset_import
	for _, k := range slices.Sorted(maps.Keys(m.Metadata)) {
		var e buf
		e.stringField(1, k)
		e.stringField(2, m.Metadata[k])
		b.message(14, e.b) // metadata_props
	}
	return b.b, nil
}

// WriteTo writes the encoded model to w.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	b, err := m.Marshal()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

func encodeGraph(g *Graph) []byte {
	var b buf
	for i := range g.Nodes {
		b.message(1, encodeNode(&g.Nodes[i])) // node
	}
	b.stringField(2, g.Name)
	for i := range g.Initializers {
		b.message(5, encodeTensor(&g.Initializers[i])) // initializer
	}
	b.stringField(10, g.DocString)
	for _, v := range g.Inputs {
		b.message(11, encodeValueInfo(v)) // input
	}
	for _, v := range g.Outputs {
		b.message(12, encodeValueInfo(v)) // output
	}
	return b.b
}

func encodeNode(n *Node) []byte {
	var b buf
	for _, in := range n.Inputs {
		b.bytesField(1, []byte(in)) // input: an empty name is kept (an omitted optional input)
	}
	for _, out := range n.Outputs {
		b.bytesField(2, []byte(out))
	}
	b.stringField(3, n.Name)
	b.stringField(4, n.OpType)
	for _, a := range n.Attrs {
		b.message(5, encodeAttr(a))
	}
	return b.b
}

func encodeAttr(a Attr) []byte {
	var b buf
	b.stringField(1, a.name)
	switch a.kind {
	case attrFloat:
		b.tag(2, wireFixed32)
		b.b = binary.LittleEndian.AppendUint32(b.b, math.Float32bits(a.f))
	case attrInt:
		b.tag(3, wireVarint)
		b.varint(uint64(a.i))
	case attrString:
		b.bytesField(4, []byte(a.s))
	case attrInts:
		for _, v := range a.ints { // proto2 repeated int64, unpacked
			b.tag(8, wireVarint)
			b.varint(uint64(v))
		}
	}
	b.varintField(20, uint64(a.kind)) // type
	return b.b
}

func encodeTensor(t *Tensor) []byte {
	var b buf
	for _, d := range t.Dims { // dims: repeated int64, unpacked
		b.tag(1, wireVarint)
		b.varint(uint64(d))
	}
	b.tag(2, wireVarint) // data_type
	b.varint(uint64(t.Type))
	b.stringField(8, t.Name)
	b.bytesField(9, t.Raw) // raw_data
	return b.b
}

func encodeValueInfo(v ValueInfo) []byte {
	var shape buf
	for i, d := range v.Dims {
		var dim buf
		if v.Params != nil && v.Params[i] != "" {
			dim.bytesField(2, []byte(v.Params[i])) // dim_param
		} else {
			dim.tag(1, wireVarint) // dim_value
			dim.varint(uint64(d))
		}
		shape.message(1, dim.b) // dim
	}
	var tt buf
	tt.tag(1, wireVarint) // elem_type
	tt.varint(uint64(v.Type))
	tt.message(2, shape.b) // shape
	var typ buf
	typ.message(1, tt.b) // tensor_type
	var b buf
	b.stringField(1, v.Name)
	b.message(2, typ.b) // type
	return b.b
}

// Protobuf's wire types.
const (
	wireVarint  = 0
	wireBytes   = 2
	wireFixed32 = 5
)

// buf accumulates protobuf fields.
type buf struct{ b []byte }

func (b *buf) varint(v uint64) { b.b = binary.AppendUvarint(b.b, v) }

func (b *buf) tag(field, wire int) { b.varint(uint64(field)<<3 | uint64(wire)) }

// varintField writes a varint field unless v is 0 (proto2 optional fields
// this package leaves unset when zero).
func (b *buf) varintField(field int, v uint64) {
	if v == 0 {
		return
	}
	b.tag(field, wireVarint)
	b.varint(v)
}

// bytesField writes a length-delimited field, even when empty.
func (b *buf) bytesField(field int, v []byte) {
	b.tag(field, wireBytes)
	b.varint(uint64(len(v)))
	b.b = append(b.b, v...)
}

// stringField writes a string field unless it is empty.
func (b *buf) stringField(field int, s string) {
	if s != "" {
		b.bytesField(field, []byte(s))
	}
}

// message writes an embedded message, even when empty.
func (b *buf) message(field int, m []byte) { b.bytesField(field, m) }
