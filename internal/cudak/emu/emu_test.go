//go:build cgo

package emu_test

import (
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"

	"github.com/orthonet/orthonet/backend/backendtest"
	"github.com/orthonet/orthonet/internal/cudak/emu"
)

// TestKernelsAgreeWithCPU runs every kernel through the CUDA planner and
// kernel source on the host and compares with the CPU backend.
func TestKernelsAgreeWithCPU(t *testing.T) {
	b := emu.New()
	defer b.Close()
	backendtest.Compare(t, b, backendtest.Options{})
}

// TestQFFault checks that the Q factor of a rank-deficient matrix fails the
// next Sync, naming the factorization, and leaves the fault cleared.
func TestQFFault(t *testing.T) {
	b := emu.New()
	defer b.Close()
	a, err := b.Alloc(backend.Float64, 12)
	if err != nil {
		t.Fatal(err)
	}
	// 4 x 3 with its last column twice its first.
	if err := b.CopyIn(a, 0, []float64{1, 2, 2, 0, 1, 0, 3, 1, 6, 1, 1, 2}); err != nil {
		t.Fatal(err)
	}
	f, err := b.Prepare(backend.QF{M: 4, N: 3, A: backend.At(a, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "QR factorization failed") {
		t.Fatalf("Sync after the Q factor of a rank-deficient matrix: %v, want the factorization's failure", err)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
}
