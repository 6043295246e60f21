package program

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/device"
)

// NewSolver returns optim's Solver over p's parameters, grouped by groups
// (see optim.NewSolver), stepping them where they live from the gradients
// of p's last Run: on a backend whose buffers live on the host (the CPU
// backend) by optim's steppers on the buffers themselves, on another (a
// GPU) by package optim/device's. Each Step first has p check its
// gradients for NaN and Inf (p.CheckGrads). The Solver implements
// checkpoint.Solver; its Close frees what it holds on the device. With
// o.Comm it is one rank of data-parallel training (optim.Communicator), for
// parameters on the host: a GPU's are refused (optim.ErrNotDistributed).
func NewSolver(p *Program, groups []optim.Group, o optim.Options) (*optim.Solver, error) {
	if p.flags == nil {
		return nil, fmt.Errorf("program: the program has no gradients (compiled with NoGrad or without parameters)")
	}
	o.Checked, o.Device = p.CheckGrads, nil
	params := make([]optim.Param, len(p.params))
	for i, pv := range p.params {
		params[i] = optim.Param{Name: pv.Node.Name(), Shape: pv.v.shape, Manifold: pv.Manifold}
		value, ok := hostValue(pv.Value, pv.Size)
		if !ok {
			o.Device = device.New(p.be)
			params[i].Value, params[i].Grad = device.On(pv.Value, pv.Size), device.On(pv.Grad, pv.Size)
			if pv.fa != nil { // the device refuses factored gradients by name
				params[i].Grad, params[i].GradA, params[i].GradB, params[i].GradK = nil, device.On(pv.GradA, pv.fa.size), device.On(pv.GradB, pv.fb.size), pv.GradK
			}
			continue
		}
		params[i].Value = value
		if pv.fa != nil {
			params[i].GradA, _ = hostValue(pv.GradA, pv.fa.size)
			params[i].GradB, _ = hostValue(pv.GradB, pv.fb.size)
			params[i].GradK = pv.GradK
		} else {
			params[i].Grad, _ = hostValue(pv.Grad, pv.Size)
		}
	}
	return optim.NewSolver(params, groups, o)
}

// hostValue returns the n host elements at op as an optim.Host of their
// element type, if op's buffer is on the host.
func hostValue(op backend.Operand, n int) (optim.Value, bool) {
	switch s, _ := hostSlice(op, n); s := s.(type) {
	case []float32:
		return optim.Host[float32](s), true
	case []float64:
		return optim.Host[float64](s), true
	}
	return nil, false
}

// hostSlice returns the n host elements at op, a []float32 or []float64,
// if its buffer is on the host and holds floats.
func hostSlice(op backend.Operand, n int) (any, bool) {
	h, ok := op.Buf.(backend.HostBuffer)
	if !ok {
		return nil, false
	}
	switch s := h.Host().(type) {
	case []float32:
		return s[op.Off : op.Off+n], true
	case []float64:
		return s[op.Off : op.Off+n], true
	}
	return nil, false
}
