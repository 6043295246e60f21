//go:build cgo

package emu_test

import (
	"testing"

	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/internal/cudak/emu"
)

// TestKernelsAgreeWithCPU runs every kernel through the CUDA planner and
// kernel source on the host and compares with the CPU backend.
func TestKernelsAgreeWithCPU(t *testing.T) {
	b := emu.New()
	defer b.Close()
	backendtest.Compare(t, b, backendtest.Options{Unsupported: []string{"qf"}})
}
