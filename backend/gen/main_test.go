package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cuPath is kernels.cu, from this folder.
const cuPath = "../" + cudaFile

// TestGeneratedFilesCurrent checks that the generated Go files of package
// backend and the lists and argument structs of kernels.cu are what the
// tables generate now: a table, generated file or list edited without go
// generate ./backend fails here.
func TestGeneratedFilesCurrent(t *testing.T) {
	for _, o := range outputs {
		want, err := o.gen()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join("..", o.file)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("backend/%s is not what the tables generate (%v): run go generate ./backend", o.file, err)
		}
	}
	cu, err := os.ReadFile(cuPath)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := cudaSource(string(cu)); err != nil || c != string(cu) {
		t.Errorf("the lists or argument structs of %s are not what the tables generate (%v): run go generate ./backend", cuPath, err)
	}
}

// TestRunWritesAll runs the generator on a copy of package backend's
// generated files and kernels.cu, the copies made stale, and checks that it
// writes each back to what the tables generate.
func TestRunWritesAll(t *testing.T) {
	dir := t.TempDir()
	backend := filepath.Join(dir, "backend")
	if err := os.MkdirAll(filepath.Join(dir, "internal", "cudak"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(backend, 0o755); err != nil {
		t.Fatal(err)
	}
	cu, err := os.ReadFile(cuPath)
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(cu), "  X(NEG, -x)", "  X(NEG, x)", 1)
	if err := os.WriteFile(filepath.Join(backend, cudaFile), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(backend); err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs {
		want, _ := o.gen()
		if got, err := os.ReadFile(filepath.Join(backend, o.file)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: not written (%v)", o.file, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(backend, cudaFile)); err != nil || !bytes.Equal(got, cu) {
		t.Errorf("kernels.cu not written back to the tables' (%v)", err)
	}
}

// TestAddedOp checks that a line added to the table adds the function last
// to both lists, and changes nothing else in the CUDA source, whose list
// keeps its backslashes in one column.
func TestAddedOp(t *testing.T) {
	more := append(ops[:len(ops):len(ops)], op{"Twice", "twice", inType, "twice", "x + x", "2x"})
	g, err := goFile(more)
	if err != nil {
		t.Fatal(err)
	}
	constant, comment, entry, err := lastOfGoFile(g, "unaries")
	if err != nil {
		t.Fatal(err)
	}
	if constant != "Twice" || comment != "2x" || entry != `Twice: inType("twice", twice[float32], twice[float64])` {
		t.Errorf("the Go file's last constant %q (comment %q) and last table entry %q; want Twice, 2x and its definition:\n%s", constant, comment, entry, g)
	}
	src := "before\n" + begin + "\nold list\n" + end + "\nafter\n"
	c, err := splice(src, more)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c, "before\n"+begin+"\n") || !strings.HasSuffix(c, "\n  X(TWICE, x + x)\n"+end+"\nafter\n") || strings.Contains(c, "old list") {
		t.Errorf("spliced source:\n%s", c)
	}
	lines := strings.Split(c, "\n")
	define := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "#define UNARY_OPS(X) ") })
	last := len(lines) - 4 // the line of Twice
	if define < 0 || strings.HasSuffix(lines[last], "\\") || len(lines[last]) >= len(lines[define]) {
		t.Fatalf("no #define line, or the last line continues or is too long:\n%s", c)
	}
	for _, l := range lines[define:last] {
		if len(l) != len(lines[define]) || !strings.HasSuffix(l, " \\") {
			t.Errorf("line %q: its backslash not in the column of the #define line's", l)
		}
	}
}

