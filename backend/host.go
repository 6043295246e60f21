package backend

import "fmt"

// hostSlice is a HostBuffer over a slice of the caller's.
type hostSlice struct {
	dt   DType
	data any
	n    int
}

func (h *hostSlice) DType() DType { return h.dt }
func (h *hostSlice) Len() int     { return h.n }
func (h *hostSlice) Host() any    { return h.data }

// HostSlice returns a host buffer over s, a []float32, []float64 or []int32,
// that shares s's memory: the operands of a kernel that RunHost runs.
func HostSlice(s any) (HostBuffer, error) {
	switch s := s.(type) {
	case []float32:
		return &hostSlice{dt: Float32, data: s, n: len(s)}, nil
	case []float64:
		return &hostSlice{dt: Float64, data: s, n: len(s)}, nil
	case []int32:
		return &hostSlice{dt: Int32, data: s, n: len(s)}, nil
	}
	return nil, fmt.Errorf("backend: a host buffer over a %T, want []float32, []float64 or []int32", s)
}

// RunHost checks k and runs its CPU implementation (Host) on the calling
// goroutine alone, as a CPU backend of one thread does: where no backend is
// at hand, such as the Do of package fused's ops under Gorgonia's tape
// machine. Every operand of k must be a host buffer (HostSlice).
func RunHost(k Kernel) error {
	if err := k.Check(); err != nil {
		return err
	}
	for _, op := range Operands(k) {
		if _, ok := op.Buf.(HostBuffer); op.Buf != nil && !ok {
			return fmt.Errorf("backend: %s: a %T is not a host buffer", Name(k), op.Buf)
		}
	}
	h, ok := k.(HostKernel)
	if !ok {
		return fmt.Errorf("backend: %s: %w: %T", Name(k), ErrUnsupported, k)
	}
	p := NewPool(1, 0)
	defer p.Close()
	f, err := h.Host(p)
	if err != nil {
		return fmt.Errorf("backend: %s: %w", Name(k), err)
	}
	return f()
}
