// Package gorgoniaop reads Gorgonia v0.9.18's graphs as the compiler
// (packages program and program/lower) and the ONNX export (package
// onnxexport) both need to: the nodes the outputs need, in order; a node's arguments; a leaf's value
// on the host; an op's type name (OpType), the function of an elementwise
// op (UnaryFunc, BinaryFunc), and its fields, read by reflection (the
// op types are unexported; Fields reads several and checks once); the
// window of a slice, the kind of a linear algebra op, a softmax's axis, a
// transpose's pattern, the value of SizeOf, and the geometry of a
// convolution's im2col and of a pooling.
// The tests of both packages run every op against the tape machine, so a
// change of Gorgonia's internals fails there, not silently.
package gorgoniaop

import (
	"errors"
	"fmt"
	"reflect"

	G "gorgonia.org/gorgonia"
)

// OpName returns the name of op's type (following pointers): the key by
// which the compiler's lowerings and the exporters tell ops apart.
func OpName(op G.Op) OpType {
	t := reflect.TypeOf(op)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return OpType(t.Name())
}

// Field returns the named field of op's struct (following embedded
// pointers), or an invalid Value.
func Field(op G.Op, name string) reflect.Value {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem() // the zero Value, of no kind, if nil
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

// IntField returns the named integer field of op's struct.
func IntField(op G.Op, name string) (int, error) {
	switch f := Field(op, name); {
	case f.CanInt():
		return int(f.Int()), nil
	case f.CanUint():
		return int(f.Uint()), nil
	}
	return 0, fmt.Errorf("op %T has no integer field %q (gorgonia's internals changed?)", op, name)
}

// FloatField returns the named float field of op's struct.
func FloatField(op G.Op, name string) (float64, error) {
	f := Field(op, name)
	if !f.CanFloat() {
		return 0, fmt.Errorf("op %T has no float field %q (gorgonia's internals changed?)", op, name)
	}
	return f.Float(), nil
}

// BoolField returns the named bool field of op's struct.
func BoolField(op G.Op, name string) (bool, error) {
	f := Field(op, name)
	if f.Kind() != reflect.Bool {
		return false, fmt.Errorf("op %T has no bool field %q (gorgonia's internals changed?)", op, name)
	}
	return f.Bool(), nil
}

// IntsField returns the named field of op's struct, a slice of integers.
func IntsField(op G.Op, name string) ([]int, error) {
	f := Field(op, name)
	if f.Kind() != reflect.Slice {
		return nil, fmt.Errorf("op %T has no slice field %q (gorgonia's internals changed?)", op, name)
	}
	out := make([]int, f.Len())
	for i := range out {
		e := f.Index(i)
		if !e.CanInt() {
			return nil, fmt.Errorf("op %T: field %q holds %v", op, name, e.Kind())
		}
		out[i] = int(e.Int())
	}
	return out, nil
}

// Fields reads the fields of one op's struct by name and keeps the errors of
// the reads that failed until Err, as bufio.Scanner keeps its error: a
// lowering reads every field it needs, then checks once. A failed read
// returns the zero value.
type Fields struct {
	op   G.Op
	errs []error
}

// FieldsOf returns a reader of op's fields.
func FieldsOf(op G.Op) *Fields { return &Fields{op: op} }

// Int reads the named integer field (IntField).
func (f *Fields) Int(name string) int { return keep(f, IntField, name) }

// Float reads the named float field (FloatField).
func (f *Fields) Float(name string) float64 { return keep(f, FloatField, name) }

// Bool reads the named bool field (BoolField).
func (f *Fields) Bool(name string) bool { return keep(f, BoolField, name) }

// Ints reads the named slice of integers (IntsField).
func (f *Fields) Ints(name string) []int { return keep(f, IntsField, name) }

// Err returns the errors of the reads that failed, joined, or nil; each
// names the op's type and the field.
func (f *Fields) Err() error { return errors.Join(f.errs...) }

// keep reads one field with read and keeps its error.
func keep[T any](f *Fields, read func(G.Op, string) (T, error), name string) T {
	v, err := read(f.op, name)
	if err != nil {
		f.errs = append(f.errs, err)
	}
	return v
}
