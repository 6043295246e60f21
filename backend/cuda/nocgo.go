//go:build !cgo

package cuda

import (
	"errors"

	"github.com/orthonet/orthonet/backend"
)

// errNoCgo is the error of a binary built without cgo, which cannot load
// the NVIDIA libraries.
var errNoCgo = errors.New("cuda: this binary was built without cgo (CGO_ENABLED=0), which loading the NVIDIA libraries needs")

// Probe returns an error: without cgo there is no CUDA.
func Probe() (Device, error) { return Device{}, errNoCgo }

// New returns an error: without cgo there is no CUDA.
func New(Options) (backend.Backend, error) { return nil, errNoCgo }
