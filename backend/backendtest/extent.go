package backendtest

import "github.com/orthonet/orthonet/backend"

// Extent returns a Buffer of n elements of type dt that holds no memory and
// belongs to no backend: enough to check a kernel's operands or to plan
// its addresses, and a buffer every backend refuses as not its own.
func Extent(dt backend.DType, n int) backend.Buffer { return extent{dt, n} }

type extent struct {
	dt backend.DType
	n  int
}

func (e extent) DType() backend.DType { return e.dt }
func (e extent) Len() int             { return e.n }
