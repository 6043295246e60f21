package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
)

// devices lists the values of -device.
var devices = []string{"auto", "cpu", "cuda"}

// selectDevice settles -device before a run: auto takes a usable GPU (one
// the CUDA backend starts on) and otherwise the CPU, cuda the GPU or an
// error naming what is missing (the library and versions searched, the
// driver, the device). It says in one line which device the run uses and
// why, unless that is the CPU by -device cpu. Data-parallel training
// (-dist mpi) takes the CPU. c.asked keeps the setting: auto later takes
// the CPU where the device's optimizer refuses a setting (newTrainer).
func selectDevice(c *config, log io.Writer) error {
	c.asked = c.device
	if c.device == "cpu" || (c.device == "auto" && c.engine == "tape") {
		c.device = "cpu"
		return nil
	}
	if c.dist == "mpi" { // -device cuda was refused with it
		c.device = "cpu"
		fmt.Fprintln(log, "train: device cpu (-dist mpi trains on the CPU)")
		return nil
	}
	be, err := cudabackend.New(cudabackend.Options{})
	if err == nil {
		name := be.(interface{ Name() string }).Name()
		err = be.Close()
		if err == nil {
			c.device = "cuda"
			fmt.Fprintf(log, "train: device %s\n", name)
			return nil
		}
	}
	why := strings.TrimPrefix(err.Error(), "cuda: ")
	if errors.Is(err, cudabackend.ErrStandIn) {
		// A setting to fix, not a machine without a GPU: auto does not
		// fall back to the CPU over it.
		return &usageError{fmt.Errorf("-device %s: %s", c.device, why)}
	}
	if c.device == "cuda" {
		return errors.New("-device cuda: " + why)
	}
	c.device = "cpu"
	fmt.Fprintf(log, "train: device cpu (no usable GPU: %s)\n", why)
	return nil
}
