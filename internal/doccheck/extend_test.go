package doccheck

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExtendingChecklists follows three checklists of docs/extending in a
// copy of the module and holds them to their counts: a rule of constrained
// weights written once in optim.StepBlocks is one new file and one changed
// line of optim.Rules (rule.md), after which train -optim names it, the CPU
// and the host model of the GPU train with it and a resume is bit-exact; a
// sampler of rows is one new file, one changed line of optim.Samplers and
// a line in dpRules (sampler.md), after which its draws, resume,
// convergence, data-parallel steps and device steps are tested; a binary
// elementwise function is one line of backend/gen's table, its CPU
// function and its test reference, then go generate (kernel.md), after
// which the CPU's tests and the host model's zip and chain cases pass with
// it. A required edit a checklist does not name fails here. It builds most
// of the module again (about a minute on two cores): not with -short.
func TestExtendingChecklists(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a copy of the module: not with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir := copyModule(t)

	// The rule: its file, and one changed line in optim.Rules.
	write(t, filepath.Join(dir, "optim", "throwaway.go"), throwawayRule)
	appendToList(t, filepath.Join(dir, "optim", "rule.go"), "Rules", "ThrowawayConfig{}")

	// The sampler: its file, one changed line in optim.Samplers, and a
	// line in dpRules (a sampler of rows in data-parallel training).
	write(t, filepath.Join(dir, "optim", "shuffled.go"), throwawaySampler)
	appendToList(t, filepath.Join(dir, "optim", "sampler.go"), "Samplers", "Shuffled")
	appendToList(t, filepath.Join(dir, "optim", "reduce_test.go"), "dpRules",
		`{"rsdm-shuffled+sgd", optim.RSDMConfig{SubmanifoldSize: 4, Sampling: optim.Shuffled, Seed: 7}, optim.SGDConfig{}, false}`)

	// The binary op: its table line, its CPU function, its reference.
	appendToList(t, filepath.Join(dir, "backend", "gen", "table.go"), "binaryOps",
		`{"Throwaway", "throwaway", "throwaway", 1, "(x + y) / (T)2", "(a + b) / 2"}`)
	appendFile(t, filepath.Join(dir, "backend", "elementwise.go"),
		"\nfunc throwaway[T Float](x, y T) T { return (x + y) / 2 }\n")
	appendToList(t, filepath.Join(dir, "backend", "cpu", "elementwise_test.go"), "binaryRefs",
		`{backend.Throwaway, func(x, y float64) float64 { return x/2 + y/2 }, nil}`)

	// The children stop before this test's deadline, and run on the host
	// model of the GPU even where ORTHONET_CUDA_GPU asks the tests for a
	// real one (whose test names differ).
	ctx, stop := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, stop = context.WithDeadline(ctx, d.Add(-30*time.Second))
	}
	defer stop()
	run := func(args ...string) string {
		t.Helper()
		if args[0] == "test" {
			extra := []string{"test", "-timeout", "8m"}
			if buildTags != "" {
				extra = append(extra, "-tags", buildTags)
			}
			args = append(extra, args[1:]...)
		}
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "ORTHONET_CUDA_GPU=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, failures(string(out)))
		}
		return string(out)
	}
	run("generate", "./backend")
	for _, f := range []string{"backend/binary_ops.go", "internal/cudak/kernels.cu"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.Contains(bytes.ToLower(b), []byte("throwaway")) {
			t.Fatalf("go generate did not write the op into %s (%v)", f, err)
		}
	}
	// One run a -run pattern: go test splits a pattern at its slashes
	// before its bars.
	out := run("test", "-count=1", "-v", "./backend/gen/...", "./backend", "./backend/cpu", "./internal/cudak", "./optim", "./optim/optflag", "./optim/device",
		"-run", "TestGeneratedFilesCurrent|TestSectionsFollowGoFiles|TestRefsCoverEveryFunction|TestZip|TestChain|TestParse|TestDescribedResume|TestTable|"+
			"TestSamplerDraws|TestStateResume|TestDeterminism|TestRSDMReorthFailure|TestStatePhase|TestDataParallel|TestDeviceAgrees")
	out += run("test", "-count=1", "-v", "./optim", "-run", "TestConvergence/.*/rsdm-shuffled")
	out += run("test", "-count=1", "-v", "./cmd/train", "-run", "TestEveryRuleTrains/throwaway/")
	out += run("test", "-count=1", "-v", "./backend/cuda", "-run", "TestKernelsAgreeWithCPU/order=3,maxgrid=0/float/(zip|chain)/throwaway")
	for _, want := range []string{
		"--- PASS: TestGeneratedFilesCurrent",
		"--- PASS: TestRefsCoverEveryFunction",
		"--- PASS: TestDescribedResume/throwaway/float32",
		"--- PASS: TestSamplerDraws/shuffled/",
		"--- PASS: TestStateResume/rsdm-shuffled/float32",
		"--- PASS: TestDataParallelMatchesOneProcess/rsdm-shuffled+sgd/float64",
		"--- PASS: TestDeviceAgrees/backend0/rsdm-shuffled+sgd/float32",
		"--- PASS: TestConvergence/pca-30x10/rsdm-shuffled",
		"--- PASS: TestEveryRuleTrains/throwaway/cpu",
		"--- PASS: TestEveryRuleTrains/throwaway/cuda",
		"--- PASS: TestKernelsAgreeWithCPU/order=3,maxgrid=0/float64/zip/throwaway/",
		"--- PASS: TestKernelsAgreeWithCPU/order=3,maxgrid=0/float32/chain/throwaway",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the copy's tests have no line %q", want)
		}
	}
	if strings.Contains(out, "refused on the device") {
		t.Errorf("the device refused the throwaway rule")
	}
	if t.Failed() {
		t.Logf("the copy's tests:\n%s", failures(out))
	}
}

