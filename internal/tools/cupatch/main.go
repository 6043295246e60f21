// Command cupatch adapts a vendored copy of gorgonia.org/cu to the CUDA and
// cuDNN headers of the machine that builds it, so that orthonet's `cuda`
// build compiles against CUDA 12/13 and cuDNN 9 and starts without a GPU.
//
// Usage:
//
//	cupatch -dir vendor/gorgonia.org/cu -I /usr/local/cuda/include -I /path/to/cudnn/include
//
// It makes three kinds of change, and prints each one:
//   - Declarations that use a CUDA or cuDNN symbol the headers no longer
//     declare (cuDNN 9 removed the algorithm descriptor, persistent RNN plan
//     and several RNN functions) are cut out, with every declaration of the
//     same package that used them, and the imports left unused.
//   - Against CUDA 13 headers, where cuCtxCreate takes a fourth argument (its
//     creation parameters), the calls pass nil for it, which means the
//     defaults of the old three-argument call.
//   - The package's init no longer exits the process when cuInit fails (no
//     driver or no GPU); later calls return the driver's error instead.
//
// The tool edits files in place and only cuts or rewrites the lines it names;
// running it twice changes nothing the second time.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type dirs []string

func (d *dirs) String() string     { return strings.Join(*d, ",") }
func (d *dirs) Set(s string) error { *d = append(*d, s); return nil }

func main() {
	var inc dirs
	dir := flag.String("dir", "", "the vendored gorgonia.org/cu folder to patch")
	flag.Var(&inc, "I", "a folder of CUDA or cuDNN headers (repeat the flag)")
	flag.Parse()
	if *dir == "" || len(inc) == 0 {
		fmt.Fprintln(os.Stderr, "cupatch: need -dir and at least one -I")
		os.Exit(2)
	}
	if err := run(*dir, inc, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cupatch:", err)
		os.Exit(1)
	}
}

// run patches the cu module at dir against the headers in inc.
func run(dir string, inc []string, log io.Writer) error {
	hdr, err := readHeaders(inc)
	if err != nil {
		return err
	}
	known := identifiers(hdr)
	if !known["cuInit"] {
		return fmt.Errorf("no cuda.h among the headers in %s", strings.Join(inc, ", "))
	}
	version := cudaVersion(hdr)
	fmt.Fprintf(log, "cupatch: CUDA_VERSION %d, cuDNN %s\n", version, cudnnVersion(hdr))
	if err := patchInit(filepath.Join(dir, "cu.go"), log); err != nil {
		return err
	}
	if version >= 13000 {
		if err := patchCtxCreate(dir, log); err != nil {
			return err
		}
	}
	changed := make(map[string]bool)
	if version >= 13000 {
		for _, f := range changedIn13 {
			changed[f] = true
		}
	}
	for _, pkg := range []string{dir, filepath.Join(dir, "blas"), filepath.Join(dir, "dnn")} {
		if _, err := os.Stat(pkg); err != nil {
			continue
		}
		if err := pruneMissing(pkg, known, changed, log); err != nil {
			return err
		}
	}
	return nil
}

