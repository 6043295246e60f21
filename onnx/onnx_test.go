package onnx

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// unhex decodes hex digits, ignoring spaces.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMarshalWireFormat compares the encoding of a small model with bytes
// worked out by hand from onnx.proto's field numbers and protobuf's wire
// format (tag = field << 3 | wire type; 2 is length-delimited, 0 a varint).
func TestMarshalWireFormat(t *testing.T) {
	m := &Model{
		Opset: 17,
		Graph: Graph{
			Nodes:   []Node{{Name: "n", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}},
			Inputs:  []ValueInfo{{Name: "x", Type: Float, Dims: []int64{2}}},
			Outputs: []ValueInfo{{Name: "y", Type: Float, Dims: []int64{2}}},
		},
		Metadata: map[string]string{"k": "v"},
	}
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, ""+
		"08 08"+ // ModelProto.ir_version (1) = 8
		"3a 33"+ // ModelProto.graph (7), 51 bytes:
		/**/ "0a 0f"+ // GraphProto.node (1), 15 bytes:
		/*  */ "0a 01 78  12 01 79  1a 01 6e  22 04 52656c75"+ // input (1) "x", output (2) "y", name (3) "n", op_type (4) "Relu"
		/**/ "5a 0f"+ // GraphProto.input (11): ValueInfoProto
		/*  */ "0a 01 78  12 0a"+ // name (1) "x", type (2): TypeProto
		/*    */ "0a 08  08 01  12 04  0a 02  08 02"+ // tensor_type (1): elem_type (1) FLOAT, shape (2): dim (1): dim_value (1) 2
		/**/ "62 0f"+ // GraphProto.output (12)
		/*  */ "0a 01 79  12 0a  0a 08  08 01  12 04  0a 02  08 02"+
		"42 02  10 11"+ // ModelProto.opset_import (8): OperatorSetIdProto.version (2) = 17
		"72 06  0a 01 6b  12 01 76") // ModelProto.metadata_props (14): key (1) "k", value (2) "v"
	if !bytes.Equal(got, want) {
		t.Errorf("encoding\n got % x\nwant % x", got, want)
	}
}

// TestEncodeParts checks initializers and attributes against hand-made
// bytes.
func TestEncodeParts(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"FloatTensor", encodeTensor(ptr(FloatTensor("w", []int64{2}, []float32{1, -2}))),
			"08 02  10 01  42 01 77  4a 08 0000803f 000000c0"}, // dims (1), data_type (2) FLOAT, name (8), raw_data (9) little-endian
		{"Int64Tensor", encodeTensor(ptr(Int64Tensor("s", []int64{1}, []int64{-1}))),
			"08 01  10 07  42 01 73  4a 08 ffffffffffffffff"},
		{"DoubleTensor scalar", encodeTensor(ptr(DoubleTensor("c", nil, []float64{0.5}))),
			"10 0b  42 01 63  4a 08 000000000000e03f"},
		{"Int", encodeAttr(Int("axis", -1)),
			"0a 04 61786973  18 ffffffffffffffffff01  a001 02"}, // name (1), i (3) as a 10-byte varint, type (20) INT
		{"Ints", encodeAttr(Ints("perm", 1, 0)),
			"0a 04 7065726d  40 01  40 00  a001 07"}, // ints (8) unpacked, type INTS
		{"Float32", encodeAttr(Float32("epsilon", 0.5)),
			"0a 07 657073696c6f6e  15 0000003f  a001 01"}, // f (2) fixed32, type FLOAT
		{"String", encodeAttr(String("equation", "ij")),
			"0a 08 6571756174696f6e  22 02 696a  a001 03"}, // s (4), type STRING
	} {
		if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
			t.Errorf("%s:\n got % x\nwant % x", tc.name, tc.got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestMarshalRefusesBrokenGraphs checks that Marshal names the fault of a
// graph ONNX Runtime would refuse.
func TestMarshalRefusesBrokenGraphs(t *testing.T) {
	in := []ValueInfo{{Name: "x", Type: Float, Dims: []int64{2}}}
	out := []ValueInfo{{Name: "y", Type: Float, Dims: []int64{2}}}
	relu := func(from, to string) Node {
		return Node{Name: to, OpType: "Relu", Inputs: []string{from}, Outputs: []string{to}}
	}
	for _, tc := range []struct {
		name string
		g    Graph
		want string
	}{
		{"undefined input", Graph{Nodes: []Node{relu("z", "y")}, Inputs: in, Outputs: out}, `takes "z"`},
		{"out of order", Graph{Nodes: []Node{relu("h", "y"), relu("x", "h")}, Inputs: in, Outputs: out}, `takes "h"`},
		{"defined twice", Graph{Nodes: []Node{relu("x", "y"), relu("x", "y")}, Inputs: in, Outputs: out}, `value "y" is defined by`},
		{"short initializer", Graph{Nodes: []Node{relu("x", "y")}, Inputs: in, Outputs: out,
			Initializers: []Tensor{{Name: "w", Type: Float, Dims: []int64{3}, Raw: make([]byte, 8)}}}, `initializer "w" of FLOAT [3] holds 8 bytes`},
		{"undefined output", Graph{Nodes: []Node{relu("x", "h")}, Inputs: in, Outputs: out}, `graph output "y" is not defined`},
		{"no op type", Graph{Nodes: []Node{{Name: "n", Inputs: []string{"x"}, Outputs: []string{"y"}}}, Inputs: in, Outputs: out}, "has no op type"},
	} {
		_, err := (&Model{Opset: 17, Graph: tc.g}).Marshal()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := (&Model{Graph: Graph{Inputs: in, Outputs: []ValueInfo{{Name: "x", Type: Float}}}}).Marshal(); !errors.Is(err, ErrInvalid) {
		t.Errorf("opset 0: error %v, want ErrInvalid", err)
	}
}
