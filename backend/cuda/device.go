package cuda

import "errors"

// Options configure a Backend.
type Options struct {
	// Device is the ordinal of the GPU to use.
	Device int
	// Profile times every kernel on the device with CUDA events (see
	// KernelTimes); it adds two event records to each.
	Profile bool
	// MaxGrid bounds the blocks of a launch (0: the planner's default);
	// tests set it small so that the kernels' grid-stride loops repeat.
	MaxGrid int
	// Index64 plans every kernel with 64-bit index arithmetic; by default
	// a kernel whose sizes allow computes its indices in 32 bits. Tests set
	// it to check both instances at small sizes.
	Index64 bool
}

// StandInEnv names the environment variable that, set to 1, makes the
// backend load the host model of the device (package
// internal/cudak/standin) instead of the NVIDIA libraries.
const StandInEnv = "ORTHONET_CUDA_STANDIN"

// ErrStandIn is (by errors.Is) the error of a value of StandInEnv that is
// neither 0 nor 1.
var ErrStandIn = errors.New("cuda: " + StandInEnv + " is neither 0 nor 1")

// Device describes a GPU as the driver reports it.
type Device struct {
	Name          string // e.g. "NVIDIA H100 80GB HBM3"
	Count         int    // CUDA devices the driver sees; the backend uses Options.Device
	Major, Minor  int    // compute capability
	TotalMemory   int64  // bytes
	DriverVersion int    // e.g. 13000 for CUDA 13.0
	HostModel     bool   // the host model of the device stands in for a GPU
}
