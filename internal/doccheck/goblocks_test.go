package doccheck

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A Go block of the documentation (```go) is type-checked against the
// module as one of three forms, told apart by its text:
//
//   - a whole file (its first code line is "package ..."): checked as it
//     stands, with the imports it writes;
//   - declarations (it parses as a file's body: types, funcs, vars): checked
//     as a file of its own;
//   - statements (anything else): checked as the body of a function that
//     returns error, so that "return err" works; a local variable it
//     declares and does not use is allowed, as a fragment may stop early.
//
// What a block assumes is named in the block, in lines that read
//
//	// given: params []param.Param; solver *optim.Solver; path, dir string
//
// each a list of Go variable declarations separated by ';', declared as
// package variables around the block (a function is a variable of func
// type: "// given: computeGradient func(grad, w []float32)"). The packages a
// declaration or fragment uses are imported by their names: orthonet's
// (optim, param, program, cpu for backend/cpu, ...), gorgonia and tensor,
// and the standard ones of stdImports; a whole file imports for itself.
// Each block is checked on its own: one block cannot use another's names.

// stdImports are the standard packages a fragment may use by name.
var stdImports = map[string]string{
	"errors": "errors", "fmt": "fmt", "io": "io", "log": "log", "math": "math", "os": "os",
	"filepath": "path/filepath", "rand": "math/rand/v2", "slices": "slices", "strings": "strings",
	"time": "time", "context": "context", "sync": "sync",
}

// goBlock is a Go block of a documentation file, made into a Go file.
type goBlock struct {
	file string // the documentation file, relative to the module root
	line int    // the block's first line in it
	src  string // the Go file the block was made into
	kind string // "file", "declarations" or "statements"
}

// packageNames returns the import paths of the module's packages (but
// internal/ and cmd/ ones) and gorgonia's by their package names.
func packageNames(t *testing.T) map[string]string {
	t.Helper()
	out, err := goCommand("list", "-f", "{{.Name}} {{.ImportPath}}", "./...", "gorgonia.org/gorgonia", "gorgonia.org/tensor").Output()
	if err != nil {
		t.Fatalf("go list: %v", stderrOf(err))
	}
	names := map[string]string{}
	for name, path := range stdImports {
		names[name] = path
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, path, _ := strings.Cut(l, " ")
		if strings.Contains(path, "/internal/") || strings.Contains(path, "/cmd/") || name == "main" {
			continue
		}
		if old, ok := names[name]; ok && old != path {
			t.Fatalf("two packages named %s: %s and %s", name, old, path)
		}
		names[name] = path
	}
	return names
}

// goCommand is the go command run in the module's root, with the build
// tags the tests were built with.
func goCommand(args ...string) *exec.Cmd {
	if buildTags != "" {
		args = append(args[:1:1], append([]string{"-tags", buildTags}, args[1:]...)...)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	return cmd
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("%v: %s", err, ee.Stderr)
	}
	return err.Error()
}

// makeGoBlock turns the code of a Go block into a Go file, importing from
// names the packages it uses.
func makeGoBlock(file string, b block, names map[string]string) (goBlock, error) {
	g := goBlock{file: file, line: b.line}
	lineDirective := fmt.Sprintf("//line %s:%d\n", file, b.line)
	code := b.code
	if first := strings.TrimSpace(code); strings.HasPrefix(first, "package ") {
		g.kind, g.src = "file", lineDirective+code
		return g, nil
	}
	var given []string
	for i, l := range strings.Split(code, "\n") {
		decl, ok := strings.CutPrefix(strings.TrimSpace(l), "// given:")
		if !ok {
			continue
		}
		for _, d := range strings.Split(decl, ";") {
			if d = strings.TrimSpace(d); d != "" {
				given = append(given, fmt.Sprintf("%s\n%s", fmt.Sprintf("//line %s:%d", file, b.line+i), d))
			}
		}
	}
	decls := "var (\n" + strings.Join(given, "\n") + "\n)\n"
	fset := token.NewFileSet()
	g.kind = "statements"
	body := "func _() error {\n" + lineDirective + code + "\nreturn nil\n}\n"
	if _, err := parser.ParseFile(fset, "", "package doc\n"+code, parser.SkipObjectResolution); err == nil {
		g.kind, body = "declarations", lineDirective+code
	}
	src := "package doc\n\n" + decls + body
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		var list []string
		for _, e := range scanErrors(err) {
			list = append(list, fmt.Sprintf("%s (in the Go block at %s:%d)", e, file, b.line))
		}
		return g, errors.New(strings.Join(list, "\n"))
	}
	var imports []string
	for _, id := range f.Unresolved {
		if path, ok := names[id.Name]; ok && isPackageUse(f, id) {
			if spec := fmt.Sprintf("%s %q", id.Name, path); !slices.Contains(imports, spec) {
				imports = append(imports, spec)
			}
		}
	}
	slices.Sort(imports)
	imp := ""
	if len(imports) > 0 {
		imp = "import (\n" + strings.Join(imports, "\n") + "\n)\n"
	}
	g.src = "package doc\n\n" + imp + decls + body
	return g, nil
}

// isPackageUse reports whether the unresolved identifier id is the package
// of a selector (pkg.Name).
func isPackageUse(f *ast.File, id *ast.Ident) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok && s.X == id {
			found = true
		}
		return !found
	})
	return found
}

func scanErrors(err error) []string {
	var list []string
	var el interface{ Unwrap() []error }
	if errors.As(err, &el) {
		for _, e := range el.Unwrap() {
			list = append(list, e.Error())
		}
		return list
	}
	return []string{err.Error()}
}

// exportData maps import paths to their compiled export data, built by the
// go command (from its cache when the packages are built already).
type exportData map[string]string

func (e exportData) lookup(path string) (io.ReadCloser, error) {
	f, ok := e[path]
	if !ok {
		return nil, fmt.Errorf("no export data for %q", path)
	}
	return os.Open(f)
}

// checkGoBlocks type-checks blocks against the module, and returns one
// error line per fault, at the documentation's file and line.
func checkGoBlocks(blocks []goBlock) ([]string, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	paths := map[string]bool{}
	var faults []string
	for i, b := range blocks {
		f, err := parser.ParseFile(fset, fmt.Sprintf("block%d.go", i), b.src, parser.ParseComments)
		if err != nil {
			faults = append(faults, scanErrors(err)...)
			files = append(files, nil)
			continue
		}
		files = append(files, f)
		for _, s := range f.Imports {
			paths[strings.Trim(s.Path.Value, `"`)] = true
		}
	}
	exports := exportData{}
	if len(paths) > 0 {
		args := []string{"list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}} {{.Export}}{{end}}"}
		for p := range paths {
			args = append(args, p)
		}
		out, err := goCommand(args...).Output()
		if err != nil {
			// an unknown import is the block's fault: name it
			return nil, fmt.Errorf("go list -export of the blocks' imports: %s", stderrOf(err))
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if path, file, ok := strings.Cut(l, " "); ok {
				exports[path] = file
			}
		}
	}
	imp := importer.ForCompiler(fset, "gc", exports.lookup)
	for i, f := range files {
		if f == nil {
			continue
		}
		conf := types.Config{
			Importer: imp,
			Error: func(err error) {
				var te types.Error
				if errors.As(err, &te) && te.Soft && blocks[i].kind == "statements" && strings.Contains(te.Msg, "declared and not used") {
					return
				}
				faults = append(faults, err.Error())
			},
		}
		_, _ = conf.Check("doc", fset, []*ast.File{f}, nil)
	}
	return faults, nil
}

