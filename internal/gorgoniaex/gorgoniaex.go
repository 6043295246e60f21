// Package gorgoniaex builds Gorgonia's own examples, their model code
// unchanged, into programs that run the model on the tape machine and as a
// compiled program of orthonet's (package harness): the proof that a
// Gorgonia model orthonet never saw compiles. An example's files are read
// from the module cache and copied as they are but for their main
// function, which is cut off (with the imports only it used), as a user who
// copies the model into a program of their own would; a short main of the
// harness's takes its place.
package gorgoniaex

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Example is one of Gorgonia's examples with the main function that runs
// its model in the harness.
type Example struct {
	// Name is the example's folder under gorgonia's examples/.
	Name string
	// Main is the Go source of the harness's main file, package main.
	Main string
}

// Examples are the Gorgonia examples whose models compile. Each main
// builds the model the way the example's own main does.
var Examples = []Example{
	{Name: "convnet", Main: mnistMain("convnet", "newConvNet")},
	{Name: "resnet", Main: mnistMain("resnet", "newResNet")},
}

// mnistMain returns the main of an example whose model is built by
// newModel(g) from 28 x 28 images of one channel into 10 classes, with the
// four dropout rates d0 to d3, the method fwd and the Stiefel weight w3:
// convnet and resnet are written alike.
func mnistMain(name, newModel string) string {
	return `package main

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/gorgoniaex/harness"
)

func main() {
	harness.Main(harness.Example{Name: "` + name + `", Input: []int{1, 28, 28}, Classes: 10, Stiefel: "w3",
		Build: func(g *G.ExprGraph, t tensor.Dtype, batch int, dropout float64) (*harness.Model, error) {
			dt = t
			x := G.NewTensor(g, dt, 4, G.WithShape(batch, 1, 28, 28), G.WithName("x"))
			m := ` + newModel + `(g)
			if dropout >= 0 {
				m.d0, m.d1, m.d2, m.d3 = dropout, dropout, dropout, dropout
			}
			if err := m.fwd(x); err != nil {
				return nil, err
			}
			return &harness.Model{X: x, Out: m.out, Learnables: m.learnables(), Probs: true}, nil
		}})
}
`
}

// Find returns the example named name.
func Find(name string) (Example, error) {
	for _, e := range Examples {
		if e.Name == name {
			return e, nil
		}
	}
	return Example{}, fmt.Errorf("gorgoniaex: no example %q", name)
}

// ModuleDir returns the folder of the gorgonia module this build uses, as
// the go command resolves it from dir (a folder of orthonet's module).
func ModuleDir(dir string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "gorgonia.org/gorgonia")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("gorgoniaex: go list -m gorgonia.org/gorgonia: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	d := strings.TrimSpace(string(out))
	if d == "" {
		return "", errors.New("gorgoniaex: gorgonia.org/gorgonia is not in the module cache (go mod download)")
	}
	return d, nil
}

// Extract writes into dst the Go files (tests excluded) of the example in
// folder src, each as it is but for the function main, which is cut off
// with the imports nothing else uses. It returns the files' names.
func Extract(src, dst string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	cut := false
	for _, path := range names {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("gorgoniaex: %w", err)
		}
		res, hadMain, err := CutMain(filepath.Base(path), text)
		if err != nil {
			return nil, err
		}
		cut = cut || hadMain
		name := filepath.Base(path)
		if err := os.WriteFile(filepath.Join(dst, name), res, 0o644); err != nil {
			return nil, fmt.Errorf("gorgoniaex: %w", err)
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("gorgoniaex: no Go files in %s", src)
	}
	if !cut {
		return nil, fmt.Errorf("gorgoniaex: no function main in %s", src)
	}
	return out, nil
}

