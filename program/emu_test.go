//go:build cgo

package program

import (
	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/cudak/emu"
)

// Every lowering also runs through the CUDA backend's planner and kernels,
// on the host emulator.
func init() {
	moreBackends = append(moreBackends, func() backend.Backend { return emu.New() })
}
