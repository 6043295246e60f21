package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLaunchesUseTables checks every launch of package backend (a call of
// Launch, elementwise or alongAxis) of a kernel whose argument struct in
// kernels.cu (its KERNEL line) the tables write: it must pass that
// struct's Go struct, so that no such launch lists its words by hand or
// packs another struct's; and every argument struct of the tables (not a
// part of others, a geometry) is launched.
func TestLaunchesUseTables(t *testing.T) {
	cu, err := os.ReadFile(cuPath)
	if err != nil {
		t.Fatal(err)
	}
	structOf := map[string]string{} // a kernel's name, without its suffixes, to its struct
	for _, m := range regexp.MustCompile(`(?m)^KERNEL(?:_SYNC)?\((on_\w+?)(?:_x32)?_(?:f32|f64|i32), (\w+)`).FindAllStringSubmatch(string(cu), -1) {
		structOf[m[1]] = m[2]
	}
	tabled := map[string]bool{}
	for _, f := range families {
		for _, a := range f.Structs {
			tabled[a.Name] = true
		}
	}
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	launched := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		built := builtStructs(file)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isLaunch(call.Fun) {
				return true
			}
			s := structOf[kernelName(call)]
			if !tabled[s] {
				return true
			}
			got := passedStruct(call, built)
			if got != goName(s) {
				t.Errorf("%s: a launch of %s passes %q last, want a %s{...} alone", fset.Position(call.Pos()), kernelName(call), got, goName(s))
			}
			launched[s] = true
			return true
		})
	}
	for s := range tabled {
		if !launched[s] && strings.HasSuffix(s, "Args") {
			t.Errorf("no launch of a kernel that takes %s", s)
		}
	}
}

// isLaunch reports whether fun is p.Launch, elementwise or alongAxis.
func isLaunch(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name == "elementwise" || f.Name == "alongAxis"
	case *ast.SelectorExpr:
		return f.Sel.Name == "Launch"
	}
	return false
}

// kernelName returns the first string literal of a launch's arguments
// (inside indexed or lanes too): the kernel's name, or "".
func kernelName(call *ast.CallExpr) string {
	name := ""
	ast.Inspect(call, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && name == "" {
			name, _ = strconv.Unquote(lit.Value)
		}
		return name == ""
	})
	return name
}

// builtStructs returns the variables of a file assigned a composite
// literal (a := reduceArgs{...}) and the parameters of its functions, with
// their type.
func builtStructs(file *ast.File) map[string]string {
	built := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		if fn, ok := n.(*ast.FuncDecl); ok {
			for _, f := range fn.Type.Params.List {
				if typ, ok := f.Type.(*ast.Ident); ok {
					for _, name := range f.Names {
						built[name.Name] = typ.Name
					}
				}
			}
		}
		as, ok := n.(*ast.AssignStmt)
		if ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
			id, ok1 := as.Lhs[0].(*ast.Ident)
			lit, ok2 := as.Rhs[0].(*ast.CompositeLit)
			if ok1 && ok2 {
				if typ, ok := lit.Type.(*ast.Ident); ok {
					built[id.Name] = typ.Name
				}
			}
		}
		return true
	})
	return built
}

// passedStruct returns the type of a call's last argument where it is a
// composite literal, a conversion or a variable of built, or "".
func passedStruct(call *ast.CallExpr, built map[string]string) string {
	switch x := call.Args[len(call.Args)-1].(type) {
	case *ast.CompositeLit:
		if typ, ok := x.Type.(*ast.Ident); ok {
			return typ.Name
		}
	case *ast.Ident:
		return built[x.Name]
	case *ast.CallExpr: // a conversion, lnArgs(k), where the kernel's fields are the struct's
		if typ, ok := x.Fun.(*ast.Ident); ok && len(x.Args) == 1 {
			return typ.Name
		}
	}
	return ""
}

// TestArgsAddedField checks that a field added to a struct's entry comes, in
// its place, into both the Go struct and its fields() and the C line, and
// that nothing else of the CUDA source changes.
func TestArgsAddedField(t *testing.T) {
	fams := []family{{"backend/x.go", []args{{"SGDArgs", "i64 n; double momentum, decay; T *w; const T *g; i64 extra; T *mom; const double *lr"}}}}
	g, err := argsGoFile(fams)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\n\tG +Operand\n\tExtra +int\n\tMom +Operand\n`).Match(g) {
		t.Errorf("the Go struct lacks the added field in its place:\n%s", g)
	}
	src := "before\ntemplate <typename T> struct SGDArgs { i64 n; };\nafter\n"
	c, err := spliceArgs(src, fams)
	if err != nil {
		t.Fatal(err)
	}
	want := "before\ntemplate <typename T> struct SGDArgs { i64 n; double momentum, decay; T *w; const T *g; i64 extra; T *mom; const double *lr; };" + marker + "\nafter\n"
	if c != want {
		t.Errorf("spliced:\n%s\nwant:\n%s", c, want)
	}
}

// TestArgsRefused checks that tables the structs cannot be written from, and a
// CUDA source that lacks a struct's line or keeps a marked line of a struct
// the tables lack, are refused with an error that names the problem.
func TestArgsRefused(t *testing.T) {
	one := func(fields string) []family { return []family{{"backend/x.go", []args{{"XArgs", fields}}}} }
	line := "template <typename T> struct XArgs { i64 n; };\n"
	for _, c := range []struct {
		name string
		fams []family
		src  string
		want string
	}{
		{"unknown type", one("float x"), line, "not one of the table's"},
		{"address of a scalar", one("i64 @n"), line, "not one of the table's"},
		{"two pointers", one("T *a, b"), line, "more than one name"},
		{"name twice", one("i64 n; double n"), line, "field n twice"},
		{"bad name", one("i64 1n"), line, "not an identifier"},
		{"no line", one("i64 n"), "struct YArgs { i64 n; };\n", "defined in 0 lines"},
		{"two lines", one("i64 n"), line + line, "defined in 2 lines"},
		{"stale marked line", one("i64 n"), line + "template <typename T> struct ZArgs { i64 n; };" + marker + "\n", "ZArgs marked"},
	} {
		_, err := spliceArgs(c.src, c.fams)
		if err == nil {
			_, err = argsGoFile(c.fams)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	twice := []family{{"backend/x.go", []args{{"XArgs", "i64 n"}}}, {"backend/y.go", []args{{"XArgs", "i64 n"}}}}
	if _, err := argsGoFile(twice); err == nil || !strings.Contains(err.Error(), "XArgs twice") {
		t.Errorf("a struct in two families: %v", err)
	}
}
