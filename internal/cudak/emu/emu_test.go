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
// next Sync, naming the factorization, and that every later Sync reports
// it too: on the one-block path (few columns) and on cuSOLVER's (more).
func TestQFFault(t *testing.T) {
	for _, s := range [][2]int{{4, 3}, {40, 34}} {
		b := emu.New()
		defer b.Close()
		m, n := s[0], s[1]
		a, err := b.Alloc(backend.Float64, m*n)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, m*n)
		for i := range m {
			for j := range n {
				v[i*n+j] = float64((i*7+j*3)%11) + float64(i*j%5)
			}
			v[i*n+n-1] = 2 * v[i*n] // the last column twice the first
		}
		if err := b.CopyIn(a, 0, v); err != nil {
			t.Fatal(err)
		}
		f, err := b.Prepare(backend.QF{M: m, N: n, A: backend.At(a, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "QR factorization failed") {
			t.Fatalf("%d x %d: Sync after the Q factor of a rank-deficient matrix: %v, want the factorization's failure", m, n, err)
		}
		if err := b.Sync(); err == nil {
			t.Fatalf("%d x %d: a second Sync forgot the fault", m, n)
		}

	}
}
