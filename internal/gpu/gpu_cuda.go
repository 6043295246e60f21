//go:build cuda

package gpu

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// Built reports whether this binary was built with CUDA support.
const Built = true

// Probe returns the CUDA device this binary would use, or why there is none.
func Probe() (Device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return Device{}, fmt.Errorf("gpu: no usable CUDA driver or device: %w", err)
	}
	if n == 0 {
		return Device{}, errors.New("gpu: the CUDA driver sees no device")
	}
	d, err := cu.GetDevice(0)
	if err != nil {
		return Device{}, fmt.Errorf("gpu: device 0: %w", err)
	}
	name, err := d.Name()
	if err != nil {
		return Device{}, fmt.Errorf("gpu: device 0: %w", err)
	}
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return Device{}, fmt.Errorf("gpu: device 0: %w", err)
	}
	mem, err := d.TotalMem()
	if err != nil {
		return Device{}, fmt.Errorf("gpu: device 0: %w", err)
	}
	return Device{Name: name, Count: n, Major: major, Minor: minor, TotalMemory: mem, DriverVersion: cu.Version()}, nil
}
