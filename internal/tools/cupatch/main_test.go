package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A miniature of gorgonia.org/cu's layout: what the patch must change and
// what it must leave alone.
var fakeCu = map[string]string{
	"cu.go": `package cu

//#include <cuda.h>
import "C"
import (
	"fmt"
	"os"
)

const initHtml = "https://example"

func init() {
	if err := result(C.cuInit(C.uint(0))); err != nil {
		fmt.Printf("Error in initialization, please refer to %q for details on: %+v\n", initHtml, err)
		os.Exit(1)
	}

}

func result(x C.CUresult) error { return nil }
`,
	"ctx.go": `package cu

//#include <cuda.h>
import "C"

func NewContext(d int, flags int) {
	var cctx C.CUcontext
	_ = C.cuCtxCreate(&cctx, C.uint(flags), C.CUdevice(d))
}
`,
	"mem.go": `package cu

//#include <cuda.h>
// #include "helper.h"
// #include "gone.h"
import "C"
import "fmt"

// Kept stays.
func Kept() { C.cuKept(); C.cuHelper() }

// Gone wraps a function the headers lost.
func Gone() { fmt.Println(C.cuGone()) }

// UsesGone calls Gone, so it goes too.
func UsesGone() { Gone() }

// Prefetch wraps a function whose CUDA 13 prototype changed.
func Prefetch() { C.cuMemPrefetchAsync() }

func LocalHelper() { C.goneHelper() }

const (
	KeptConst = C.CU_KEPT // stays
	GoneConst = C.CU_GONE // goes
)

type T struct{}

// Method named like nothing else; cutting it must not cut callers of other Close methods.
func (T) Close() { C.cuGone() }

func callsOtherClose(x interface{ Close() }) { x.Close() }
`,
	"helper.h": "#include <cuda.h>\ntypedef int cuLocal_t;\nextern int cuHelper(void);\n",
	"helper.c": "#include \"helper.h\"\nint cuHelper(void) { cuLocal_t x = 0; return cuKept() + x; }\n",
	"gone.h":   "#include <cudnn.h>\nextern int goneHelper(cudnnGone_t x);\n",
	"gone.c":   "#include \"gone.h\"\nint goneHelper(cudnnGone_t x) { return 0; }\n",
	"dnn/d.go": `package cudnn

//#include <cudnn.h>
import "C"

func KeptDNN() { C.cudnnKept() }

func GoneDNN() { C.cudnnGone() }
`,
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		ctxNil  bool // cuCtxCreate gets CUDA 13's fourth argument
	}{
		{"cuda13", "13000", true},
		{"cuda12", "12080", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cu, inc := filepath.Join(root, "cu"), filepath.Join(root, "include")
			writeTree(t, cu, fakeCu)
			writeTree(t, inc, map[string]string{
				"cuda.h":  "#define CUDA_VERSION " + tc.version + "\nCUresult cuInit(unsigned); cuKept; CU_KEPT; cuCtxCreate; CUdevice; CUcontext; cuMemPrefetchAsync;\n",
				"cudnn.h": "#define CUDNN_MAJOR 9\ncudnnKept;\n",
			})
			var log bytes.Buffer
			if err := run(cu, []string{inc}, &log); err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			got := readTree(t, cu)
			for name, src := range got {
				if strings.HasSuffix(name, ".go") {
					if _, err := parser.ParseFile(token.NewFileSet(), name, src, 0); err != nil {
						t.Errorf("%s does not parse after the patch: %v", name, err)
					}
				}
			}
			mem := got["mem.go"]
			for _, want := range []string{"func Kept()", "KeptConst", "callsOtherClose", `"helper.h"`} {
				if !strings.Contains(mem, want) {
					t.Errorf("mem.go lost %q:\n%s", want, mem)
				}
			}
			cut := []string{"func Gone()", "func UsesGone()", "GoneConst", "func (T) Close()", "func LocalHelper", `"gone.h"`, `"fmt"`}
			if tc.ctxNil {
				cut = append(cut, "func Prefetch()")
			} else if !strings.Contains(mem, "func Prefetch()") {
				t.Error("against CUDA 12 headers Prefetch must stay")
			}
			for _, gone := range cut {
				if strings.Contains(mem, gone) {
					t.Errorf("mem.go still holds %q:\n%s", gone, mem)
				}
			}
			if _, ok := got["gone.c"]; ok {
				t.Error("gone.c, which needs a missing cuDNN type, was kept")
			}
			if _, ok := got["helper.c"]; !ok {
				t.Error("helper.c, which needs only known names, was removed")
			}
			if d := got["dnn/d.go"]; strings.Contains(d, "GoneDNN") || !strings.Contains(d, "KeptDNN") {
				t.Errorf("dnn/d.go after the patch:\n%s", d)
			}
			if c := got["cu.go"]; strings.Contains(c, "os.Exit") || !strings.Contains(c, "initErr = err") || strings.Contains(c, `"os"`) {
				t.Errorf("cu.go after the patch:\n%s", c)
			}
			if hasNil := strings.Contains(got["ctx.go"], "C.cuCtxCreate(&cctx, nil, C.uint(flags)"); hasNil != tc.ctxNil {
				t.Errorf("ctx.go after the patch (want the nil argument: %v):\n%s", tc.ctxNil, got["ctx.go"])
			}

			// A second run changes nothing.
			log.Reset()
			if err := run(cu, []string{inc}, &log); err != nil {
				t.Fatal(err)
			}
			again := readTree(t, cu)
			for name, src := range got {
				if again[name] != src {
					t.Errorf("second run changed %s", name)
				}
			}
		})
	}
}

func TestPatchRefuses(t *testing.T) {
	root := t.TempDir()
	cu, inc := filepath.Join(root, "cu"), filepath.Join(root, "include")
	writeTree(t, cu, map[string]string{"cu.go": "package cu\n\nfunc init() {}\n"})
	writeTree(t, inc, map[string]string{"cudnn.h": "cudnnKept;\n"})
	if err := run(cu, []string{inc}, new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), "no cuda.h") {
		t.Errorf("headers without cuda.h: error %v", err)
	}
	writeTree(t, inc, map[string]string{"cuda.h": "cuInit;\n"})
	if err := run(cu, []string{inc}, new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), "not the one the patch knows") {
		t.Errorf("an unknown cu.go: error %v", err)
	}
	if err := run(cu, []string{filepath.Join(root, "none")}, new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), "no headers") {
		t.Errorf("an empty header folder: error %v", err)
	}
}
