package main

import (
	"fmt"
	"go/token"
	"strings"
)

// checkBinary refuses a binary table with an empty field, a cost below 1,
// a constant that is not an exported Go name, a constant or name twice, or
// a CUDA name that a unary function of ops has too.
func checkBinary(bops []binop, ops []op) error {
	seen := map[string]bool{}
	for _, o := range ops {
		seen["cuda "+strings.ToUpper(o.Name)] = true
	}
	for i, o := range bops {
		if o.Const == "" || o.Name == "" || o.CPU == "" || o.CUDA == "" || o.Cost < 1 {
			return fmt.Errorf("line %d of the binary table (%q) lacks a field", i+1, o.Const)
		}
		if !token.IsIdentifier(o.Const) || !token.IsExported(o.Const) {
			return fmt.Errorf("line %d of the binary table: constant %q is not an exported Go name", i+1, o.Const)
		}
		for _, k := range []string{"constant " + o.Const, "name " + o.Name, "cuda " + strings.ToUpper(o.Const)} {
			if seen[k] {
				return fmt.Errorf("line %d of the binary table: %s twice (or a unary function's)", i+1, k)
			}
			seen[k] = true
		}
	}
	return nil
}

// binaryGoFile returns backend/binary_ops.go: the constants and their CPU
// definitions.
func binaryGoFile(bops []binop) ([]byte, error) {
	if err := checkBinary(bops, ops); err != nil {
		return nil, err
	}
	f := opFile{Type: "BinaryOp", What: "two arguments (Zip's)", List: "BINARY_OPS", Table: "binaries", Elem: "binary"}
	for _, o := range bops {
		f.Consts = append(f.Consts, [2]string{o.Const, o.Doc})
		f.Entries = append(f.Entries, fmt.Sprintf("{%q, %s[float32], %s[float64], %d}", o.Name, o.CPU, o.CPU, o.Cost))
	}
	return f.source()
}

// binaryList returns the BINARY_OPS list, each entry the constant's name
// in capitals and its value at x and y.
func binaryList(bops []binop) string {
	var entries [][2]string
	for _, o := range bops {
		entries = append(entries, [2]string{strings.ToUpper(o.Const), o.CUDA})
	}
	return xList("BINARY_OPS", "BinaryOp", "x and y", entries)
}

// spliceBinary returns the CUDA source src with the lines between its
// BEGIN and END lines of BINARY_OPS replaced by the list of bops.
func spliceBinary(src string, bops []binop) (string, error) {
	if err := checkBinary(bops, ops); err != nil {
		return "", err
	}
	return spliceList(src, beginBinary, endBinary, "BINARY_OPS", binaryList(bops))
}
