package main

import (
	"fmt"
	"io"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
)

// selectDevice checks the GPU for -device cuda. Where it is missing (no
// device, or no NVIDIA libraries), the run goes on on the CPU, saying why.
func selectDevice(c *config, log io.Writer) {
	if c.device != "cuda" {
		return
	}
	d, err := cudabackend.Probe()
	if err != nil {
		fmt.Fprintf(log, "train: %v; running on the CPU\n", err)
		c.device = "cpu"
		return
	}
	fmt.Fprintf(log, "train: CUDA device %s (compute %d.%d, %.1f GiB, driver %d)\n",
		d.Name, d.Major, d.Minor, float64(d.TotalMemory)/(1<<30), d.DriverVersion)
}