// docGoBlocks returns the Go blocks of the documentation files.
func docGoBlocks(t *testing.T, dir string, files []string, names map[string]string) ([]goBlock, []string) {
	t.Helper()
	var blocks []goBlock
	var faults []string
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		md, _ := parseMarkdown(string(text))
		for _, b := range md {
			if b.lang != "go" {
				continue
			}
			g, err := makeGoBlock(f, b, names)
			if err != nil {
				faults = append(faults, err.Error())
				continue
			}
			blocks = append(blocks, g)
		}
	}
	return blocks, faults
}

// TestGoBlocksCompile type-checks every Go block of README.md, CHANGELOG.md
// and docs/*.md against the module (see the comment at the top of this file
// for the forms a block takes).
func TestGoBlocksCompile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	blocks, faults := docGoBlocks(t, root, docFiles(t), packageNames(t))
	more, err := checkGoBlocks(blocks)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(faults, more...) {
		t.Error(f)
	}
	count := map[string]int{}
	for _, b := range blocks {
		count[b.kind]++
	}
	t.Logf("%d Go blocks checked: %v", len(blocks), count)
}

// TestGoBlockFaultsNamed checks that a wrong block of each form is
// reported at its own file and line, and that the right ones pass.
func TestGoBlockFaultsNamed(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	doc := "# x\n\n```go\n// given: w []float64; m manifold.Kind\n" + // a right fragment
		"p := optim.Param{Name: \"w\", Shape: []int{2, 2}, Value: optim.Host[float64](w), Manifold: m}\n_ = p\n```\n\n" +
		"```go\n// given: w []float64\nw.Step()\n```\n\n" + // line 11: w has no method
		"```go\ntype T struct{}\n\nfunc (T) Name() string { return 1 }\n```\n\n" + // line 17: wrong type
		"```go\nx := undefinedName + 1\n```\n\n" + // line 21: undefined
		"```go\nfor i := range 3 {\n```\n\n" + // from line 25: syntax (the end, line 28)
		"```go\npackage main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ok\") }\n```\n" // a right file
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "doc.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, faults := docGoBlocks(t, dir, []string{"doc.md"}, packageNames(t))
	more, err := checkGoBlocks(blocks)
	if err != nil {
		t.Fatal(err)
	}
	faults = append(faults, more...)
	var lines []string
	for _, f := range faults {
		file, rest, _ := strings.Cut(f, ":")
		line, _, _ := strings.Cut(rest, ":")
		lines = append(lines, file+":"+line)
	}
	slices.Sort(lines)
	if want := []string{"doc.md:11", "doc.md:17", "doc.md:21", "doc.md:28"}; !slices.Equal(lines, want) {
		t.Errorf("faults at %v, want %v:\n%s", lines, want, strings.Join(faults, "\n"))
	}
	var kinds bytes.Buffer
	for _, b := range blocks {
		fmt.Fprint(&kinds, b.kind, " ")
	}
	if got, want := kinds.String(), "statements statements declarations statements file "; got != want {
		t.Errorf("kinds %q, want %q", got, want)
	}
}
