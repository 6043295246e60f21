//go:build cgo

package program

import (
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

// TestModelsAgreeOnDevice runs TestModelsAgree's models and the optimizers
// the device takes on the CUDA backend, the optimizers stepping with
// optim/device's steppers, against the CPU program.
func TestModelsAgreeOnDevice(t *testing.T) {
	be := startCUDA()
	defer be.Close()
	ref := cpu.New(cpu.Options{})
	defer ref.Close()
	eachDeviceCase(t, func(t *testing.T, mc modelCase, dt tensor.Dtype, cfg []optim.Group) {
		compareModel(t, be, mc, dt, cfg, false)
		compareBackends(t, ref, be, mc, dt, cfg)
	})
}
