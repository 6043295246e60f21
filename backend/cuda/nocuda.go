//go:build !gpu

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
}

// Built reports whether this binary has the CUDA backend (build tag gpu).
const Built = false

// ErrNotBuilt reports a binary built without the CUDA backend.
var ErrNotBuilt = errors.New("cuda: this binary was built without CUDA support (make cuda builds one: build tag gpu)")

// Probe returns ErrNotBuilt.
func Probe() (Device, error) { return Device{}, ErrNotBuilt }

// New returns ErrNotBuilt: this binary has no CUDA support.
func New(Options) (backend.Backend, error) { return nil, ErrNotBuilt }
