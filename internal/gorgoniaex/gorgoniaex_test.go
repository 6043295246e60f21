package gorgoniaex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/gorgoniaex/harness"
)

// TestCutMain checks that CutMain removes main and the imports only it
// used, and keeps every other declaration byte for byte.
func TestCutMain(t *testing.T) {
	const src = `package main

import (
	"fmt"
	"log"
	"os"

	pb "gopkg.in/cheggaaa/pb.v1"
	_ "net/http/pprof"
)

// T is kept.
type T struct{ n int }

// main is cut.
func main() {
	bar := pb.New(3)
	fmt.Println(os.Args, bar)
}

func (T) main() { log.Println("a method named main is kept") }

func helper() string { return fmt.Sprint(1) }
`
	out, had, err := CutMain("x.go", []byte(src))
	if err != nil || !had {
		t.Fatalf("CutMain: %v, had main %v", err, had)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", out, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("result does not parse: %v\n%s", err, out)
	}
	var imports []string
	for _, is := range f.Imports {
		imports = append(imports, is.Path.Value)
	}
	if got, want := strings.Join(imports, " "), `"fmt" "log" "net/http/pprof"`; got != want {
		t.Errorf("imports %s, want %s", got, want)
	}
	for _, keep := range []string{"// T is kept.\ntype T struct{ n int }", `func (T) main() { log.Println("a method named main is kept") }`, "func helper() string { return fmt.Sprint(1) }"} {
		if !bytes.Contains(out, []byte(keep)) {
			t.Errorf("lost %q:\n%s", keep, out)
		}
	}
	if bytes.Contains(out, []byte("main is cut")) || bytes.Contains(out, []byte("pb.New")) {
		t.Errorf("main or its comment kept:\n%s", out)
	}
	same, had, err := CutMain("y.go", []byte("package main\n\nfunc f() {}\n"))
	if err != nil || had || string(same) != "package main\n\nfunc f() {}\n" {
		t.Errorf("a file without main: %q, %v, %v", same, had, err)
	}
}

// TestExtractKeepsModels checks, on every example, that everything but
// main is copied unchanged: the other files byte for byte, and the file
// that held main as its declarations.
func TestExtractKeepsModels(t *testing.T) {
	mod := moduleDir(t)
	for _, ex := range Examples {
		src := filepath.Join(mod, "examples", ex.Name)
		dst := t.TempDir()
		names, err := Extract(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			orig, _ := os.ReadFile(filepath.Join(src, n))
			got, _ := os.ReadFile(filepath.Join(dst, n))
			cut, had, err := CutMain(n, orig)
			if err != nil {
				t.Fatal(err)
			}
			if !had && !bytes.Equal(orig, got) {
				t.Errorf("%s/%s changed", ex.Name, n)
			}
			if had && !bytes.Equal(cut, got) {
				t.Errorf("%s/%s: not the file without main", ex.Name, n)
			}
		}
	}
}

func moduleDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	mod, err := ModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

// runExample builds an example once per test binary and runs it with args.
func runExample(t *testing.T, name string, args ...string) harness.Report {
	t.Helper()
	bin := binary(t, name)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ORTHONET_CUDA_STANDIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	var rep harness.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%s: %v: %s", name, err, out)
	}
	return rep
}

var binaries = map[string]string{}

func binary(t *testing.T, name string) string {
	t.Helper()
	if b, ok := binaries[name]; ok {
		return b
	}
	moduleDir(t)
	ex, err := Find(name)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gorgoniaex-bin-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if err := Build(ex, root, buildTags, bin); err != nil {
		t.Fatal(err)
	}
	binaries[name] = bin
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range binaries {
		os.RemoveAll(filepath.Dir(b))
	}
	os.Exit(code)
}

// TestExamples compiles every example's model, unchanged, and checks the
// compiled program against the tape machine: the output, the loss and
// every gradient, then the parameters after a few steps of the same Solver
// (RSDM-P on the example's dense Stiefel weight, Adam on the rest), in
// float64 and float32, on the CPU and on the host model of the GPU. The
// resnet's dense layers hold 212 million parameters: it is compared in
// float32 on the CPU after one step (13 GB, about a minute).
func TestExamples(t *testing.T) {
	// Feasibility: a 1152 x 625 orthonormal matrix rounded to float32 is
	// already about 1e-6 from the manifold.
	type tol struct{ values, trained, feasibility float64 }
	tols := map[string]tol{"float64": {1e-10, 1e-10, 1e-6}, "float32": {1e-5, 1e-4, 1e-4}}
	runs := []struct {
		example, dtype, backend string
		steps                   int
	}{
		{"convnet", "float64", "cpu", 3}, {"convnet", "float32", "cpu", 3},
		{"convnet", "float64", "cuda", 3}, {"convnet", "float32", "cuda", 3},
		{"resnet", "float32", "cpu", 1},
	}
	for _, r := range runs {
		t.Run(r.example+"/"+r.dtype+"/"+r.backend, func(t *testing.T) {
			if r.backend == "cuda" && buildTags == "" {
				t.Skip("the CUDA backend needs cgo")
			}
			if r.example == "resnet" && testing.Short() {
				t.Skip("the resnet takes 13 GB and a minute")
			}
			rep := runExample(t, r.example, "-mode", "compare", "-dtype", r.dtype, "-backend", r.backend, "-batch", "3", "-steps", fmt.Sprint(r.steps), "-r", "40")
			tl := tols[r.dtype]
			t.Logf("%s: output %.2g, loss %.2g, gradients %.2g, parameters after %d steps %.2g from the tape machine's; ||W^T W - I||_F %.2g",
				rep.Backend, rep.Out, rep.Loss, rep.Grads, rep.Steps, rep.Trained, rep.Feasibility)
			for _, d := range []struct {
				what      string
				got, want float64
			}{{"output", rep.Out, tl.values}, {"loss", rep.Loss, tl.values}, {"gradients", rep.Grads, tl.values}, {"trained parameters", rep.Trained, tl.trained}} {
				if !(d.got <= d.want) {
					t.Errorf("%s differ from the tape machine's by %.3g, want <= %.0g", d.what, d.got, d.want)
				}
			}
			if !(rep.Feasibility < tl.feasibility) {
				t.Errorf("||W^T W - I||_F = %.3g after %d steps, want < %.0g", rep.Feasibility, rep.Steps, tl.feasibility)
			}
		})
	}
}

// TestExampleOnDevice trains the convnet for 5 steps, its dropout on, on
// the CPU and on the host model of the GPU from the same start and
// batches: the parameters agree to 1e-4 relative in float32 (1e-10 in
// float64).
func TestExampleOnDevice(t *testing.T) {
	if buildTags == "" {
		t.Skip("the CUDA backend needs cgo")
	}
	for _, dt := range []string{"float64", "float32"} {
		rep := runExample(t, "convnet", "-mode", "devices", "-dtype", dt, "-batch", "4", "-steps", "5", "-r", "40")
		want := map[string]float64{"float64": 1e-10, "float32": 1e-4}[dt]
		t.Logf("%s: parameters %.2g, losses %.2g apart after 5 steps (losses %v)", dt, rep.Trained, rep.Loss, rep.Losses)
		if !(rep.Trained <= want) || !(rep.Loss <= want) {
			t.Errorf("%s: the CUDA backend's parameters and losses are %.3g and %.3g from the CPU's after 5 steps, want <= %.0g", dt, rep.Trained, rep.Loss, want)
		}
	}
}
