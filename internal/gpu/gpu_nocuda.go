//go:build !cuda

package gpu

// Built reports whether this binary was built with CUDA support.
const Built = false

// Probe returns the CUDA device this binary would use, or why there is none.
func Probe() (Device, error) { return Device{}, ErrNotBuilt }
