package onnx

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
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

// field is one protobuf field read back by readFields: its number and its
// varint value or its bytes.
type field struct {
	num int
	v   uint64
	b   []byte
}

// readFields splits an encoded message into its fields (varint and
// length-delimited ones, the wire types of the messages read back here).
func readFields(t *testing.T, b []byte) []field {
	t.Helper()
	var fs []field
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad tag in % x", b)
		}
		b = b[n:]
		f := field{num: int(tag >> 3)}
		v, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad varint in % x", b)
		}
		b = b[n:]
		switch tag & 7 {
		case wireVarint:
			f.v = v
		case wireBytes:
			if uint64(len(b)) < v {
				t.Fatalf("field %d of %d bytes, %d left", f.num, v, len(b))
			}
			f.b, b = b[:v], b[v:]
		default:
			t.Fatalf("field %d of wire type %d", f.num, tag&7)
		}
		fs = append(fs, f)
	}
	return fs
}

// sub returns the fields of the embedded messages numbered num in fs.
func sub(t *testing.T, fs []field, num int) [][]field {
	t.Helper()
	var out [][]field
	for _, f := range fs {
		if f.num == num {
			out = append(out, readFields(t, f.b))
		}
	}
	return out
}

// readValueInfos reads back the graph inputs (11) or outputs (12) of an
// encoded model: name, element type, and each dimension's dim_value or
// dim_param.
func readValueInfos(t *testing.T, model []byte, num int) []ValueInfo {
	t.Helper()
	var vs []ValueInfo
	for _, graph := range sub(t, readFields(t, model), 7) {
		for _, vi := range sub(t, graph, num) {
			var v ValueInfo
			for _, f := range vi {
				if f.num == 1 {
					v.Name = string(f.b)
				}
			}
			for _, typ := range sub(t, vi, 2) {
				for _, tt := range sub(t, typ, 1) {
					for _, f := range tt {
						if f.num == 1 {
							v.Type = DataType(f.v)
						}
					}
					for _, shape := range sub(t, tt, 2) {
						for _, dim := range sub(t, shape, 1) {
							d, p := int64(0), ""
							for _, f := range dim {
								switch f.num {
								case 1:
									d = int64(f.v)
								case 2:
									p = string(f.b)
								}
							}
							v.Dims, v.Params = append(v.Dims, d), append(v.Params, p)
						}
					}
				}
			}
			vs = append(vs, v)
		}
	}
	return vs
}

// TestDimParam writes graph inputs and outputs with symbolic dimensions
// (dim_param) beside fixed ones and reads them back; a ValueInfo whose
// Params do not match its Dims is refused.
func TestDimParam(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   ValueInfo
		want ValueInfo // as read back: a Param for every dimension, 0 where symbolic
	}{
		{"fixed", ValueInfo{Name: "x", Type: Float, Dims: []int64{2, 3}},
			ValueInfo{Name: "x", Type: Float, Dims: []int64{2, 3}, Params: []string{"", ""}}},
		{"batch", ValueInfo{Name: "x", Type: Float, Dims: []int64{0, 3}, Params: []string{"batch", ""}},
			ValueInfo{Name: "x", Type: Float, Dims: []int64{0, 3}, Params: []string{"batch", ""}}},
		{"two symbolic", ValueInfo{Name: "x", Type: Double, Dims: []int64{-1, 4, -1}, Params: []string{"batch", "", "2*batch+1"}},
			ValueInfo{Name: "x", Type: Double, Dims: []int64{0, 4, 0}, Params: []string{"batch", "", "2*batch+1"}}},
	} {
		out := tc.in
		out.Name = "y"
		m := &Model{Opset: 17, Graph: Graph{
			Nodes:  []Node{{Name: "n", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}},
			Inputs: []ValueInfo{tc.in}, Outputs: []ValueInfo{out},
		}}
		b, err := m.Marshal()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantOut := tc.want
		wantOut.Name = "y"
		for i, want := range []ValueInfo{tc.want, wantOut} {
			got := readValueInfos(t, b, 11+i)
			if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
				t.Errorf("%s: read back %+v, want %+v", tc.name, got, want)
			}
		}
	}
	// The bytes of one symbolic dimension: dim (1) { dim_param (2) "b" }.
	if got, want := encodeValueInfo(ValueInfo{Name: "x", Type: Float, Dims: []int64{0}, Params: []string{"b"}}),
		unhex(t, "0a 01 78  12 0b  0a 09  08 01  12 05  0a 03  12 01 62"); !bytes.Equal(got, want) {
		t.Errorf("encoding\n got % x\nwant % x", got, want)
	}
	for _, bad := range []ValueInfo{
		{Name: "x", Type: Float, Dims: []int64{2, 3}, Params: []string{"batch"}},
		{Name: "x", Type: Float, Dims: []int64{-1, 3}},
	} {
		m := &Model{Opset: 17, Graph: Graph{Inputs: []ValueInfo{bad}, Outputs: []ValueInfo{{Name: "x", Type: Float}}}}
		if _, err := m.Marshal(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `graph input "x" has`) {
			t.Errorf("%+v: error %v, want ErrInvalid naming the input", bad, err)
		}
	}
}
