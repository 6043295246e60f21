//go:build cgo

package program

import (
	"fmt"
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/cudak/emu"
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
	cfgs := solverConfigs()
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			for _, name := range deviceConfigs {
				t.Run(fmt.Sprintf("%s/%v/%s", mc.name, dt, name), func(t *testing.T) {
					compareModel(t, be, mc, dt, cfgs[name], false)
				})
				t.Run(fmt.Sprintf("%s/%v/%s/against-cpu", mc.name, dt, name), func(t *testing.T) {
					compareBackends(t, ref, be, mc, dt, cfgs[name])
				})
			}
		}
	}
}
