package layercheck

import (
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// module is the module's path; a rule's package or pattern without a dot
// in its first element is relative to it.
const module = "github.com/orthonet/orthonet"

// rules are what each package must not import, directly or through
// another package. A pattern is an import path whose elements may be
// path.Match patterns, and which "/..." ends to take every package below
// it too (as go list's patterns do): "optim/..." is optim and
// optim/device, "backend/*/..." every package below backend but not
// backend itself.
var rules = []struct {
	pkg, forbid, why string
}{
	{"fused", "backend/*/...", "the op layer runs its kernels through package backend (backend.RunHost): which backend runs a program is its caller's choice"},
	{"nn", "backend/*/...", "layers build graphs; the backend that runs them is chosen where they run"},
	{"models", "backend/*/...", "models build graphs; the backend that runs them is chosen where they run"},
	{"param", "backend/*/...", "a parameter's marking knows no backend"},
	{"param", "optim/...", "layers mark weights with a manifold.Kind; paramopt builds optim's Solver over them"},
	{"nn", "optim/...", "layers mark weights with a manifold.Kind; paramopt builds optim's Solver over them"},
	{"models", "optim/...", "models list their params; paramopt builds optim's Solver over them"},
	{"manifold", "optim/...", "the optimizers build on the manifolds, not the other way"},
	{"manifold", "param", "the manifolds are below the parameters that are marked with them"},
	{"manifold", "gorgonia.org/...", "the manifolds are Go over slices, for any graph library"},
	{"optim", "gorgonia.org/...", "optim steps slices, for any graph library (paramopt is its glue to Gorgonia)"},
	{"optim", "param", "optim is below the parameters; paramopt joins the two"},
	{"optim", "backend/...", "optim steps on the host; optim/device steps in a backend's memory"},
	{"backend", "backend/*/...", "the backends implement package backend, which names none of them"},
	{"onnxexport", "program/...", "the ONNX export reads graphs through internal/gorgoniaop, as the compiler does; it compiles nothing"},
	{"program", "onnxexport", "the compiler does not write ONNX; onnxexport is beside it, not below it"},
	{"program/lower", "program", "the lowering emits kernels against virtual buffers for the compiler, which plans and runs them: below it"},
	{"program/lower", "onnxexport", "the lowering writes no ONNX"},
	{"internal/gorgoniaop", "program/...", "gorgoniaop reads Gorgonia's graphs for the compiler and the exporter, below both"},
	{"internal/gorgoniaop", "onnxexport", "gorgoniaop reads Gorgonia's graphs for the compiler and the exporter, below both"},
}

// builds are the configurations whose imports are checked: go list's extra
// arguments and environment.
var builds = []struct {
	name string
	args []string
	env  []string
}{
	{"default", nil, nil},
	{"no cgo", nil, []string{"CGO_ENABLED=0"}},
	{"openblas", []string{"-tags", "openblas"}, nil},
}

// TestImportsPointDown checks every rule in every build.
func TestImportsPointDown(t *testing.T) {
	var pkgs []string
	for _, r := range rules {
		if p := full(r.pkg); !slices.Contains(pkgs, p) {
			pkgs = append(pkgs, p)
		}
	}
	for _, b := range builds {
		imports := importsOf(t, b.args, b.env, pkgs)
		for _, r := range rules {
			p := full(r.pkg)
			deps := closure(imports, p)
			if !slices.Contains(deps, "fmt") {
				t.Fatalf("%s build: go list gave no imports of %s: %q", b.name, r.pkg, deps)
			}
			for _, imp := range deps {
				if matches(full(r.forbid), imp) {
					t.Errorf("%s build: %s imports %s (%s), which matches %s: %s", b.name, r.pkg, imp, chain(imports, p, imp), r.forbid, r.why)
				}
			}
		}
	}
}

// importsOf returns the direct imports of pkgs and of every package they
// import, directly or not, in a build of go list's extra arguments args
// and environment env.
func importsOf(t *testing.T, args, env, pkgs []string) map[string][]string {
	t.Helper()
	a := append([]string{"list"}, args...)
	a = append(a, "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}")
	cmd := exec.Command("go", append(a, pkgs...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go %s: %v: %s", strings.Join(cmd.Args[1:], " "), err, ee.Stderr)
		}
		t.Fatal(err)
	}
	imports := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		imports[f[0]] = f[1:]
	}
	return imports
}

// closure returns every package p imports, directly or not, in the order
// a breadth-first walk of imports finds them.
func closure(imports map[string][]string, p string) []string {
	seen := map[string]bool{p: true}
	var out []string
	for queue := []string{p}; len(queue) > 0; queue = queue[1:] {
		for _, imp := range imports[queue[0]] {
			if !seen[imp] {
				seen[imp] = true
				out = append(out, imp)
				queue = append(queue, imp)
			}
		}
	}
	return out
}

// chain returns a shortest chain of imports from p to imp, "p -> ... ->
// imp", for the message of a broken rule.
func chain(imports map[string][]string, p, imp string) string {
	from := map[string]string{p: ""}
	for queue := []string{p}; len(queue) > 0; queue = queue[1:] {
		for _, next := range imports[queue[0]] {
			if _, ok := from[next]; ok {
				continue
			}
			from[next] = queue[0]
			if next == imp {
				links := []string{imp}
				for q := queue[0]; q != ""; q = from[q] {
					links = append([]string{q}, links...)
				}
				return strings.Join(links, " -> ")
			}
			queue = append(queue, next)
		}
	}
	return p + " -> ? -> " + imp
}

// full returns a rule's package or pattern as a full import path.
func full(p string) string {
	if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
		return p
	}
	return module + "/" + p
}

// matches reports whether the import path p matches pattern (see rules).
func matches(pattern, p string) bool {
	prefix, tree := strings.CutSuffix(pattern, "/...")
	want, got := strings.Split(prefix, "/"), strings.Split(p, "/")
	if len(got) < len(want) || !tree && len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if ok, _ := path.Match(w, got[i]); !ok {
			return false
		}
	}
	return true
}

// TestMatches checks the patterns of the rules.
func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"backend/*/...", "backend/cpu", true},
		{"backend/*/...", "backend/cuda/x", true},
		{"backend/*/...", "backend", false},
		{"backend/*/...", "backendx/cpu", false},
		{"optim/...", "optim", true},
		{"optim/...", "optim/device", true},
		{"optim/...", "optimx", false},
		{"param", "param", true},
		{"param", "paramopt", false},
		{"param", "param/x", false},
		{"gorgonia.org/...", "gorgonia.org/tensor", true},
	} {
		if got := matches(tc.pattern, tc.path); got != tc.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}
