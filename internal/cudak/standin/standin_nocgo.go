//go:build !cgo

package standin

import (
	"errors"
	"unsafe"
)

// Available reports whether the package was built with the model (cgo).
const Available = false

var errNoModel = errors.New("standin: built without cgo: no host model")

// Configure fails: there is no model without cgo.
func Configure(c Config) error {
	if err := c.check(); err != nil {
		return err
	}
	return errNoModel
}

// Current returns the default configuration (there is no model).
func Current() Config { return DefaultConfig() }

// Open fails as dlopen does: without cgo no library is found.
func Open(path string) (Lib, error) { return LibNone, openError(path) }

// Sym returns nil: without cgo there are no functions.
func Sym(l Lib, name string) unsafe.Pointer { return nil }

// HostWaits returns 0: without cgo there is no model to wait for.
func HostWaits() uint64 { return 0 }
