//go:build cgo

package program

import (
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/cudak/emu"
	"github.com/orthonet/orthonet/optim"
)

// Every lowering also runs through the CUDA backend's planner and kernels,
// on the host emulator.
func init() {
	moreBackends = append(moreBackends, func() backend.Backend { return emu.New() })
}

// TestModelsAgreeOnDevice runs TestModelsAgree's models and the optimizers
// the device takes on the CUDA backend's planner and kernels (the host
// emulator), the optimizers stepping with optim.DeviceSolver.
func TestModelsAgreeOnDevice(t *testing.T) {
	be := emu.New()
	defer be.Close()
	ref := cpu.New(cpu.Options{})
	defer ref.Close()
	eachDeviceCase(t, func(t *testing.T, mc modelCase, dt tensor.Dtype, cfg []optim.Group) {
		compareModel(t, be, mc, dt, cfg, false)
		compareBackends(t, ref, be, mc, dt, cfg)
	})
}