// readHeaders concatenates every .h file directly inside the given folders.
func readHeaders(inc []string) ([]byte, error) {
	var all bytes.Buffer
	for _, d := range inc {
		files, err := filepath.Glob(filepath.Join(d, "*.h"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no headers in %s", d)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			all.Write(b)
			all.WriteByte('\n')
		}
	}
	return all.Bytes(), nil
}

var identRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

func identifiers(src []byte) map[string]bool {
	m := make(map[string]bool)
	for _, id := range identRE.FindAll(src, -1) {
		m[string(id)] = true
	}
	return m
}

var versionRE = regexp.MustCompile(`#define\s+CUDA_VERSION\s+(\d+)`)

func cudaVersion(hdr []byte) int {
	m := versionRE.FindSubmatch(hdr)
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

var cudnnRE = regexp.MustCompile(`#define\s+CUDNN_MAJOR\s+(\d+)`)

func cudnnVersion(hdr []byte) string {
	if m := cudnnRE.FindSubmatch(hdr); m != nil {
		return string(m[1])
	}
	return "not found"
}

// patchInit stops cu's init from calling os.Exit when cuInit fails.
func patchInit(file string, log io.Writer) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	const exit = "\t\tos.Exit(1)\n"
	if !bytes.Contains(src, []byte(exit)) {
		if bytes.Contains(src, []byte("initErr = err")) {
			return nil // already patched
		}
		return fmt.Errorf("%s: no os.Exit in init; this cu version is not the one the patch knows", file)
	}
	re := regexp.MustCompile(`(?m)^\t\tfmt\.Printf\("Error in initialization.*\n\t\tos\.Exit\(1\)\n`)
	if !re.Match(src) {
		return fmt.Errorf("%s: init's error branch is not the one the patch knows", file)
	}
	src = re.ReplaceAll(src, []byte("\t\tinitErr = err // orthonet: no exit without a GPU; later calls fail with the driver's error\n"))
	src = bytes.Replace(src, []byte("\nfunc init() {"), []byte("\n// initErr is cuInit's error, if any.\nvar initErr error\n\nfunc init() {"), 1)
	if err := writeWithImports(file, src); err != nil {
		return err
	}
	fmt.Fprintf(log, "cupatch: %s: init keeps cuInit's error instead of exiting\n", file)
	return nil
}

var ctxCreateRE = regexp.MustCompile(`C\.cuCtxCreate\((&[A-Za-z_.]+), C\.uint\(`)

// patchCtxCreate passes nil creation parameters to CUDA 13's cuCtxCreate.
func patchCtxCreate(dir string, log io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		n := len(ctxCreateRE.FindAll(src, -1))
		if n == 0 {
			continue
		}
		src = ctxCreateRE.ReplaceAll(src, []byte("C.cuCtxCreate($1, nil, C.uint("))
		if err := os.WriteFile(f, src, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(log, "cupatch: %s: %d cuCtxCreate calls take CUDA 13's creation parameters (nil)\n", f, n)
	}
	return nil
}

// cPrefix says which C names are CUDA's, cuBLAS's or cuDNN's own.
var cPrefix = regexp.MustCompile(`^(cu[A-Z]|CU[A-Z_]|cudnn[A-Z]|CUDNN_|cublas[A-Z]|CUBLAS_)[A-Za-z0-9_]*$`)

// cDefRE finds the names a C file defines: the last word of a typedef, or
// the name of a function defined or declared at the start of a line.
var cDefRE = regexp.MustCompile(`(?m)(?:}\s*(\w+)\s*;|^typedef\s+[^;{}()]*?\b(\w+)\s*;|^(?:extern\s+)?\w[\w\s\*]*?\b(\w+)\s*\()`)

var (
	blockCommentRE = regexp.MustCompile(`(?s)/\*.*?\*/`)
	lineCommentRE  = regexp.MustCompile(`//[^\n]*`)
	includeRE      = regexp.MustCompile(`(?m)^\s*#\s*include[^\n]*`)
)

// cCode is C source without comments and #include lines.
func cCode(b []byte) []byte {
	b = blockCommentRE.ReplaceAll(b, nil)
	b = lineCommentRE.ReplaceAll(b, nil)
	return includeRE.ReplaceAll(b, nil)
}

// changedIn13 are driver functions whose CUDA 13 prototypes take other
// arguments (a CUmemLocation instead of a device, edge data for graph
// dependencies) than cu passes; Gorgonia uses none of them, so their
// wrappers are cut rather than rewritten.
var changedIn13 = []string{"cuMemAdvise", "cuMemPrefetchAsync", "cuGraphAddDependencies", "cuGraphGetEdges",
	"cuGraphNodeGetDependencies", "cuGraphNodeGetDependentNodes", "cuGraphRemoveDependencies"}

// pruneMissing cuts from the package in dir every local C file and every Go
// declaration that uses a CUDA/cuDNN name the headers lack, then every
// declaration that uses what was cut, then imports left unused.
func pruneMissing(dir string, known, changed map[string]bool, log io.Writer) error {
	// Local C files first: a .c/.h pair that needs a missing name goes, and
	// the functions its header declared become missing names themselves.
	missingC := make(map[string]bool)
	cfiles, _ := filepath.Glob(filepath.Join(dir, "*.[ch]"))
	local := make(map[string]bool) // names the package's C files define
	for _, f := range cfiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, m := range cDefRE.FindAllSubmatch(b, -1) {
			local[string(m[1])+string(m[2])+string(m[3])] = true
		}
	}
	var removedC []string
	lacking := make(map[string][]string) // by file stem: a .c and its .h go together
	for _, f := range cfiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		stem := strings.TrimSuffix(f, filepath.Ext(f))
		for id := range identifiers(cCode(b)) {
			if cPrefix.MatchString(id) && !known[id] && !local[id] {
				lacking[stem] = append(lacking[stem], id)
			}
		}
	}
	for _, f := range cfiles {
		stem := strings.TrimSuffix(f, filepath.Ext(f))
		lacks := lacking[stem]
		if len(lacks) == 0 {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, m := range cDefRE.FindAllSubmatch(b, -1) {
			if len(m[3]) > 0 { // a function: Go code calling it must go too
				missingC[string(m[3])] = true
			}
		}
		if err := os.Remove(f); err != nil {
			return err
		}
		removedC = append(removedC, filepath.Base(f))
		fmt.Fprintf(log, "cupatch: removed %s (%s uses %s)\n", f, filepath.Base(stem)+".[ch]", strings.Join(dedup(lacks), ", "))
	}

	fset := token.NewFileSet()
	gofiles, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	type file struct {
		name string
		src  []byte
		ast  *ast.File
	}
	var files []*file
	for _, f := range gofiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if n := dropIncludes(&src, removedC); n > 0 {
			if err := os.WriteFile(f, src, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(log, "cupatch: %s: dropped %d #include of removed headers\n", f, n)
		}
		a, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			return err
		}
		files = append(files, &file{f, src, a})
	}

	// A declaration's unit is a FuncDecl or one spec of a GenDecl.
	type unit struct {
		f       *file
		node    ast.Node
		names   []string
		cut     bool
		uses    map[string]bool // Go identifiers it mentions
		missing []string        // C names it needs that are gone
	}
	var units []*unit
	for _, f := range files {
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				u := &unit{f: f, node: d}
				if d.Recv == nil {
					u.names = []string{d.Name.Name} // methods are not cascaded by name
				}
				units = append(units, u)
			case *ast.GenDecl:
				if d.Tok == token.IMPORT {
					continue
				}
				for _, s := range d.Specs {
					u := &unit{f: f, node: s}
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							u.names = append(u.names, n.Name)
						}
					case *ast.TypeSpec:
						u.names = []string{s.Name.Name}
					}
					units = append(units, u)
				}
			}
		}
	}
	for _, u := range units {
		u.uses = make(map[string]bool)
		ast.Inspect(u.node, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "C" {
					name := sel.Sel.Name
					if (cPrefix.MatchString(name) && !known[name] && !local[name]) || missingC[name] || changed[name] {
						u.missing = append(u.missing, name)
					}
					return false
				}
				ast.Inspect(sel.X, func(n ast.Node) bool { // the field or method name is not a package-level name
					if id, ok := n.(*ast.Ident); ok {
						u.uses[id.Name] = true
					}
					return true
				})
				return false
			}
			if id, ok := n.(*ast.Ident); ok && id.Name != "_" {
				u.uses[id.Name] = true
			}
			return true
		})
	}
	gone := make(map[string]bool)
	for _, u := range units {
		if len(u.missing) > 0 {
			u.cut = true
			for _, n := range u.names {
				gone[n] = n != "_"
			}
			fmt.Fprintf(log, "cupatch: %s: cut %s (uses C.%s)\n", u.f.name, unitName(u.node), strings.Join(dedup(u.missing), ", C."))
		}
	}
	for changed := true; changed; {
		changed = false
		for _, u := range units {
			if u.cut {
				continue
			}
			for n := range u.uses {
				if gone[n] && !contains(u.names, n) {
					u.cut, changed = true, true
					for _, m := range u.names {
						gone[m] = m != "_"
					}
					fmt.Fprintf(log, "cupatch: %s: cut %s (uses %s)\n", u.f.name, unitName(u.node), n)
					break
				}
			}
		}
	}

	for _, f := range files {
		var cuts [][2]int
		for _, u := range units {
			if u.f != f || !u.cut {
				continue
			}
			cuts = append(cuts, span(fset, f.ast, u.node))
		}
		if len(cuts) == 0 {
			continue
		}
		src := cutRanges(f.src, cuts)
		if err := writeWithImports(f.name, src); err != nil {
			return err
		}
	}
	return nil
}

