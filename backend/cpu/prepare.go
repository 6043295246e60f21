package cpu

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
)

// Prepare checks k and returns a Func that runs it.
func (b *Backend) Prepare(k backend.Kernel) (backend.Func, error) {
	if c, ok := k.(backend.Checker); ok {
		if err := c.Check(); err != nil {
			return nil, err
		}
	}
	if err := b.owns(k); err != nil {
		return nil, err
	}
	h, ok := k.(backend.HostKernel)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: %w: %T", k.Name(), backend.ErrUnsupported, k)
	}
	f, err := h.Host(b.pool)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", k.Name(), err)
	}
	return f, nil
}

// owns checks that every operand of k is a buffer of this backend.
func (b *Backend) owns(k backend.Kernel) error {
	for _, op := range k.Operands() {
		if op.Buf == nil {
			continue
		}
		if _, err := own(op.Buf); err != nil {
			return fmt.Errorf("%s: %w", k.Name(), err)
		}
	}
	return nil
}
