package optim

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/update"
)

// The host's elementwise blocks (StepBlocks' WeightDecay, Counter, Decay,
// SGD, Adam): the arithmetic of internal/update, which backend's CPU
// kernels (backend.SGDStep, AdamStep) also run, in place on the weight and
// the state buffers when the step is committed.

func (r *recorder[T]) WeightDecay() float64 { return r.o.decay }

func (r *recorder[T]) Counter(name string) {
	if r.o.counter != "" {
		r.fail(fmt.Errorf("two step counters, %q and %q", r.o.counter, name))
	}
	r.o.counter = name
}

func (r *recorder[T]) Decay(rate float64) {
	if !(rate >= 0) || math.IsInf(rate, 0) {
		r.fail(fmt.Errorf("weight decay %v, want a finite value >= 0", rate))
	}
	if r.decayed {
		r.fail(fmt.Errorf("two StepBlocks.Decay blocks"))
	}
	r.decay, r.decayed = rate, true
}

// inPlace starts an in-place move: it checks that the parameter is
// unconstrained and returns the rate of the Decay before it.
func (r *recorder[T]) inPlace(block string) float64 {
	if r.o.m != nil {
		r.fail(fmt.Errorf("StepBlocks.%s steps an unconstrained parameter, and this weight is on a manifold", block))
	}
	r.moved()
	decay := 0.0
	if r.decayed {
		decay, r.decayed = r.decay, false
	}
	return decay
}

// state returns the slot of ref, a state buffer that an in-place block
// updates at commit.
func (r *recorder[T]) state(ref Ref, block string) int {
	s := r.read(ref)
	for _, st := range r.o.states {
		if st.slot == s && !st.written {
			return s
		}
	}
	r.fail(fmt.Errorf("StepBlocks.%s's buffer %d is not a state buffer (StepBlocks.Buffer with a name) that no other block writes", block, ref))
	return s
}

func (r *recorder[T]) SGD(mom Ref, mu float64) {
	o, decay := r.o, r.inPlace("SGD")
	ms := -1
	switch {
	case mom != None:
		ms = r.state(mom, "SGD")
	case mu != 0:
		r.fail(fmt.Errorf("SGD with momentum %v and no buffer for it", mu))
	}
	o.move = func(x, g []T) {
		update.Decay(x, o.lr, decay)
		var m []T
		if ms >= 0 {
			m = o.bufs[ms]
		}
		update.SGD(x, g, m, T(o.lr), T(mu))
	}
}

func (r *recorder[T]) Adam(m, v Ref, beta1, beta2, eps float64) {
	o, decay := r.o, r.inPlace("Adam")
	ms, vs := r.state(m, "Adam"), r.state(v, "Adam")
	if ms == vs {
		r.fail(fmt.Errorf("StepBlocks.Adam's moments are one buffer"))
	}
	if o.counter == "" {
		r.fail(fmt.Errorf("StepBlocks.Adam before a step counter (StepBlocks.Counter)"))
	}
	if !(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps > 0) {
		r.fail(fmt.Errorf("StepBlocks.Adam's betas %v, %v and eps %v: want betas in [0, 1) and eps > 0", beta1, beta2, eps))
	}
	o.move = func(x, g []T) {
		c1, c2 := update.AdamCorrections(beta1, beta2, float64(o.count))
		update.Decay(x, o.lr, decay)
		update.Adam(x, g, o.bufs[ms], o.bufs[vs], o.lr, beta1, beta2, eps, c1, c2)
	}
}
