//go:build cgo

package program

import (
	"testing"
)

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
