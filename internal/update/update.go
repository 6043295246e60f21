// Package update is the elementwise arithmetic of SGD, Adam and decoupled
// weight decay, which optim's host steppers and backend's CPU kernels
// (backend.SGDStep, backend.AdamStep) both run, so that the host and a
// device's CPU backend take the same steps bit for bit. The CUDA kernels
// (on_sgd, on_adam in internal/cudak/kernels.cu) are the one other copy:
// C++ that NVRTC compiles cannot call Go.
package update

import "math"

// Float is the element type of a parameter.
type Float interface{ float32 | float64 }

// Decay applies decoupled weight decay (Loshchilov and Hutter 2019) for a
// step of size lr: w = (1 - lr decay) w, the factor rounded to T, when
// both are above 0.
func Decay[T Float](w []T, lr, decay float64) {
	if !(decay > 0 && lr > 0) {
		return
	}
	f := T(1 - lr*decay)
	for i := range w {
		w[i] *= f
	}
}

// SGD is a step of SGD in T: w -= lr g, or with a momentum buffer mom
// (heavy ball, as PyTorch's SGD) mom = mu mom + g, w -= lr mom. mom nil
// means no momentum; g and mom have w's length.
func SGD[T Float](w, g, mom []T, lr, mu T) {
	g = g[:len(w)]
	if mom == nil {
		for i := range w {
			w[i] -= lr * g[i]
		}
		return
	}
	mom = mom[:len(w)]
	for i := range w {
		mom[i] = mu*mom[i] + g[i]
		w[i] -= lr * mom[i]
	}
}

// AdamCorrections returns Adam's bias corrections at step t >= 1 (Kingma
// and Ba 2015): 1 - beta1^t and 1 - beta2^t.
func AdamCorrections(beta1, beta2, t float64) (c1, c2 float64) {
	return 1 - math.Pow(beta1, t), 1 - math.Pow(beta2, t)
}

// Adam is a step of Adam with bias corrections c1 and c2
// (AdamCorrections), the moments in float64 and stored in T:
// m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2,
// w -= lr (m / c1) / (sqrt(v / c2) + eps). g, m and v have w's length.
func Adam[T Float](w, g, m, v []T, lr, beta1, beta2, eps, c1, c2 float64) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for i := range w {
		gi := float64(g[i])
		mi := beta1*float64(m[i]) + (1-beta1)*gi
		vi := beta2*float64(v[i]) + (1-beta2)*gi*gi
		m[i], v[i] = T(mi), T(vi)
		w[i] -= T(lr * (mi / c1) / (math.Sqrt(vi/c2) + eps))
	}
}
