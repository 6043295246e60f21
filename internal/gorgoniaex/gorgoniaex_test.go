package gorgoniaex

import (
	"bytes"
	"encoding/json"
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
// float64 and float32, on the CPU and on the host model of the GPU.
func TestExamples(t *testing.T) {
	type tol struct{ values, trained float64 }
	tols := map[string]tol{"float64": {1e-10, 1e-8}, "float32": {1e-5, 1e-3}}
	for _, ex := range Examples {
		for _, dt := range []string{"float64", "float32"} {
			for _, be := range []string{"cpu", "cuda"} {
				t.Run(ex.Name+"/"+dt+"/"+be, func(t *testing.T) {
					if be == "cuda" && buildTags == "" {
						t.Skip("the CUDA backend needs cgo")
					}
					args := []string{"-mode", "compare", "-dtype", dt, "-backend", be, "-batch", "3", "-steps", "3", "-r", "40"}
					rep := runExample(t, ex.Name, args...)
					tl := tols[dt]
					t.Logf("%+v", rep)
					for _, d := range []struct {
						what      string
						got, want float64
					}{{"output", rep.Out, tl.values}, {"loss", rep.Loss, tl.values}, {"gradients", rep.Grads, tl.values}, {"trained parameters", rep.Trained, tl.trained}} {
						if !(d.got <= d.want) {
							t.Errorf("%s differ from the tape machine's by %.3g, want <= %.0g", d.what, d.got, d.want)
						}
					}
					if n := len(rep.Losses); n < 2 || !(rep.Losses[n-1] < rep.Losses[0]) {
						// A few steps on random data: the loss of the same batch is not
						// measured, so only finiteness can be asked of every one.
						for _, l := range rep.Losses {
							if l != l {
								t.Errorf("NaN loss: %v", rep.Losses)
							}
						}
					}
					if !(rep.Feasibility < 1e-6) {
						t.Errorf("||W^T W - I||_F = %.3g after %d steps, want < 1e-6", rep.Feasibility, rep.Steps)
					}
				})
			}
		}
	}
}
