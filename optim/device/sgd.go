package device

import (
	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// sgdStepper builds SGD's device stepper (optim.SGDConfig, the rule in
// optim/sgd.go), with the group's decoupled weight decay: the kernel
// backend.SGDStep, whose CPU path runs the host's arithmetic
// (internal/update).
func sgdStepper(w *work, c optim.SGDConfig) (optim.Stepper, error) {
	o, err := newMomentum(w, c.Momentum)
	if err != nil {
		return nil, err
	}
	k := backend.SGDStep{N: size(w.shape), Momentum: c.Momentum, Decay: w.b.WeightDecay, W: w.value, G: w.grad, LR: w.hyper}
	if c.Momentum != 0 {
		k.Mom = o.bufs[0]
	}
	if o.step, err = w.prepare(k); err != nil {
		return nil, err
	}
	return o, nil
}