// span is the byte range of a declaration unit with its doc comment; a spec
// that is its GenDecl's only one takes the whole GenDecl.
func span(fset *token.FileSet, f *ast.File, n ast.Node) [2]int {
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			if s == n && len(g.Specs) == 1 {
				n = g
			}
		}
	}
	start, end := off(n.Pos()), off(n.End())
	switch n := n.(type) {
	case *ast.FuncDecl:
		if n.Doc != nil {
			start = off(n.Doc.Pos())
		}
	case *ast.GenDecl:
		if n.Doc != nil {
			start = off(n.Doc.Pos())
		}
	case *ast.ValueSpec:
		if n.Doc != nil {
			start = off(n.Doc.Pos())
		}
		if n.Comment != nil {
			end = off(n.Comment.End())
		}
	case *ast.TypeSpec:
		if n.Doc != nil {
			start = off(n.Doc.Pos())
		}
		if n.Comment != nil {
			end = off(n.Comment.End())
		}
	}
	return [2]int{start, end}
}

func cutRanges(src []byte, cuts [][2]int) []byte {
	sort.Slice(cuts, func(i, j int) bool { return cuts[i][0] > cuts[j][0] })
	out := append([]byte(nil), src...)
	for _, c := range cuts {
		out = append(out[:c[0]], out[c[1]:]...)
	}
	return out
}