// throwawayRule is the new file of the rule: RGD with Nesterov momentum,
// written once in StepBlocks, nothing else.
const throwawayRule = `package optim

// ThrowawayConfig is RGD with Nesterov momentum.
type ThrowawayConfig struct{ Beta float64 }

func (ThrowawayConfig) String() string    { return "throwaway" }
func (ThrowawayConfig) Constrained() bool { return true }
func (c ThrowawayConfig) Stepper(p Param, b Binding) (Stepper, error) {
	return BindDescribed(p, b, c)
}
func (c ThrowawayConfig) Describe(b StepBlocks) error {
	rg, dir, next, mom := b.Buffer(""), b.Buffer(""), b.Buffer(""), b.Buffer(StateMomentum)
	b.Proj(rg, X, G)
	b.AddScaled(mom, rg, Coef{Value: c.Beta}, mom)
	b.AddScaled(dir, rg, Coef{Value: c.Beta}, mom)
	b.Retract(next, X, Coef{Value: -1, TimesLR: true}, dir)
	b.Proj(mom, next, mom)
	b.Move(next)
	return nil
}
`

// throwawaySampler is the new file of the sampler: the first r rows of a
// uniformly random permutation of the n, nothing else. (Rows drawn
// cyclically contiguous from a random start do not do: pairs n/2 apart
// never share a draw, and TestConvergence finds RSDM stuck on Procrustes.)
const throwawaySampler = `package optim

import "math/rand/v2"

// Shuffled draws the first r rows of a uniformly random permutation.
var Shuffled Sampler = shuffled{}

type shuffled struct{}

func (shuffled) String() string { return "shuffled" }
func (shuffled) Rows() bool     { return true }
func (shuffled) Start(n, r int) (Draws, error) {
	return &shuffledDraws{positionless{Shuffled}, n}, nil
}

type shuffledDraws struct {
	positionless
	n int
}

func (d *shuffledDraws) Draw(rng *rand.Rand, p *Submanifold) error {
	copy(p.Rows, rng.Perm(d.n))
	return nil
}
`

// copyModule copies the module's files (knownFiles) into a temporary
// folder.
func copyModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range knownFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, f), string(b))
	}
	return dir
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(b)+s)
}

// appendToList adds elem as the last element of the composite literal
// that the package-level variable name is set to in path: on the closing
// brace's line when the literal is written on one line, else as a line of
// its own before it. It fails unless exactly one line changes or is added.
func appendToList(t *testing.T, path, name, elem string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var lit *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == name && len(vs.Values) == 1 {
			lit, _ = vs.Values[0].(*ast.CompositeLit)
		}
		return lit == nil
	})
	if lit == nil {
		t.Fatalf("%s: no variable %s set to a composite literal", path, name)
	}
	at := fset.Position(lit.Rbrace).Offset
	var ins string
	if fset.Position(lit.Lbrace).Line == fset.Position(lit.Rbrace).Line {
		ins = ", " + elem
	} else {
		ins = "\t" + elem + ",\n"
		at = bytes.LastIndexByte(src[:at], '\n') + 1
	}
	out := string(src[:at]) + ins + string(src[at:])
	if d := strings.Count(out, "\n") - strings.Count(string(src), "\n"); d > 1 {
		t.Fatalf("%s: adding to %s takes %d lines", path, name, d)
	}
	write(t, path, out)
}

// failures returns go test's output s without its "=== RUN" and
// "--- PASS" lines, at most its last 80 lines.
func failures(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.TrimSpace(l); !strings.HasPrefix(f, "=== ") && !strings.HasPrefix(f, "--- PASS") && !strings.HasPrefix(f, "--- SKIP") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-80):], "\n")
}
