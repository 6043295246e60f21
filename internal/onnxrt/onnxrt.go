// Package onnxrt runs ONNX models in ONNX Runtime, for orthonet's tests of
// its ONNX export: it runs run.js under Node.js with npm's
// onnxruntime-node, which `make deps` installs into build/onnxruntime
// (scripts/onnxruntime pins the version).
package onnxrt

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// RequireEnv names the variable that, when set, turns a missing runtime
// from a skip into a failure (`make test` sets it).
const RequireEnv = "ORTHONET_REQUIRE_ONNXRUNTIME"

// DirEnv names the variable that overrides Dir.
const DirEnv = "ORTHONET_ONNXRUNTIME_DIR"

//go:embed run.js
var runJS []byte

// Dir returns the folder that holds node_modules/onnxruntime-node:
// $ORTHONET_ONNXRUNTIME_DIR, or build/onnxruntime in the module's root.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0) // .../internal/onnxrt/onnxrt.go
	return filepath.Join(filepath.Dir(file), "..", "..", "build", "onnxruntime")
}

// Available returns nil when Node.js and the runtime are installed, and
// otherwise an error saying what is missing and how to install it.
func Available() error {
	if _, err := exec.LookPath("node"); err != nil {
		return errors.New("onnxrt: Node.js (node) is not on PATH: run make deps")
	}
	pkg := filepath.Join(Dir(), "node_modules", "onnxruntime-node", "package.json")
	if _, err := os.Stat(pkg); err != nil {
		return fmt.Errorf("onnxrt: onnxruntime-node is not installed (%s missing): run make deps", pkg)
	}
	return nil
}

// Need skips the test when the runtime is missing, or fails it when
// RequireEnv is set.
func Need(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%v (%s is set)", err, RequireEnv)
		}
		t.Skip(err)
	}
}

// Tensor is an input or output of a model: row-major float32 or float64
// values and their dimensions.
type Tensor struct {
	Dims []int
	Data any // []float32 or []float64
}

// wireTensor is a Tensor as run.js reads and writes it (JSON).
type wireTensor struct {
	Type string    `json:"type"`
	Dims []int     `json:"dims"`
	Data []float64 `json:"data"`
}

// Run runs the ONNX model file model on inputs, named as the model's graph
// inputs, and returns the outputs by name. The values travel exactly (as
// JSON doubles).
func Run(model string, inputs map[string]Tensor) (map[string]Tensor, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "onnxrt-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "run.js")
	if err := os.WriteFile(script, runJS, 0o600); err != nil {
		return nil, err
	}
	req := map[string]map[string]wireTensor{"inputs": {}}
	for name, t := range inputs {
		w, err := toWire(name, t)
		if err != nil {
			return nil, err
		}
		req["inputs"][name] = w
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	request := filepath.Join(tmp, "request.json")
	if err := os.WriteFile(request, b, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("node", script, Dir(), model, request)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("onnxrt: running %s in ONNX Runtime: %v: %s", model, err, strings.TrimSpace(stderr.String()))
	}
	var resp struct {
		Outputs map[string]wireTensor `json:"outputs"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("onnxrt: reading the runtime's answer: %w", err)
	}
	res := map[string]Tensor{}
	for name, w := range resp.Outputs {
		res[name] = fromWire(w)
	}
	return res, nil
}

// toWire returns input name, t, as run.js reads it: its values as doubles,
// its type named.
func toWire(name string, t Tensor) (wireTensor, error) {
	w := wireTensor{Dims: t.Dims}
	switch d := t.Data.(type) {
	case []float32:
		w.Type = "float32"
		w.Data = make([]float64, len(d))
		for i, v := range d {
			w.Data[i] = float64(v)
		}
	case []float64:
		w.Type, w.Data = "float64", d
	default:
		return wireTensor{}, fmt.Errorf("onnxrt: input %q holds %T, want []float32 or []float64", name, t.Data)
	}
	return w, nil
}

// fromWire returns an output as run.js writes it as a Tensor of its type.
func fromWire(w wireTensor) Tensor {
	t := Tensor{Dims: w.Dims, Data: w.Data}
	if w.Type == "float32" {
		f := make([]float32, len(w.Data))
		for i, v := range w.Data {
			f[i] = float32(v)
		}
		t.Data = f
	}
	return t
}
