package main

import (
	"bytes"
	"fmt"
	"go/format"
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
	var b bytes.Buffer
	b.WriteString(header("table.go"))
	b.WriteString("// The elementwise functions of two arguments (Zip's), from the table in\n")
	b.WriteString("// backend/gen/table.go, which also writes kernels.cu's BINARY_OPS.\n")
	consts := make([][2]string, len(bops))
	for i, o := range bops {
		consts[i] = [2]string{o.Const, o.Doc}
	}
	writeConsts(&b, "BinaryOp", consts)
	writeAll(&b, "BinaryOp", consts)
	b.WriteString("\n// binaries are the BinaryOps' CPU definitions.\nvar binaries = [...]binary{\n")
	for _, o := range bops {
		fmt.Fprintf(&b, "\t%s: {%q, %s[float32], %s[float64], %d},\n", o.Const, o.Name, o.CPU, o.CPU, o.Cost)
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the generated Go does not parse (a CPU function of the binary table?): %w", err)
	}
	return src, nil
}

// binaryList returns the BINARY_OPS list, each entry the constant's name
// in capitals and its value at x and y.
func binaryList(bops []binop) string {
	lines := []string{
		"// BINARY_OPS lists backend.BinaryOp's functions, in the order of its",
		"// constants: each is its name and its value at x and y.",
		"#define BINARY_OPS(X)",
	}
	for _, o := range bops {
		lines = append(lines, fmt.Sprintf("  X(%s, %s)", strings.ToUpper(o.Const), o.CUDA))
	}
	return aligned(lines)
}

// spliceBinary returns the CUDA source src with the lines between its
// BEGIN and END lines of BINARY_OPS replaced by the list of bops.
func spliceBinary(src string, bops []binop) (string, error) {
	if err := checkBinary(bops, ops); err != nil {
		return "", err
	}
	return spliceList(src, beginBinary, endBinary, "BINARY_OPS", binaryList(bops))
}
