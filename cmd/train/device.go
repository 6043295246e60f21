package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/internal/gpu"
)

// cpuSibling is the CPU build that make cuda and make cuda-legacy put beside the cuda build.
const cpuSibling = "train-cpu"

func defaultDevice() string {
	if cudabackend.Built {
		return "cuda"
	}
	return "cpu"
}

// selectDevice checks the GPU for -device cuda. Where it is missing, the
// run goes on on the CPU, saying why. A binary with Gorgonia's CUDA machine
// (make cuda-legacy) runs every Gorgonia graph on the GPU, so there the
// CPU run, and -device cpu, is handed to the CPU build beside it; without
// one it is an error.
func selectDevice(c *config, args []string, log io.Writer) error {
	why := "-device cpu asked of the legacy cuda build"
	if c.device == "cuda" {
		d, err := cudabackend.Probe()
		if err == nil {
			fmt.Fprintf(log, "train: CUDA device %s (compute %d.%d, %.1f GiB, driver %d)\n",
				d.Name, d.Major, d.Minor, float64(d.TotalMemory)/(1<<30), d.DriverVersion)
			return nil
		}
		why = err.Error()
	} else if !gpu.Built {
		return nil
	}
	if !gpu.Built {
		fmt.Fprintf(log, "train: %s; running on the CPU\n", why)
		c.device = "cpu"
		return nil
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