// TestRefused checks that a table the lists cannot be generated from, and
// a CUDA source without the list's lines, are refused with an error that
// names the problem.
func TestRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []op
		src  string
		want string
	}{
		{"constant twice", append(ops[:1:1], ops[0]), begin + "\n" + end + "\n", "constant Neg twice"},
		{"name twice", append(ops[:1:1], op{"Minus", "NEG", inType, "neg", "-x", ""}), begin + "\n" + end + "\n", "name NEG twice"},
		{"unexported constant", []op{{"neg", "neg", inType, "neg", "-x", ""}}, begin + "\n" + end + "\n", "not an exported Go name"},
		{"no CUDA value", []op{{"Neg", "neg", inType, "neg", "", ""}}, begin + "\n" + end + "\n", "lacks a field"},
		{"no list", ops, "#define UNARY_OPS(X)\n", "no UNARY_OPS list"},
		{"end before begin", ops, end + "\n" + begin + "\n", "no UNARY_OPS list"},
	} {
		_, err := splice(c.src, c.ops)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := goFile([]op{{"Neg", "neg", viaFloat64, "func(", "-x", ""}}); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("a CPU function that does not parse: %v", err)
	}
}

// lastOfGoFile parses a generated Go file and returns its last constant
// with that constant's comment, and the last entry of the table named
// table as source: what an added op must be, whatever the layout gofmt
// gives the lines.
func lastOfGoFile(src []byte, table string) (constant, comment, entry string, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "unary_ops.go", src, parser.ParseComments)
	if err != nil {
		return "", "", "", err
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || len(gd.Specs) == 0 {
			continue
		}
		vs, ok := gd.Specs[len(gd.Specs)-1].(*ast.ValueSpec)
		switch {
		case !ok:
		case gd.Tok == token.CONST:
			constant, comment = vs.Names[0].Name, strings.TrimSpace(vs.Comment.Text())
		case len(vs.Names) == 1 && vs.Names[0].Name == table:
			lit := vs.Values[0].(*ast.CompositeLit)
			var b bytes.Buffer
			if err := printer.Fprint(&b, fset, lit.Elts[len(lit.Elts)-1]); err != nil {
				return "", "", "", err
			}
			entry = b.String()
		}
	}
	if constant == "" || entry == "" {
		return "", "", "", fmt.Errorf("no constants or no table %s in:\n%s", table, src)
	}
	return constant, comment, entry, nil
}

// TestAddedBinaryOp checks that a line added to the binary table comes last
// in the Go file and the BINARY_OPS list, and that tables the list cannot
// be generated from are refused.
func TestAddedBinaryOp(t *testing.T) {
	more := append(binaryOps[:len(binaryOps):len(binaryOps)], binop{"Hypot", "hypot", "hypot", 8, "m_hypot(x, y)", "sqrt(a^2 + b^2)"})
	g, err := binaryGoFile(more)
	if err != nil {
		t.Fatal(err)
	}
	constant, comment, entry, err := lastOfGoFile(g, "binaries")
	if err != nil || constant != "Hypot" || comment != "sqrt(a^2 + b^2)" || entry != `Hypot: {"hypot", hypot[float32], hypot[float64], 8}` {
		t.Errorf("the Go file's last constant %q (comment %q) and last table entry %q (%v); want Hypot and its definition:\n%s", constant, comment, entry, err, g)
	}
	src := "a\n" + beginBinary + "\nold\n" + endBinary + "\nb\n"
	c, err := spliceBinary(src, more)
	if err != nil || !strings.Contains(c, "  X(HYPOT, m_hypot(x, y))\n"+endBinary) || strings.Contains(c, "old") {
		t.Errorf("spliced (%v):\n%s", err, c)
	}
	for _, bad := range [][]binop{
		{{"Add", "add", "add", 0, "x + y", ""}},
		{{"Add", "add", "add", 1, "x + y", ""}, {"Add", "plus", "add", 1, "x + y", ""}},
		{{"Neg", "negate", "neg2", 1, "-x", ""}}, // NEG is a unary function's name in CUDA
		{{"add", "add", "add", 1, "x + y", ""}},
	} {
		if _, err := binaryGoFile(bad); err == nil {
			t.Errorf("%v: generated, want a refusal", bad)
		}
	}
}
