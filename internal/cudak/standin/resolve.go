//go:build cgo

package standin

import (
	"fmt"
	"path/filepath"
	"strings"
)

// resolve returns the library that path opens under c, whether it is
// libnvrtc-builtins, and whether it is found at all.
func resolve(c Config, path string) (lib Lib, builtins, ok bool) {
	if path == "" {
		return LibNone, false, false
	}
	base := filepath.Base(path)
	byName := !strings.Contains(path, "/")
	inFolder := c.Folder != "" && !byName && filepath.Clean(path) == filepath.Join(c.Folder, base)
	found := byName && c.Folder == "" || inFolder
	if c.Driver != 0 && path == "libcuda.so.1" {
		return LibCUDA, false, true // a driver is found by soname, wherever the toolkit is
	}
	if c.NVRTC.Major != 0 {
		name := fmt.Sprintf("libnvrtc.so.%d", c.NVRTC.Major)
		if c.NVRTC.Major == 11 {
			name = "libnvrtc.so.11.2"
		}
		if base == name && found {
			return LibNVRTC, false, true
		}
		if base == fmt.Sprintf("libnvrtc-builtins.so.%d.%d", c.NVRTC.Major, c.NVRTC.Minor) &&
			(byName && c.BuiltinsInPath || inFolder) {
			return LibNone, true, true
		}
	}
	if c.CUBLAS != 0 && found {
		switch base {
		case fmt.Sprintf("libcublas.so.%d", c.CUBLAS):
			return LibCUBLAS, false, true
		case fmt.Sprintf("libcublasLt.so.%d", c.CUBLAS):
			return LibNone, false, true
		}
	}
	if c.CUSOLVER != 0 && found && base == fmt.Sprintf("libcusolver.so.%d", c.CUSOLVER) {
		return LibCUSOLVER, false, true
	}
	return LibNone, false, false
}
