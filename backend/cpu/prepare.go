package cpu

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
)

// Prepare checks k, and that every operand of k is a buffer of this
// backend, and returns a Func that runs it.
func (b *Backend) Prepare(k backend.Kernel) (backend.Func, error) {
	if err := k.Check(); err != nil {
		return nil, err
	}
	for _, op := range backend.Operands(k) {
		if op.Buf == nil {
			continue
		}
		if _, err := own(op.Buf); err != nil {
			return nil, fmt.Errorf("%s: %w", backend.Name(k), err)
		}
	}
	h, ok := k.(backend.HostKernel)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: %w: %T", backend.Name(k), backend.ErrUnsupported, k)
	}
	f, err := h.Host(b.pool)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", backend.Name(k), err)
	}
	return f, nil
}
