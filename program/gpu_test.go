//go:build gpu

package program

import (
	"os"
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/optim"
)

// TestModelsAgreeOnGPU runs the FFN, the small ViT and the custom model on
// the GPU, the optimizers stepping there, against the CPU program: loss,
// logits, gradients and two steps of each optimizer the device takes.
func TestModelsAgreeOnGPU(t *testing.T) {
	be, err := cudabackend.New(cudabackend.Options{})
	if err != nil {
		if os.Getenv("ORTHONET_REQUIRE_GPU") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	defer be.Close()
	ref := cpu.New(cpu.Options{})
	defer ref.Close()
	eachDeviceCase(t, func(t *testing.T, mc modelCase, dt tensor.Dtype, cfg []optim.Group) {
		compareBackends(t, ref, be, mc, dt, cfg)
	})
}