// CutMain returns the Go file text without its function main (if it has
// one) and without the imports that only main used, and whether it had
// one. Everything else is kept byte for byte.
func CutMain(name string, text []byte) ([]byte, bool, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, text, parser.ParseComments)
	if err != nil {
		return nil, false, fmt.Errorf("gorgoniaex: %w", err)
	}
	var main *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "main" {
			main = fd
		}
	}
	if main == nil {
		return text, false, nil
	}
	// Cuts as byte ranges of the original text, last first: main with
	// its doc comment, then every import spec nothing else refers to.
	start := main.Pos()
	if main.Doc != nil {
		start = main.Doc.Pos()
	}
	cuts := []span{{fset.Position(start).Offset, fset.Position(main.End()).Offset}}
	cuts = append(cuts, unusedImports(fset, f, text, usedPackages(f, main))...)
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].lo > cuts[j].lo })
	res := append([]byte(nil), text...)
	for _, c := range cuts {
		res = append(res[:c.lo], res[c.hi:]...)
	}
	formatted, err := format.Source(res)
	if err != nil {
		return nil, false, fmt.Errorf("gorgoniaex: %s without main: %w", name, err)
	}
	return formatted, true, nil
}

// span is a byte range of a file's text.
type span struct{ lo, hi int }

// unusedImports returns the byte ranges in text, the source of f, of the
// import specs whose package used does not name (but blank and dot
// imports), each with its doc comment and its whole line where it is alone
// on it.
func unusedImports(fset *token.FileSet, f *ast.File, text []byte, used map[string]bool) []span {
	var cuts []span
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			path, _ := strconv.Unquote(is.Path.Value)
			local := filepath.Base(path)
			if is.Name != nil {
				local = is.Name.Name
			}
			if local == "_" || local == "." || used[local] || used[guessName(path)] {
				continue
			}
			lo, hi := fset.Position(is.Pos()).Offset, fset.Position(is.End()).Offset
			if is.Doc != nil {
				lo = fset.Position(is.Doc.Pos()).Offset
			}
			// The whole line, where the spec is alone on it.
			for lo > 0 && (text[lo-1] == ' ' || text[lo-1] == '\t') {
				lo--
			}
			if (lo == 0 || text[lo-1] == '\n') && hi < len(text) && text[hi] == '\n' {
				hi++
			}
			cuts = append(cuts, span{lo, hi})
		}
	}
	return cuts
}

// usedPackages returns the names of the packages f refers to outside skip.
func usedPackages(f *ast.File, skip ast.Node) map[string]bool {
	used := map[string]bool{}
	for _, d := range f.Decls {
		if d == skip {
			continue
		}
		ast.Inspect(d, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok {
					used[id.Name] = true
				}
			}
			return true
		})
	}
	return used
}

// guessName returns the package name an import path most likely declares:
// its last element without a version suffix (gopkg.in/cheggaaa/pb.v1: pb).
func guessName(path string) string {
	base := filepath.Base(path)
	if i := strings.Index(base, ".v"); i > 0 {
		base = base[:i]
	}
	return strings.TrimPrefix(base, "go-")
}

// Generate writes into dir (an empty folder inside orthonet's module) the
// example's files from gorgonia's module folder mod, main cut off, and the
// harness's main.
func Generate(ex Example, mod, dir string) error {
	if _, err := Extract(filepath.Join(mod, "examples", ex.Name), dir); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "orthonet_main.go"), []byte(ex.Main), 0o644)
}

// Build generates the example in a new hidden folder of the module at root
// (hidden, so that ./... patterns pass it by), builds it with the build
// tags into the binary out, and removes the folder.
func Build(ex Example, root, tags, out string) error {
	mod, err := ModuleDir(root)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(root, ".gorgoniaex-"+ex.Name+"-")
	if err != nil {
		return fmt.Errorf("gorgoniaex: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := Generate(ex, mod, dir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "orthonet_blas.go"), []byte(blasFile), 0o644); err != nil {
		return err
	}
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./"+filepath.Base(dir))...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gorgoniaex: building %s: %v\n%s", ex.Name, err, b)
	}
	return nil
}

// blasFile points Gorgonia's BLAS at the one orthonet's compiled programs
// use (OpenBLAS where it is installed), as package training does.
const blasFile = `package main

import (
	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/internal/linalg"
)

func init() { G.Use(linalg.Implementation()) }
`
