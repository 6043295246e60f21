//go:build gpu

package optim_test

import (
	"os"
	"testing"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
)

// TestDeviceSolverOnGPU is TestDeviceSolverAgrees on the GPU.
func TestDeviceSolverOnGPU(t *testing.T) {
	be, err := cudabackend.New(cudabackend.Options{})
	if err != nil {
		if os.Getenv("ORTHONET_REQUIRE_GPU") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	defer be.Close()
	for name, groups := range deviceConfigs() {
		t.Run(name+"/float64", func(t *testing.T) { deviceAgree[float64](t, be, groups, 1e-10) })
		t.Run(name+"/float32", func(t *testing.T) { deviceAgree[float32](t, be, groups, 2e-5) })
	}
}
