// Command gen writes package backend's generated files and the generated
// parts of internal/cudak/kernels.cu from tables, so that what the Go and
// the CUDA C++ must agree on is written once. The lists of backend's
// elementwise functions come from the two tables in table.go, one per
// family: for backend.UnaryOp,
// the constants and their CPU definitions (backend/unary_ops.go) and the
// UNARY_OPS list of internal/cudak/kernels.cu; for backend.BinaryOp,
// backend/binary_ops.go and the BINARY_OPS list; each list between its
// BEGIN and END lines. A family's lists keep one order: a kernel passes a
// constant's value to CUDA, which selects the case of that number. The
// kernels' argument structs, and the lengths of their arrays that a table
// names, come from args_table.go (args.go). Run it with
// go generate ./backend.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// cpuKind is how the CPU computes a function.
type cpuKind uint8

const (
	// inType: its CPU function is a generic func[T Float](x T) T of package
	// backend, computed in the element type.
	inType cpuKind = iota + 1
	// viaFloat64: its CPU function is a func(float64) float64, computed in
	// float64 and rounded once to the element type (a math library call).
	viaFloat64
)

// op is an elementwise function of one argument.
type op struct {
	Const string  // its constant in package backend
	Name  string  // its name (String); in capitals, its name in kernels.cu
	Kind  cpuKind // how the CPU computes it
	CPU   string  // its CPU function, an expression of package backend
	CUDA  string  // its value at x, of type T, in kernels.cu
	Doc   string  // a comment on its constant, or ""
}

// binop is an elementwise function of two arguments.
type binop struct {
	Const string // its constant in package backend
	Name  string // its name (String)
	CPU   string // its CPU function, a generic func[T Float](x, y T) T of package backend
	Cost  int    // its cost relative to an addition, for splitting loops
	CUDA  string // its value at x and y, of type T, in kernels.cu
	Doc   string // a comment on its constant, or ""
}

// The lines between which the UNARY_OPS and BINARY_OPS lists of kernels.cu
// stand.
const (
	begin       = "// BEGIN UNARY_OPS: written by go generate ./backend from backend/gen/table.go; edit the table, not these lines."
	end         = "// END UNARY_OPS"
	beginBinary = "// BEGIN BINARY_OPS: written by go generate ./backend from backend/gen/table.go; edit the table, not these lines."
	endBinary   = "// END BINARY_OPS"
)

// outputs are the generated Go files, in package backend's folder, each
// with the function that writes it.
var outputs = []struct {
	file string
	gen  func() ([]byte, error)
}{
	{"unary_ops.go", func() ([]byte, error) { return goFile(ops) }},
	{"binary_ops.go", func() ([]byte, error) { return binaryGoFile(binaryOps) }},
	{"kernel_args.go", func() ([]byte, error) { return argsGoFile(families, lengths) }},
}

// cudaFile is the CUDA source whose lists and argument structs the tables
// write, from package backend's folder.
const cudaFile = "../internal/cudak/kernels.cu"

func main() {
	dir := flag.String("backend", ".", "package backend's folder, into which to write")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// run writes the Go files and rewrites the CUDA source's lists and
// structs, from package backend's folder dir; it writes nothing where a
// table is refused.
func run(dir string) error {
	files := map[string][]byte{}
	for _, o := range outputs {
		b, err := o.gen()
		if err != nil {
			return err
		}
		files[filepath.Join(dir, o.file)] = b
	}
	cuPath := filepath.Join(dir, cudaFile)
	cu, err := os.ReadFile(cuPath)
	if err != nil {
		return err
	}
	c, err := cudaSource(string(cu))
	if err != nil {
		return fmt.Errorf("%s: %w", cuPath, err)
	}
	files[cuPath] = []byte(c)
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cudaSource returns the CUDA source src with its lists and argument
// structs written from the tables.
func cudaSource(src string) (string, error) {
	c, err := splice(src, ops)
	if err == nil {
		c, err = spliceBinary(c, binaryOps)
	}
	if err == nil {
		c, err = spliceArgs(c, families, lengths)
	}
	return c, err
}

// check refuses a table with an empty field, a constant that is not an
// exported Go name, or a constant or name twice.
func check(ops []op) error {
	seen := map[string]bool{}
	for i, o := range ops {
		if o.Const == "" || o.Name == "" || o.CPU == "" || o.CUDA == "" || (o.Kind != inType && o.Kind != viaFloat64) {
			return fmt.Errorf("line %d of the table (%q) lacks a field", i+1, o.Const)
		}
		if !token.IsIdentifier(o.Const) || !token.IsExported(o.Const) {
			return fmt.Errorf("line %d of the table: constant %q is not an exported Go name", i+1, o.Const)
		}
		for _, k := range []string{"constant " + o.Const, "name " + strings.ToUpper(o.Name)} {
			if seen[k] {
				return fmt.Errorf("line %d of the table: %s twice", i+1, k)
			}
			seen[k] = true
		}
	}
	return nil
}

// goFile returns backend/unary_ops.go: the constants and their CPU
// definitions.
func goFile(ops []op) ([]byte, error) {
	if err := check(ops); err != nil {
		return nil, err
	}
	f := opFile{Type: "UnaryOp", What: "one argument (Map's)", List: "UNARY_OPS", Table: "unaries", Elem: "unary"}
	for _, o := range ops {
		f.Math = f.Math || strings.Contains(o.CPU, "math.")
		f.Consts = append(f.Consts, [2]string{o.Const, o.Doc})
		if o.Kind == inType {
			f.Entries = append(f.Entries, fmt.Sprintf("inType(%q, %s[float32], %s[float64])", o.Name, o.CPU, o.CPU))
		} else {
			f.Entries = append(f.Entries, fmt.Sprintf("viaFloat64(%q, %s)", o.Name, o.CPU))
		}
	}
	return f.source()
}

// opFile is the Go file of a family of elementwise functions.
type opFile struct {
	Type, What, List string      // the functions' type, what they take, their CUDA list
	Math             bool        // whether the file imports math
	Consts           [][2]string // each constant's name and its comment
	Table, Elem      string      // the CPU definitions' table and its element type
	Entries          []string    // each constant's definition
}

// source returns the file: the constants, every constant's list and the
// constants' CPU definitions.
func (f opFile) source() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header("table.go"))
	if f.Math {
		b.WriteString("import \"math\"\n\n")
	}
	fmt.Fprintf(&b, "// The elementwise functions of %s, from the table in\n// backend/gen/table.go, which also writes kernels.cu's %s.\n", f.What, f.List)
	writeConsts(&b, f.Type, f.Consts)
	writeAll(&b, f.Type, f.Consts)
	fmt.Fprintf(&b, "\n// %s are the %ss' CPU definitions.\nvar %s = [...]%s{\n", f.Table, f.Type, f.Table, f.Elem)
	for i, e := range f.Entries {
		fmt.Fprintf(&b, "\t%s: %s,\n", f.Consts[i][0], e)
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the generated Go of %s does not parse (a CPU function of the table?): %w", f.Type, err)
	}
	return src, nil
}

