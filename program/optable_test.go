package program

import (
	"errors"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/program/lower"
)

// opTableRow is a row of docs/ops.md's table of Gorgonia's op types.
type opTableRow struct {
	types []string // the op types the row names
	state string   // "CPU, CUDA", "CPU", "refused" or "not an op"
	line  string
}

// readmeTables returns the op table and the function table of
// docs/ops.md: each row's names in backquotes in its first column, and its
// other columns.
func readmeTables(t *testing.T) (ops []opTableRow, funcs map[string][]string) {
	t.Helper()
	b, err := os.ReadFile("../docs/ops.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	names := regexp.MustCompile("`([A-Za-z0-9_.]+)`")
	table := func(header string) [][]string {
		i := strings.Index(text, header)
		if i < 0 {
			t.Fatalf("docs/ops.md has no table headed %q", header)
		}
		var rows [][]string
		for _, line := range strings.Split(text[i:], "\n")[2:] {
			if !strings.HasPrefix(line, "|") {
				break
			}
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for j := range cells {
				cells[j] = strings.TrimSpace(cells[j])
			}
			rows = append(rows, append([]string{line}, cells...))
		}
		return rows
	}
	for _, r := range table("| op type | built by | state | how, or why not |") {
		row := opTableRow{state: r[3], line: r[0]}
		for _, m := range names.FindAllStringSubmatch(r[1], -1) {
			row.types = append(row.types, m[1])
		}
		ops = append(ops, row)
	}
	funcs = map[string][]string{}
	for _, r := range table("| function | op types it builds |") {
		var types []string
		for _, m := range names.FindAllStringSubmatch(r[2], -1) {
			types = append(types, m[1])
		}
		for _, m := range names.FindAllStringSubmatch(r[1], -1) {
			funcs[m[1]] = types
		}
	}
	return ops, funcs
}

// gorgoniaSource returns the directory of gorgonia's module.
func gorgoniaSource(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "gorgonia.org/gorgonia").Output()
	if err != nil {
		t.Fatalf("finding gorgonia's source: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// gorgoniaDecls parses every non-test Go file of gorgonia's module and
// returns the types with a Do method (qualified by their package's name
// outside package gorgonia) and the exported functions of package
// gorgonia that return nodes.
func gorgoniaDecls(t *testing.T) (doers, builders []string) {
	t.Helper()
	root := gorgoniaSource(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn.Recv != nil && fn.Name.Name == "Do" && len(fn.Recv.List) == 1 {
				typ := fn.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				name := typ.(*ast.Ident).Name
				if pkg != "gorgonia" {
					name = pkg + "." + name
				}
				if !slices.Contains(doers, name) {
					doers = append(doers, name)
				}
			}
			if fn.Recv == nil && pkg == "gorgonia" && filepath.Dir(path) == root && fn.Name.IsExported() && fn.Type.Results != nil {
				for _, r := range fn.Type.Results.List {
					if s := types(r.Type); s == "*Node" || s == "Nodes" {
						if !slices.Contains(builders, fn.Name.Name) {
							builders = append(builders, fn.Name.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return doers, builders
}

// types returns a result type as written (*Node, Nodes).
func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + types(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// TestOpTable checks docs/ops.md's op table against gorgonia's source and
// the compiler: it lists every type with a Do method in gorgonia v0.9.18's
// non-test files once; every type it says compiles has a lowering and every
// lowering's type is in it as compiled; a refused type has none, and those
// a graph can be built with fail Compile with ErrUnknownOp naming the op
// and the node. The function table names every exported function of
// package gorgonia that returns nodes, with op types from the op table.
func TestOpTable(t *testing.T) {
	rows, funcs := readmeTables(t)
	doers, builders := gorgoniaDecls(t)
	if len(doers) < 50 {
		t.Fatalf("found only %d types with a Do method in gorgonia's source", len(doers))
	}
	state := map[string]string{}
	for _, r := range rows {
		if len(r.types) == 0 {
			t.Errorf("a row of the op table names no op type: %s", r.line)
		}
		switch r.state {
		case "CPU, CUDA", "CPU", "refused", "not an op":
		default:
			t.Errorf("op table: state %q, want \"CPU, CUDA\", \"CPU\", \"refused\" or \"not an op\": %s", r.state, r.line)
		}
		for _, typ := range r.types {
			if _, dup := state[typ]; dup {
				t.Errorf("op table: %s has two rows", typ)
			}
			state[typ] = r.state
		}
	}
	for _, d := range doers {
		if _, ok := state[d]; !ok {
			t.Errorf("op table: no row for %s, a type with a Do method in gorgonia's source", d)
		}
	}
	for typ := range state {
		if !slices.Contains(doers, typ) {
			t.Errorf("op table: %s is not a type with a Do method in gorgonia's source", typ)
		}
	}
	lowered := func(typ string) bool {
		return slices.Contains(lower.Lowered(), gorgoniaop.OpType(typ))
	}
	for typ, s := range state {
		compiles := s == "CPU, CUDA" || s == "CPU"
		switch {
		case compiles && !lowered(typ):
			t.Errorf("op table: %s compiles (%s), but the compiler has no lowering for it", typ, s)
		case !compiles && lowered(typ):
			t.Errorf("op table: %s is %s, but the compiler lowers it", typ, s)
		}
	}
	for _, typ := range lower.Lowered() {
		if s := state[string(typ)]; typ != gorgoniaop.Fused && s != "CPU, CUDA" && s != "CPU" {
			t.Errorf("the compiler lowers %s, which the op table does not list as compiled", typ)
		}
	}
	for _, f := range builders {
		if _, ok := funcs[f]; !ok {
			t.Errorf("function table: no row for gorgonia.%s, which returns nodes", f)
		}
	}
	for f, types := range funcs {
		for _, typ := range types {
			if _, ok := state[typ]; !ok {
				t.Errorf("function table: %s builds %s, which the op table does not list", f, typ)
			}
		}
	}

	// The refused ops that a graph can hold fail Compile with ErrUnknownOp
	// naming the op and the node.
	be := cpu.New(cpu.Options{})
	defer be.Close()
	g := G.NewGraph()
	a := newLeaf(g, tensor.Float64, "a", []int{2, 3}, make([]float64, 6))
	b := newLeaf(g, tensor.Float64, "b", []int{2, 3}, make([]float64, 6))
	var v G.Value
	external := G.NewAddOp(a, b, G.ExecutionContext{})
	refused := map[string]*G.Node{
		"letOp":      G.Set(a, b),
		"readOp":     G.Read(a, &v),
		"ExternalOp": G.Must(G.ApplyOp(external, a, b)),
	}
	for typ, n := range refused {
		if state[typ] != "refused" {
			t.Errorf("%s: the op table says %q, the test builds it as refused", typ, state[typ])
		}
		_, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{n}, NoGrad: true})
		if !errors.Is(err, ErrUnknownOp) || !strings.Contains(err.Error(), typ) || !strings.Contains(err.Error(), n.Name()) {
			t.Errorf("%s: Compile: %v, want ErrUnknownOp naming %s and the node %q", typ, err, typ, n.Name())
		}
	}
}
