//go:build gpu

package program

import (
	"fmt"
	"os"
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
	cudabackend "github.com/orthonet/orthonet/backend/cuda"
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
	cfgs := solverConfigs()
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			for _, name := range deviceConfigs {
				t.Run(fmt.Sprintf("%s/%v/%s", mc.name, dt, name), func(t *testing.T) {
					compareBackends(t, ref, be, mc, dt, cfgs[name])
				})
			}
		}
	}
}
