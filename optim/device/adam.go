package device

import (
	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// adamStepper builds Adam's device stepper (optim.AdamConfig, the rule in
// optim/adam.go), with the group's decoupled weight decay.
func adamStepper(w *work, c optim.AdamConfig) (optim.Stepper, error) {
	return newAdam(w, c, w.b.WeightDecay)
}

// adamWStepper builds AdamW's (optim.AdamWConfig, optim/adamw.go): Adam
// with AdamW's weight decay.
func adamWStepper(w *work, c optim.AdamWConfig) (optim.Stepper, error) {
	return newAdam(w, optim.AdamConfig(c), c.WeightDecay(w.b.WeightDecay))
}

// newAdam returns Adam with decoupled weight decay decay: the kernel
// backend.AdamStep, whose CPU path runs the host's arithmetic
// (internal/update), its moments the state's buffers.
func newAdam(w *work, c optim.AdamConfig, decay float64) (optim.Stepper, error) {
	host, err := optim.NewAdam[float64](size(w.shape), c)
	if err != nil {
		return nil, err
	}
	c = host.Config() // with its defaults
	o, err := newBuffered(w, optim.StateStepCount, optim.StateFirstMoment, optim.StateSecondMoment)
	if err != nil {
		return nil, err
	}
	o.step, err = w.prepare(backend.AdamStep{N: size(w.shape), Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, Decay: decay,
		W: w.value, G: w.grad, M: o.bufs[0], V: o.bufs[1], Hyper: w.hyper})
	if err != nil {
		return nil, err
	}
	return o, nil
}
