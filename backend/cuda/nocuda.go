//go:build !cuda

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

// ErrNotBuilt reports a binary built without the cuda tag.
var ErrNotBuilt = errors.New("cuda: this binary was built without CUDA support (build with -tags cuda, see make cuda)")

// New returns ErrNotBuilt: this binary has no CUDA support.
func New(Options) (backend.Backend, error) { return nil, ErrNotBuilt }
