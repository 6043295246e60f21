package program

import (
	"fmt"
	"reflect"

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
		params[i] = optim.Param{Name: pv.Node.Name(), Shape: pv.v.shape, Manifold: pv.Manifold, Value: pv.Value, Grad: pv.Grad}
		if pv.fa != nil {
			params[i].Grad, params[i].GradA, params[i].GradB, params[i].GradK = nil, pv.GradA, pv.GradB, pv.GradK
		}
		value, ok := hostSlice(pv.Value, pv.Size)
		if !ok {
			o.Device = device.New(p.be)
			continue
		}
		params[i].Value = value
		if pv.fa != nil {
			params[i].GradA, _ = hostSlice(pv.GradA, pv.fa.size)
			params[i].GradB, _ = hostSlice(pv.GradB, pv.fb.size)
		} else {
			params[i].Grad, _ = hostSlice(pv.Grad, pv.Size)
		}
	}
	return optim.NewSolver(params, groups, o)
}

// hostSlice returns the n host elements at op, if its buffer is on the host.
func hostSlice(op backend.Operand, n int) (any, bool) {
	h, ok := op.Buf.(backend.HostBuffer)
	if !ok {
		return nil, false
	}
	return reflect.ValueOf(h.Host()).Slice(op.Off, op.Off+n).Interface(), true // a []float32 or []float64
}
