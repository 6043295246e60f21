//go:build cgo

package program

import (
	"fmt"
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// deviceConfigs names the solver configurations of solverConfigs that a
// device's steppers (optim/device) take.
var deviceConfigs = []string{"rsdm-p+sgd", "rsdm-blocks", "rgd-momentum+adam"}

// eachDeviceCase runs fn for every model, float type and device
// configuration, each in a subtest named for them.
func eachDeviceCase(t *testing.T, fn func(t *testing.T, mc modelCase, dt tensor.Dtype, cfg []optim.Group)) {
	cfgs := solverConfigs()
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			for _, name := range deviceConfigs {
				t.Run(fmt.Sprintf("%s/%v/%s", mc.name, dt, name), func(t *testing.T) { fn(t, mc, dt, cfgs[name]) })
			}
		}
	}
}

// compareBackends runs mc as a compiled program on ref (the CPU backend,
// itself checked against the tape machine) and on be, each with its
// Solver, for two steps from the same inputs and dropout masks, and checks
// that the loss, the logits, every gradient and every parameter after each
// step agree to tol (relative; agree), and returns the largest difference.
func compareBackends(t *testing.T, ref, be backend.Backend, mc modelCase, dt tensor.Dtype, cfg []optim.Group, tol float64) float64 {
	build := func() (*model, error) { return mc.build(dt) }
	r, g := newSides(t, mc.name, build, compiled(ref, sideConfig{groups: cfg}), compiled(be, sideConfig{groups: cfg}))
	return agree(t, mc.name, r, g, 2, tol)
}
