package backendtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
)

// TestEveryKernelHasCases checks that every kernel type of package backend
// with a CPU and a CUDA implementation (those its files declare defined) has cases here in both float types, so that a
// kernel added to a family file cannot go untested on the device.
func TestEveryKernelHasCases(t *testing.T) {
	kernels := definedKernels(t)
	if len(kernels) < 40 {
		t.Fatalf("found %d kernel types in package backend's defined lists, want them all: %v", len(kernels), kernels)
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
		have := map[string]bool{}
		for _, c := range Cases(dt) {
			have[reflect.TypeOf(c.Kernel).Name()] = true
		}
		for _, k := range kernels {
			if !have[k] {
				t.Errorf("%v: no case of backend.%s", dt, k)
			}
		}
	}
}

// definedKernels returns the types that package backend's files list in
// var _ defined = K{} and their []defined{...} literals.
func definedKernels(t *testing.T) []string {
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec: // var _ defined = K{}
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "defined" {
					names = append(names, kernelTypes(n.Values)...)
				}
			case *ast.CompositeLit: // var _ = []defined{K{}, ...}
				if at, ok := n.Type.(*ast.ArrayType); ok {
					if id, ok := at.Elt.(*ast.Ident); ok && id.Name == "defined" {
						names = append(names, kernelTypes(n.Elts)...)
					}
				}
			}
			return true
		})
	}
	return names
}

// kernelTypes returns the types of the composite literals among es.
func kernelTypes(es []ast.Expr) []string {
	var names []string
	for _, e := range es {
		if k, ok := e.(*ast.CompositeLit); ok {
			if id, ok := k.Type.(*ast.Ident); ok {
				names = append(names, id.Name)
			}
		}
	}
	return names
}
