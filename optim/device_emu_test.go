//go:build cgo

package optim_test

import (
	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/cudak/emu"
)

// DeviceSolver also runs on the CUDA backend's kernels, on the host
// emulator.
func init() {
	deviceBackends = append(deviceBackends, func() backend.Backend { return emu.New() })
}