// writeConsts writes a const block of type typ counting from 1: each of
// consts is a constant's name and its comment ("" for none).
func writeConsts(b *bytes.Buffer, typ string, consts [][2]string) {
	b.WriteString("const (\n")
	for i, c := range consts {
		b.WriteString("\t" + c[0])
		if i == 0 {
			b.WriteString(" " + typ + " = iota + 1")
		}
		if c[1] != "" {
			b.WriteString(" // " + c[1])
		}
		b.WriteString("\n")
	}
	b.WriteString(")\n")
}

// writeAll writes a function that returns every constant of consts, of
// type typ, in order: the list tests and chains take every function from.
func writeAll(b *bytes.Buffer, typ string, consts [][2]string) {
	fmt.Fprintf(b, "\n// %ss returns every %s, in the order of their constants.\nfunc %ss() []%s {\n\treturn []%s{", typ, typ, typ, typ, typ)
	for i, c := range consts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c[0])
	}
	b.WriteString("}\n}\n")
}

// header starts a Go file generated from table, a file of this folder.
func header(table string) string {
	return "// Code generated by go run ./gen from gen/" + table + "; DO NOT EDIT.\n\npackage backend\n\n"
}

// cudaList returns the UNARY_OPS list, each entry the function's name in
// capitals and its value at x.
func cudaList(ops []op) string {
	var entries [][2]string
	for _, o := range ops {
		entries = append(entries, [2]string{strings.ToUpper(o.Name), o.CUDA})
	}
	return xList("UNARY_OPS", "UnaryOp", "x", entries)
}

// xList returns the X-macro list name of backend's functions of type typ:
// each entry a function's name in kernels.cu and its value at the
// arguments at, in the order of the constants.
func xList(name, typ, at string, entries [][2]string) string {
	lines := []string{
		"// " + name + " lists backend." + typ + "'s functions, in the order of its",
		"// constants: each is its name and its value at " + at + ".",
		"#define " + name + "(X)",
	}
	for _, e := range entries {
		lines = append(lines, fmt.Sprintf("  X(%s, %s)", e[0], e[1]))
	}
	return aligned(lines)
}

// aligned joins an X-macro list, header comments, its #define line and its
// entries, the backslashes that continue the #define aligned one column
// after the longest line.
func aligned(lines []string) string {
	width := 0
	for _, l := range lines[2:] {
		width = max(width, len(l))
	}
	var b strings.Builder
	for i, l := range lines {
		if i >= 2 && i < len(lines)-1 {
			l += strings.Repeat(" ", width+1-len(l)) + "\\"
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// splice returns the CUDA source src with the lines between its BEGIN and
// END lines of UNARY_OPS replaced by the list of ops.
func splice(src string, ops []op) (string, error) {
	if err := check(ops); err != nil {
		return "", err
	}
	return spliceList(src, begin, end, "UNARY_OPS", cudaList(ops))
}

// spliceList returns src with the lines between its lines begin and end
// replaced by list, named name in errors.
func spliceList(src, begin, end, name, list string) (string, error) {
	i := strings.Index(src, begin+"\n")
	j := strings.Index(src, "\n"+end+"\n")
	if i < 0 || j < i {
		return "", errors.New("no " + name + " list between a line " + begin + " and a line " + end)
	}
	i += len(begin) + 1
	return src[:i] + list + src[j+1:], nil
}
