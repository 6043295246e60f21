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
// packs another struct's; every argument struct of the tables (not a
// part of others, a geometry) is launched; and every kernel's struct is
// the tables', none written by hand.
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
	for k, s := range structOf {
		if !tabled[s] {
			t.Errorf("kernel %s takes %s, which the tables lack", k, s)
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
	g, err := argsGoFile(fams, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\n\tG +Operand\n\tExtra +int\n\tMom +Operand\n`).Match(g) {
		t.Errorf("the Go struct lacks the added field in its place:\n%s", g)
	}
	src := "before\ntemplate <typename T> struct SGDArgs { i64 n; };\nafter\n"
	c, err := spliceArgs(src, fams, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "before\ntemplate <typename T> struct SGDArgs { i64 n; double momentum, decay; T *w; const T *g; i64 extra; T *mom; const double *lr; };" + marker + "\nafter\n"
	if c != want {
		t.Errorf("spliced:\n%s\nwant:\n%s", c, want)
	}
}

// TestArgsNamedLength checks that an array whose length a table names comes
// into the Go struct with the length's constant, which the Go file defines,
// and into the C line with its macro, whose #define line is rewritten to
// the table's value; and that an array of pointers is one of Operands, or
// with its name marked @, of addresses.
func TestArgsNamedLength(t *testing.T) {
	fams := []family{{"backend/x.go", []args{{"XArgs", "i64 n; i64 code[STEPS]; const T *in[INPUTS]; u64 *@ws[2]; T *dst"}}}}
	lens := []length{{"INPUTS", "MaxInputs", 4, "the inputs"}, {"STEPS", "MaxSteps", 6, "the steps"}}
	g, err := argsGoFile(fams, lens)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`\n\tMaxInputs += 4 // INPUTS: the inputs\n\tMaxSteps += 6 // STEPS: the steps\n`,
		`\n\tN +int\n\tCode +\[MaxSteps\]int\n\tIn +\[MaxInputs\]Operand\n\tWs +\[2\]uint64\n\tDst +Operand\n`,
	} {
		if !regexp.MustCompile(want).Match(g) {
			t.Errorf("the Go file does not match %q:\n%s", want, g)
		}
	}
	src := "#define INPUTS 3\n#define STEPS 6 // steps\ntemplate <typename T> struct XArgs { i64 n; };\n#define OTHER 1\n"
	c, err := spliceArgs(src, fams, lens)
	if err != nil {
		t.Fatal(err)
	}
	want := "#define INPUTS 4" + marker + "\n#define STEPS 6" + marker +
		"\ntemplate <typename T> struct XArgs { i64 n; i64 code[STEPS]; const T *in[INPUTS]; u64 *ws[2]; T *dst; };" + marker + "\n#define OTHER 1\n"
	if c != want {
		t.Errorf("spliced:\n%s\nwant:\n%s", c, want)
	}
}

// TestArgsRefused checks that tables the structs cannot be written from, and a
// CUDA source that lacks a struct's or a length's line or keeps a marked line
// of one the tables lack, are refused with an error that names the problem.
func TestArgsRefused(t *testing.T) {
	one := func(fields string) []family { return []family{{"backend/x.go", []args{{"XArgs", fields}}}} }
	line := "template <typename T> struct XArgs { i64 n; };\n"
	define := "#define STEPS 4\n"
	steps := []length{{"STEPS", "MaxSteps", 4, "the steps"}}
	for _, c := range []struct {
		name string
		fams []family
		lens []length
		src  string
		want string
	}{
		{"unknown type", one("float x"), nil, line, "not one of the table's"},
		{"address of a scalar", one("i64 @n"), nil, line, "not one of the table's"},
		{"two pointers", one("T *a, b"), nil, line, "more than one name"},
		{"name twice", one("i64 n; double n"), nil, line, "field n twice"},
		{"bad name", one("i64 1n"), nil, line, "not an identifier"},
		{"no line", one("i64 n"), nil, "struct YArgs { i64 n; };\n", "defined in 0 lines"},
		{"two lines", one("i64 n"), nil, line + line, "defined in 2 lines"},
		{"stale marked line", one("i64 n"), nil, line + "template <typename T> struct ZArgs { i64 n; };" + marker + "\n", "ZArgs marked"},
		{"unknown length", one("i64 code[STEPS]"), nil, line, "STEPS not one of the table's lengths"},
		{"length not a macro", one("i64 n"), []length{{"steps", "MaxSteps", 4, ""}}, define + line, "want a macro's name"},
		{"length unexported", one("i64 n"), []length{{"STEPS", "maxSteps", 4, ""}}, define + line, "want a macro's name"},
		{"length zero", one("i64 n"), []length{{"STEPS", "MaxSteps", 0, ""}}, define + line, "want a macro's name"},
		{"length twice", one("i64 n"), []length{{"STEPS", "MaxSteps", 4, ""}, {"STEPS", "MaxOther", 4, ""}}, define + line, "length STEPS twice"},
		{"no define", one("i64 code[STEPS]"), steps, line, "STEPS (lengths) defined in 0 lines"},
		{"stale marked define", one("i64 n"), nil, line + "#define STEPS 4" + marker + "\n", "STEPS marked"},
	} {
		_, err := spliceArgs(c.src, c.fams, c.lens)
		if err == nil {
			_, err = argsGoFile(c.fams, c.lens)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	twice := []family{{"backend/x.go", []args{{"XArgs", "i64 n"}}}, {"backend/y.go", []args{{"XArgs", "i64 n"}}}}
	if _, err := argsGoFile(twice, nil); err == nil || !strings.Contains(err.Error(), "XArgs twice") {
		t.Errorf("a struct in two families: %v", err)
	}
}
