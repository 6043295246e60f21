package cpu

import (
	"math"

	"github.com/orthonet/orthonet/backend"
)

// prepareStep returns the Func of an optimizer-step kernel, if k is one.
func prepareStep[T Float](b *Backend, k backend.Kernel) (f backend.Func, ok bool) {
	switch k := k.(type) {
	case backend.SGDStep:
		return prepareSGD[T](b, k), true
	case backend.AdamStep:
		return prepareAdam[T](b, k), true
	case backend.AddScaled:
		return prepareAddScaled[T](b, k), true
	case backend.SkewStep:
		return prepareSkew[T](k), true
	case backend.Symmetrize:
		return prepareSymmetrize[T](k), true
	case backend.DropoutMask:
		return prepareDropoutMask[T](b, k), true
	}
	return nil, false
}

func prepareSGD[T Float](b *Backend, k backend.SGDStep) backend.Func {
	w, g, lrp := Host[T](k.W)[:k.N], Host[T](k.G)[:k.N], Host[float64](k.LR)
	var mom []T
	if k.Momentum != 0 {
		mom = Host[T](k.Mom)[:k.N]
	}
	var lr T
	s := b.split(k.N, 2, func(lo, hi int) {
		ws, gs := w[lo:hi], g[lo:hi]
		if k.Decay > 0 && lrp[0] > 0 {
			f := T(1 - lrp[0]*k.Decay)
			for i := range ws {
				ws[i] *= f
			}
		}
		if mom == nil {
			for i := range ws {
				ws[i] -= lr * gs[i]
			}
			return
		}
		mu, ms := T(k.Momentum), mom[lo:hi]
		for i := range ws {
			ms[i] = mu*ms[i] + gs[i]
			ws[i] -= lr * ms[i]
		}
	})
	return func() error {
		lr = T(lrp[0])
		s.run()
		return nil
	}
}

func prepareAdam[T Float](b *Backend, k backend.AdamStep) backend.Func {
	w, g := Host[T](k.W)[:k.N], Host[T](k.G)[:k.N]
	m, v, hyper := Host[T](k.M)[:k.N], Host[T](k.V)[:k.N], Host[float64](k.Hyper)[:3]
	b1, b2, eps := k.Beta1, k.Beta2, k.Eps
	s := b.split(k.N, 8, func(lo, hi int) {
		lr, c1, c2 := hyper[0], hyper[1], hyper[2]
		if k.Decay > 0 && lr > 0 {
			f := T(1 - lr*k.Decay)
			for i := lo; i < hi; i++ {
				w[i] *= f
			}
		}
		for i := lo; i < hi; i++ {
			gi := float64(g[i])
			mi := b1*float64(m[i]) + (1-b1)*gi
			vi := b2*float64(v[i]) + (1-b2)*gi*gi
			m[i], v[i] = T(mi), T(vi)
			w[i] -= T(lr * (mi / c1) / (math.Sqrt(vi/c2) + eps))
		}
	})
	return func() error { s.run(); return nil }
}

func prepareAddScaled[T Float](b *Backend, k backend.AddScaled) backend.Func {
	x, y, dst := Host[T](k.X)[:k.N], Host[T](k.Y)[:k.N], Host[T](k.Dst)[:k.N]
	var scale []float64
	if k.Scale.Buf != nil {
		scale = Host[float64](k.Scale)[:1]
	}
	var a T
	s := b.split(k.N, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dst[i] = x[i] + a*y[i]
		}
	})
	return func() error {
		if scale != nil {
			a = T(k.Alpha * scale[0])
		} else {
			a = T(k.Alpha)
		}
		s.run()
		return nil
	}
}

func prepareSkew[T Float](k backend.SkewStep) backend.Func {
	r := k.R
	bm, y, lr := Host[T](k.B)[:r*r], Host[float64](k.Y)[:r*r], Host[float64](k.LR)[:1]
	return func() error {
		for i := 0; i < r; i++ {
			for j := 0; j < r; j++ {
				omega := (float64(bm[i*r+j]) - float64(bm[j*r+i])) / 2
				v := -lr[0] * omega
				if i == j {
					v++
				}
				y[i*r+j] = v
			}
		}
		return nil
	}
}

func prepareIdentityDelta[T Float](k backend.IdentityDelta) backend.Func {
	r := k.R
	y, dst := Host[float64](k.Y)[:r*r], Host[T](k.Dst)[:r*r]
	return func() error {
		for i, v := range y {
			dst[i] = T(v)
		}
		for i := 0; i < r; i++ {
			dst[i*r+i] = T(y[i*r+i] - 1)
		}
		return nil
	}
}

func prepareSymmetrize[T Float](k backend.Symmetrize) backend.Func {
	n := k.N
	a := Host[T](k.A)[:n*n]
	return func() error {
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				m := (a[i*n+j] + a[j*n+i]) / 2
				a[i*n+j], a[j*n+i] = m, m
			}
		}
		return nil
	}
}

func prepareDropoutMask[T Float](b *Backend, k backend.DropoutMask) backend.Func {
	dst, step := Host[T](k.Dst)[:k.N], Host[float64](k.Step)[:1]
	keep := T(1 / (1 - k.P))
	var st uint64
	s := b.split(k.N, 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dst[i] = 0
			if backend.DropoutDraw(k.Seed, k.Stream, st, uint64(i)) >= k.P {
				dst[i] = keep
			}
		}
	})
	return func() error {
		st = uint64(step[0])
		s.run()
		return nil
	}
}
