package funclen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the module's root, relative to this package's folder (where go
// test runs a package's tests).
const root = "../.."

// maxFunctionLines is the most lines a function may take, from its func to
// its closing brace: one concern a function, read at a glance.
const maxFunctionLines = 60

// longFunctions names the functions allowed more lines, each with why. A
// name is the function's folder, relative to the module root, a dot, and
// "name" of a function or "Receiver.name" of a method:
// "program.exportLinAlg", "program.compiler.matchConv".
var longFunctions = map[string]string{}

// skipDirs are the folders of the module root that hold no source of its
// own: build outputs and fetched tools.
var skipDirs = map[string]bool{"build": true, "bin": true, "out": true}

// TestFunctionLength checks every function and method of the module's
// non-test, non-generated Go files (whatever their build tags) against
// maxFunctionLines, and that each exception of longFunctions still names a
// long function.
func TestFunctionLength(t *testing.T) {
	files := sourceFiles(t)
	if len(files) == 0 {
		t.Fatal("no Go files found under the module root")
	}
	fset := token.NewFileSet()
	long := map[string]bool{}
	for _, path := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, path), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if ast.IsGenerated(f) {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := qualified(filepath.ToSlash(filepath.Dir(path)), funcName(fd))
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > maxFunctionLines {
				long[name] = true
				if _, ok := longFunctions[name]; !ok {
					t.Errorf("%s:%d: %s takes %d lines, more than %d: split it by concern", filepath.ToSlash(path), start.Line, name, n, maxFunctionLines)
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

// TestSourceFilesCoverModule checks that the walk of TestFunctionLength
// reaches the packages it must (cmd/train and training among them) and
// leaves out test files.
func TestSourceFilesCoverModule(t *testing.T) {
	dirs := map[string]bool{}
	for _, path := range sourceFiles(t) {
		if strings.HasSuffix(path, "_test.go") {
			t.Errorf("%s is a test file", path)
		}
		dirs[filepath.ToSlash(filepath.Dir(path))] = true
	}
	for _, want := range []string{"cmd/train", "training", "program", "backend/backendtest", "backend/cuda"} {
		if !dirs[want] {
			t.Errorf("no source file of %s checked", want)
		}
	}
}

// sourceFiles returns the module's non-test Go files, relative to its root,
// sorted: every folder but the build outputs of skipDirs, hidden folders,
// testdata and folders of another module (with their own go.mod).
func sourceFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	module := os.DirFS(root)
	err := fs.WalkDir(module, ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || name == "testdata" || (path.Dir(rel) == "." && skipDirs[name]) {
				return fs.SkipDir
			}
			if _, err := fs.Stat(module, path.Join(rel, "go.mod")); err == nil {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// qualified returns a function's name in longFunctions: its folder, a dot
// and its name (the name alone at the module root).
func qualified(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "." + name
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
	switch generic := typ.(type) { // a receiver of type parameters: T[E] or T[K, V]
	case *ast.IndexExpr:
		typ = generic.X
	case *ast.IndexListExpr:
		typ = generic.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
