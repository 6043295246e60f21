package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/orthonet/orthonet/internal/gpu"
)

// cpuSibling is the CPU build that make cuda puts beside the cuda build.
const cpuSibling = "train-cpu"

func defaultDevice() string {
	if gpu.Built {
		return "cuda"
	}
	return "cpu"
}

// selectDevice checks the GPU for -device cuda. A cuda build runs every
// Gorgonia graph on the GPU, so where the GPU is missing, or -device cpu is
// asked of a cuda build, it hands the run to the CPU build beside it, saying
// why; without one it is an error.
func selectDevice(c *config, args []string, log io.Writer) error {
	if !gpu.Built {
		return nil
	}
	why := "-device cpu asked of the cuda build"
	if c.device == "cuda" {
		d, err := gpu.Probe()
		if err == nil {
			fmt.Fprintf(log, "train: CUDA device %s (compute %d.%d, %.1f GiB, driver %d)\n",
				d.Name, d.Major, d.Minor, float64(d.TotalMemory)/(1<<30), d.DriverVersion)
			return nil
		}
		why = err.Error()
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s, and the CPU build cannot be found: %w", why, err)
	}
	cpu := filepath.Join(filepath.Dir(exe), cpuSibling)
	if _, err := os.Stat(cpu); err != nil {
		return fmt.Errorf("%s, and there is no CPU build at %s (make cuda builds one)", why, cpu)
	}
	fmt.Fprintf(log, "train: %s; falling back to the CPU build %s\n", why, cpu)
	argv := append([]string{cpu}, args[1:]...)
	argv = append(argv, "-device", "cpu")
	return syscall.Exec(cpu, argv, os.Environ())
}
