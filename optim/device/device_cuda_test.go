//go:build cgo

package device_test

import (
	"os"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cuda"
)

// The device steppers also run on the CUDA backend: on the host model of the
// device, or on a GPU where ORTHONET_CUDA_GPU=1.
func init() {
	if os.Getenv("ORTHONET_CUDA_GPU") != "1" {
		os.Setenv(cuda.StandInEnv, "1")
	}
	deviceBackends = append(deviceBackends, func() backend.Backend {
		b, err := cuda.New(cuda.Options{})
		if err != nil {
			panic(err)
		}
		return b
	})
}
