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
	if c.Driver != 0 && base == "libcuda.so.1" {
		// A driver is found by soname wherever the toolkit is, or only in
		// its own folder.
		if c.DriverFolder == "" && byName || c.DriverFolder != "" && filepath.Clean(path) == filepath.Join(c.DriverFolder, base) {
			return LibCUDA, false, true
		}
		return LibNone, false, false
	}
	if jit := jitLinkName(c); jit != "" && base == jit {
		stale := c.StaleJitLink != "" && filepath.Clean(path) == filepath.Join(c.StaleJitLink, base)
		return LibNone, false, found || stale
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

// jitLinkName returns the soname of the libnvJitLink that cuSOLVER needs
// under c, or "" where there is no cuSOLVER.
func jitLinkName(c Config) string {
	if c.CUSOLVER == 0 {
		return ""
	}
	return fmt.Sprintf("libnvJitLink.so.%d", c.CUSOLVER+1)
}

// needs returns the loader's error for opening path (library lib) under c
// with the libnvJitLink copies already opened (by path; "" where the
// loader found it by soname): cuSOLVER needs libnvJitLink, which the
// loader finds by soname alone (where Folder is "") or takes from one
// opened before, and an older copy lacks the symbols it needs.
func needs(c Config, path string, lib Lib, jit map[string]string) error {
	name := jitLinkName(c)
	if lib != LibCUSOLVER || name == "" {
		return nil
	}
	from, opened := jit[name]
	switch {
	case !opened && c.Folder != "":
		return openError(name)
	case opened && c.StaleJitLink != "" && filepath.Clean(from) == filepath.Join(c.StaleJitLink, name):
		return fmt.Errorf("%s: undefined symbol: __nvJitLinkCreate_%d_0, version %s", path, c.CUSOLVER+1, name)
	}
	return nil
}
