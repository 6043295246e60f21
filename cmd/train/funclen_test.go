package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFunctionLines is the most lines a function of cmd/train may take, from
// its func to its closing brace: one concern a function, read at a glance.
const maxFunctionLines = 60

// longFunctions names the functions allowed more lines, each with why
// (none now). A name is "name" or "Receiver.name".
var longFunctions = map[string]string{}

// TestFunctionLength checks every function and method of the package's
// non-test files and of package training, the loop it runs (whatever their
// build tags), against maxFunctionLines,
// and that each exception of longFunctions still names a long function.
func TestFunctionLength(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := filepath.Glob(filepath.Join("..", "..", "training", "*.go"))
	if err != nil || len(lib) == 0 {
		t.Fatalf("package training's files: %v, %v", lib, err)
	}
	files = append(files, lib...)
	fset := token.NewFileSet()
	long := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := funcName(fd)
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > maxFunctionLines {
				long[name] = true
				if _, ok := longFunctions[name]; !ok {
					t.Errorf("%s:%d: %s takes %d lines, more than %d: split it by concern", path, start.Line, name, n, maxFunctionLines)
				}
			}
		}
	}
	for name := range longFunctions {
		if !long[name] {
			t.Errorf("longFunctions names %s, which is not longer than %d lines (or is gone): remove it", name, maxFunctionLines)
		}
	}
}

// funcName returns "name" of a function, "Receiver.name" of a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
