package standin

import "fmt"

// Version is a library's major and minor version.
type Version struct{ Major, Minor int }

// Order is the order in which kernels' blocks, and each block's threads, run.
type Order int

// The orders: Rotate takes Forward, Reverse and Random in turn, launch by
// launch.
const (
	Rotate Order = iota
	Forward
	Reverse
	Random
)

// Config is what the model pretends to be.
type Config struct {
	Driver         int     // cuDriverGetVersion, e.g. 12080; 0: no driver installed (libcuda.so.1 absent)
	NVRTC          Version // e.g. {12, 8}; zero: not installed
	CUBLAS         int     // soname major of libcublas (12 or 13); 0: not installed
	CUSOLVER       int     // soname major of libcusolver (11 in CUDA 12, 12 in CUDA 13); 0: not installed
	Devices        int
	Major, Minor   int    // compute capability
	Memory         int64  // bytes per device
	Folder         string // "": libraries found by soname; else only by their path in Folder
	BuiltinsInPath bool   // libnvrtc-builtins found by soname (else it must be opened from Folder first)
	// DriverFolder, when set, is where libcuda.so.1 is: found only by its
	// path there, not by soname (a driver the loader's path lacks).
	DriverFolder string
	// StaleJitLink, when set, is a folder that holds an older copy of the
	// libnvJitLink that cuSOLVER needs: loaded first, it leaves cuSOLVER an
	// undefined symbol. (cuSOLVER of soname major N needs libnvJitLink.so.N+1,
	// found beside it in Folder, or by soname where Folder is "".)
	StaleJitLink string
	// Lacks lists functions that the model's libraries do not export (as a
	// driver older or newer than a name lacks it).
	Lacks []string
	Order Order
	Seed  uint64
}

// DefaultConfig returns a CUDA 12.8 installation (driver 12080, NVRTC 12.8,
// cuBLAS 12, cuSOLVER 11) with one sm_90 device of 16 GiB, libraries found
// by soname, kernels in rotating order with seed 1.
func DefaultConfig() Config {
	return Config{
		Driver:         12080,
		NVRTC:          Version{12, 8},
		CUBLAS:         12,
		CUSOLVER:       11,
		Devices:        1,
		Major:          9,
		Minor:          0,
		Memory:         16 << 30,
		BuiltinsInPath: true,
		Order:          Rotate,
		Seed:           1,
	}
}

// check reports what is wrong with c.
func (c Config) check() error {
	switch {
	case c.Driver < 0 || c.Driver > 99990:
		return fmt.Errorf("standin: driver version %d", c.Driver)
	case c.NVRTC.Major < 0 || c.NVRTC.Minor < 0 || c.NVRTC.Minor > 9 || (c.NVRTC.Major == 0 && c.NVRTC.Minor != 0):
		return fmt.Errorf("standin: NVRTC version %d.%d", c.NVRTC.Major, c.NVRTC.Minor)
	case c.CUBLAS < 0 || c.CUSOLVER < 0:
		return fmt.Errorf("standin: cuBLAS %d, cuSOLVER %d", c.CUBLAS, c.CUSOLVER)
	case c.Devices < 0 || c.Devices > 64:
		return fmt.Errorf("standin: %d devices", c.Devices)
	case c.Major < 0 || c.Major > 99 || c.Minor < 0 || c.Minor > 9:
		return fmt.Errorf("standin: compute capability %d.%d", c.Major, c.Minor)
	case c.Memory < 0:
		return fmt.Errorf("standin: %d bytes of device memory", c.Memory)
	case c.Order < Rotate || c.Order > Random:
		return fmt.Errorf("standin: order %d", c.Order)
	}
	return nil
}

// Lib is a library of the model: the ON_LIB_* index of cuapi.h, or LibNone
// for a library without functions of its own (libnvrtc-builtins,
// libcublasLt).
type Lib int

// The libraries, as cuapi.h numbers them.
const (
	LibNone     Lib = -1
	LibCUDA     Lib = 0
	LibNVRTC    Lib = 1
	LibCUBLAS   Lib = 2
	LibCUSOLVER Lib = 3
)

// openError is dlopen's message for a library it cannot find.
func openError(path string) error {
	return fmt.Errorf("%s: cannot open shared object file: No such file or directory", path)
}
