//go:build cgo

package program

import (
	"fmt"
	"os"
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/optim"
)

// Every lowering also runs on the CUDA backend: on the host model of the
// device, or on a GPU where ORTHONET_CUDA_GPU=1.
func init() {
	if os.Getenv("ORTHONET_CUDA_GPU") != "1" {
		os.Setenv(cuda.StandInEnv, "1")
	}
	moreBackends = append(moreBackends, startCUDA)
}

// startCUDA starts the CUDA backend; it panics where it cannot, which
// fails the test that asked for it.
func startCUDA() backend.Backend {
	b, err := cuda.New(cuda.Options{})
	if err != nil {
		panic(err)
	}
	return b
}

// deviceTolerance returns the largest relative difference allowed between
// a program on a GPU and the same computation on the CPU: 1e-10 for
// float64; for float32 5e-5, since a GPU sums in other orders (cuBLAS's
// kernels, tree reductions), and the float32 CPU program's own distance from
// the float64 one is up to 3.5e-6 on these models (the custom model's
// gradients after one step); an H200 differed from the CPU by 1.02e-5 there.
func deviceTolerance(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 5e-5
	}
	return tolerance(dt)
}

// TestModelsAgreeOnDevice runs TestModelsAgree's models and the optimizers
// the device takes on the CUDA backend, the optimizers stepping with
// optim/device's steppers, against the tape machine and the CPU program
// (to deviceTolerance), and logs the largest differences.
func TestModelsAgreeOnDevice(t *testing.T) {
	be := startCUDA()
	defer be.Close()
	ref := cpu.New(cpu.Options{})
	defer ref.Close()
	eachDeviceCase(t, func(t *testing.T, mc modelCase, dt tensor.Dtype, cfg []optim.Group) {
		tol := deviceTolerance(dt)
		tape := compareModel(t, be, mc, dt, cfg, false, tol)
		prog := compareBackends(t, ref, be, mc, dt, cfg, tol)
		t.Logf("largest relative difference: %.3g from the tape machine, %.3g from the CPU program (tolerance %g)", tape, prog, tol)
	})
}

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

// TestCompileDefaultBudgetOnDevice checks the default budget on the CUDA
// backend (its host model, or a GPU where ORTHONET_CUDA_GPU=1): the
// device's free memory, which its MemInfo reports.
func TestCompileDefaultBudgetOnDevice(t *testing.T) {
	be := startCUDA()
	defer be.Close()
	if _, ok := be.(memInfo); !ok {
		t.Fatalf("the CUDA backend %T has no MemInfo", be)
	}
	free, total, err := be.(memInfo).MemInfo()
	t.Logf("%s: %d of %d bytes free (%v)", be.Name(), free, total, err)
	hugeProduct(t, be, "the device's free memory")
}
