//go:build !cgo

package cuda

import (
	"errors"

	"github.com/orthonet/orthonet/backend"
)

// Options configure a Backend.
type Options struct {
	// Device is the ordinal of the GPU to use.
	Device int
	// Profile times every kernel on the device.
	Profile bool
	// MaxGrid bounds the blocks of a launch (0: the planner's default).
	MaxGrid int
}

// StandInEnv names the environment variable that, set to 1, makes the
// backend load the host model of the device instead of the NVIDIA
// libraries.
const StandInEnv = "ORTHONET_CUDA_STANDIN"

// errNoCgo is the error of a binary built without cgo, which cannot load
// the NVIDIA libraries.
var errNoCgo = errors.New("cuda: this binary was built without cgo (CGO_ENABLED=0), which loading the NVIDIA libraries needs")

// Probe returns an error: without cgo there is no CUDA.
func Probe() (Device, error) { return Device{}, errNoCgo }

// New returns an error: without cgo there is no CUDA.
func New(Options) (backend.Backend, error) { return nil, errNoCgo }

// Compile returns an error: without cgo there is no NVRTC.
func Compile(arch int, cubin bool) ([]byte, error) { return nil, errNoCgo }