// writeWithImports writes src to file after dropping imports it no longer uses.
func writeWithImports(file string, src []byte) error {
	fset := token.NewFileSet()
	a, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return fmt.Errorf("%s after patching: %w", file, err)
	}
	used := make(map[string]bool)
	ast.Inspect(a, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok {
				used[x.Name] = true
			}
		}
		return true
	})
	var cuts [][2]int
	for _, d := range a.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.IMPORT {
			continue
		}
		for _, s := range g.Specs {
			imp := s.(*ast.ImportSpec)
			if importUsed(imp, used) {
				continue
			}
			var n ast.Node = imp
			if !g.Lparen.IsValid() {
				n = g
			}
			cuts = append(cuts, [2]int{fset.Position(n.Pos()).Offset, fset.Position(n.End()).Offset})
		}
	}
	src = cutRanges(src, cuts)
	if _, err := parser.ParseFile(token.NewFileSet(), file, src, 0); err != nil {
		return fmt.Errorf("%s after dropping imports: %w", file, err)
	}
	return os.WriteFile(file, src, 0o644)
}

// importUsed says whether a file that selects from the names in used needs imp.
func importUsed(imp *ast.ImportSpec, used map[string]bool) bool {
	path, _ := strconv.Unquote(imp.Path.Value)
	if path == "C" || (imp.Name != nil && (imp.Name.Name == "_" || imp.Name.Name == ".")) {
		return true
	}
	name := filepath.Base(path)
	if imp.Name != nil {
		name = imp.Name.Name
	} else if path == "gorgonia.org/cu/dnn" {
		name = "cudnn"
	}
	return used[name]
}

// dropIncludes removes the cgo preamble lines that include one of the
// removed local headers, and says how many it removed.
func dropIncludes(src *[]byte, removed []string) int {
	n := 0
	for _, h := range removed {
		if !strings.HasSuffix(h, ".h") {
			continue
		}
		re := regexp.MustCompile(`(?m)^//\s*#include\s+"` + regexp.QuoteMeta(h) + `"[ \t]*\n`)
		n += len(re.FindAll(*src, -1))
		*src = re.ReplaceAll(*src, nil)
	}
	return n
}

// unitName names a declaration unit in the log.
func unitName(n ast.Node) string {
	switch n := n.(type) {
	case *ast.FuncDecl:
		if n.Recv != nil && len(n.Recv.List) == 1 {
			t := n.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); ok {
				return id.Name + "." + n.Name.Name
			}
		}
		return n.Name.Name
	case *ast.ValueSpec:
		var s []string
		for _, id := range n.Names {
			s = append(s, id.Name)
		}
		return strings.Join(s, ", ")
	case *ast.TypeSpec:
		return "type " + n.Name.Name
	}
	return "?"
}

func dedup(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
