package layercheck

import (
	"fmt"
	"maps"
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

// table is the file that holds layers, for the messages that ask to edit it.
const table = "internal/layercheck/layers_test.go"

// layers are the module's packages, every one that go list lists in a
// build of builds, in layers, the lowest first: a package imports
// (directly) only packages of lower layers, but for the imports exceptions
// allows; packages of one layer import none of each other. A package of no
// layer fails TestImportsPointDown. Imports from tests are not checked. The
// rules above say more than the layers: which packages a package must not
// reach even through lower ones, and why.
var layers = []struct {
	name string
	pkgs []string
}{
	// Leaves that the library shares: dense linear algebra, SGD's and Adam's arithmetic, the memory budget.
	{"base", []string{"internal/linalg", "internal/update", "internal/membudget"}},
	// The Stiefel and Grassmann manifolds: Go over slices, for any graph library.
	{"manifold", []string{"manifold"}},
	// What a device provides (memory and the catalog of kernels), naming no backend.
	{"backend", []string{"backend"}},
	// The CUDA C++ kernels and the planner of their launches, which the kernels' Device methods ask for.
	{"cuda kernels", []string{"internal/cudak"}},
	// The host model of a GPU, on which backend/cuda runs without one.
	{"gpu stand-in", []string{"internal/cudak/standin"}},
	// The backends: the host's and the NVIDIA GPU's.
	{"backends", []string{"backend/cpu", "backend/cuda"}},
	// The optimizers, which step host slices.
	{"optim", []string{"optim"}},
	// Around the optimizers: their steps in a backend's memory, their settings as flags, the paper's baselines and test problems.
	{"around optim", []string{"optim/device", "optim/optflag", "baseline", "internal/problem"}},
	// Gorgonia ops and nodes of orthonet's own: the fused layers, the marking of parameters.
	{"graph ops", []string{"fused", "param"}},
	// The building blocks of orthogonal networks (dense layers, attention, norms), which build graphs of those.
	{"nn", []string{"nn"}},
	// The paper's networks, built of the layers.
	{"models", []string{"models"}},
	// What the compiler and the ONNX export read and write: Gorgonia's graphs, ONNX's wire format.
	{"graph reading", []string{"internal/gorgoniaop", "onnx"}},
	// The lowering of nodes to backend kernels and the ONNX export, beside each other.
	{"lowering, export", []string{"program/lower", "onnxexport"}},
	// The compiler: a Gorgonia graph into a program that a backend runs, and the Solver that steps it.
	{"compiler", []string{"program"}},
	// Training's parts: param's weights to optim (paramopt), checkpoints, data sets, the communicator.
	{"training parts", []string{"paramopt", "checkpoint", "data", "dist"}},
	// The training loop of any Gorgonia model.
	{"training", []string{"training"}},
	// Helpers of tests, above the library so that none of its packages imports them.
	{"test helpers", []string{"internal/testval", "internal/datatest", "internal/foldertest", "internal/mpitest", "internal/onnxrt", "internal/gradcheck"}},
	// Harnesses that run the library end to end, for tests.
	{"test harnesses", []string{"internal/runtest", "internal/gorgoniaex", "internal/gorgoniaex/harness", "backend/backendtest"}},
	// Commands and examples, and the packages that hold only tests of the module: nothing imports them.
	{"top", []string{
		"cmd/bench", "cmd/figure", "cmd/train", "examples/charrnn", "examples/imagefolder",
		"scripts/idx2folder", "backend/gen", "internal/gorgoniaex/run",
		"internal/doccheck", "internal/funclen", "internal/layercheck", "internal/scriptcheck",
	}},
}

// exceptions are the imports that the layers refuse and the module
// allows, each with why: none, and keep it so; an import that points up
// is better moved than listed here.
var exceptions = []struct {
	pkg, imp, why string
}{}

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

// TestImportsPointDown checks, in every build, every rule, and that every
// package of the module has a layer and imports only packages of lower
// layers (see layers), each broken layering reported once with the builds
// it is broken in; and that every package of layers is one that go list
// lists.
func TestImportsPointDown(t *testing.T) {
	layer := layerOf(t)
	listed := map[string]bool{}
	var problems []string
	in := map[string][]string{}
	for _, b := range builds {
		imports := importsOf(t, b.args, b.env, []string{"./..."})
		checkRules(t, b.name, imports)
		for _, p := range layerProblems(layer, imports) {
			if in[p] == nil {
				problems = append(problems, p)
			}
			in[p] = append(in[p], b.name)
		}
		for p := range imports {
			listed[p] = true
		}
	}
	for _, p := range problems {
		t.Errorf("%s (builds: %s)", p, strings.Join(in[p], ", "))
	}
	for _, l := range layers {
		for _, p := range l.pkgs {
			if !listed[full(p)] {
				t.Errorf("layers put %s in layer %s, but go list lists it in no build: remove it from layers in %s", p, l.name, table)
			}
		}
	}
}

// checkRules checks every rule against imports, the direct imports of
// every package of the module and of every package they import, directly
// or not, that go list gave for the build named build.
func checkRules(t *testing.T, build string, imports map[string][]string) {
	t.Helper()
	for _, r := range rules {
		p := full(r.pkg)
		deps := closure(imports, p)
		if !slices.Contains(deps, "fmt") {
			t.Fatalf("%s build: go list gave no imports of %s: %q", build, r.pkg, deps)
		}
		for _, imp := range deps {
			if matches(full(r.forbid), imp) {
				t.Errorf("%s build: %s imports %s (%s), which matches %s: %s", build, r.pkg, imp, chain(imports, p, imp), r.forbid, r.why)
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

// layerProblems returns what breaks the layering in imports, go list's
// direct imports of the packages of one build (as importsOf returns
// them), where layer gives each package's layer (as layerOf returns it):
// a package of the module that has no layer, and an import of a package
// of the same layer or a higher one that exceptions do not allow.
func layerProblems(layer map[string]int, imports map[string][]string) []string {
	var problems []string
	for _, p := range slices.Sorted(maps.Keys(imports)) {
		if !strings.HasPrefix(p, module+"/") {
			continue
		}
		lp, ok := layer[p]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no layer: add it to layers in %s, %s", rel(p), table, fit(layer, imports, p)))
			continue
		}
		for _, imp := range imports[p] {
			li, ok := layer[imp]
			if !ok || li < lp || excepted(p, imp) {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s), a layer not below its own: move the import, or one of the two in layers (%s)",
				rel(p), lp, layers[lp].name, rel(imp), li, layers[li].name, table))
		}
	}
	return problems
}

// layerOf returns the layer of each package of layers, by its full import
// path; a package in two layers fails the test.
func layerOf(t *testing.T) map[string]int {
	t.Helper()
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l.pkgs {
			if j, ok := layer[full(p)]; ok {
				t.Fatalf("layers put %s in layer %s and in layer %s: keep one in %s", p, layers[j].name, l.name, table)
			}
			layer[full(p)] = i
		}
	}
	return layer
}

// fit says which layers p, a package of no layer, fits in: above every
// layer of a package it imports and below every layer of one that imports
// it.
func fit(layer map[string]int, imports map[string][]string, p string) string {
	lo, hi := 0, len(layers)-1
	for _, imp := range imports[p] {
		if l, ok := layer[imp]; ok {
			lo = max(lo, l+1)
		}
	}
	for q, imps := range imports {
		if l, ok := layer[q]; ok && slices.Contains(imps, p) {
			hi = min(hi, l-1)
		}
	}
	switch {
	case lo == hi:
		return fmt.Sprintf("in layer %d (%s), the one its imports and its importers leave", lo, layers[lo].name)
	case lo < hi:
		return fmt.Sprintf("in a layer from %d (%s) to %d (%s), above what it imports and below what imports it", lo, layers[lo].name, hi, layers[hi].name)
	case lo == len(layers) && hi == len(layers)-1:
		return "in a new layer at the top (it imports a package of the top layer)"
	case hi < 0 && lo == 0:
		return "in a new layer at the bottom (a package of the bottom layer imports it)"
	}
	return fmt.Sprintf("where no layer fits (it imports a package of layer %d, %s, and a package of layer %d, %s, imports it): add a layer, or move an import",
		lo-1, layers[lo-1].name, hi+1, layers[hi+1].name)
}

// excepted reports whether exceptions allow p to import imp.
func excepted(p, imp string) bool {
	for _, e := range exceptions {
		if full(e.pkg) == p && full(e.imp) == imp {
			return true
		}
	}
	return false
}

// rel returns a package of the module by its path in the module, as the
// tables name it.
func rel(p string) string {
	return strings.TrimPrefix(p, module+"/")
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
