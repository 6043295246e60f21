package cpu

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/backend"
)

// unaryFunc returns the loop of a unary function over dst and src of equal
// length (dst may be src).
func unaryFunc[T Float](op backend.UnaryOp) (func(dst, src []T), error) {
	f := func(fn func(float64) float64) func(dst, src []T) {
		return func(dst, src []T) {
			src = src[:len(dst)]
			for i, x := range src {
				dst[i] = T(fn(float64(x)))
			}
		}
	}
	switch op {
	case backend.Neg:
		return func(dst, src []T) {
			src = src[:len(dst)]
			for i, x := range src {
				dst[i] = -x
			}
		}, nil
	case backend.Abs:
		return f(math.Abs), nil
	case backend.Sign:
		return f(func(x float64) float64 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return x // 0, -0 and NaN keep themselves
		}), nil
	case backend.Exp:
		return f(math.Exp), nil
	case backend.Log:
		return f(math.Log), nil
	case backend.Log1p:
		return f(math.Log1p), nil
	case backend.Expm1:
		return f(math.Expm1), nil
	case backend.Sqrt:
		return f(math.Sqrt), nil
	case backend.Square:
		return func(dst, src []T) {
			src = src[:len(dst)]
			for i, x := range src {
				dst[i] = x * x
			}
		}, nil
	case backend.Cube:
		return func(dst, src []T) {
			src = src[:len(dst)]
			for i, x := range src {
				dst[i] = x * x * x
			}
		}, nil
	case backend.Tanh:
		return f(math.Tanh), nil
	case backend.Sigmoid:
		return f(func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }), nil
	case backend.Inverse:
		return func(dst, src []T) {
			src = src[:len(dst)]
			for i, x := range src {
				dst[i] = 1 / x
			}
		}, nil
	case backend.InverseSqrt:
		return f(func(x float64) float64 { return 1 / math.Sqrt(x) }), nil
	case backend.Ceil:
		return f(math.Ceil), nil
	case backend.Floor:
		return f(math.Floor), nil
	case backend.ReLU:
		return func(dst, src []T) {
			src = src[:len(dst)]
			for i, x := range src {
				if x < 0 { // NaN stays NaN, as max(x, 0) in IEEE arithmetic
					x = 0
				}
				dst[i] = x
			}
		}, nil
	case backend.Softplus:
		return f(func(x float64) float64 {
			if x > 36 { // exp(-x) is below half an ulp of x in float64
				return x
			}
			return math.Log1p(math.Exp(x))
		}), nil
	case backend.Identity:
		return func(dst, src []T) { copy(dst, src) }, nil
	case backend.Sin:
		return f(math.Sin), nil
	case backend.Cos:
		return f(math.Cos), nil
	case backend.Log2:
		return f(math.Log2), nil
	case backend.GELU:
		return f(gelu), nil
	}
	return nil, fmt.Errorf("%w: function %v", backend.ErrUnsupported, op)
}

func prepareMap[T Float](b *Backend, k backend.Map) (backend.Func, error) {
	fn, err := unaryFunc[T](k.Op)
	if err != nil {
		return nil, err
	}
	src, dst := Host[T](k.Src)[:k.N], Host[T](k.Dst)[:k.N]
	cost := 1
	if k.Op != backend.Neg && k.Op != backend.Square && k.Op != backend.Cube && k.Op != backend.ReLU && k.Op != backend.Identity && k.Op != backend.Inverse {
		cost = 8 // a math library call
	}
	s := b.split(k.N, cost, func(lo, hi int) { fn(dst[lo:hi], src[lo:hi]) })
	return func() error { s.run(); return nil }, nil
}

// binaryFunc returns the loop of a binary function: dst[i] = a[i] op b[i],
// where a or b of length 1 is broadcast.
func binaryFunc[T Float](op backend.BinaryOp) (func(dst, a, b []T), error) {
	gen := func(fn func(x, y T) T) func(dst, a, b []T) {
		return func(dst, a, b []T) {
			switch {
			case len(a) == 1 && len(b) == 1 && len(dst) != 1:
				v := fn(a[0], b[0])
				for i := range dst {
					dst[i] = v
				}
			case len(a) == 1 && len(dst) != 1:
				x := a[0]
				b = b[:len(dst)]
				for i, y := range b {
					dst[i] = fn(x, y)
				}
			case len(b) == 1 && len(dst) != 1:
				y := b[0]
				a = a[:len(dst)]
				for i, x := range a {
					dst[i] = fn(x, y)
				}
			default:
				a, b = a[:len(dst)], b[:len(dst)]
				for i, x := range a {
					dst[i] = fn(x, b[i])
				}
			}
		}
	}
	cmp := func(c func(x, y T) bool) func(dst, a, b []T) {
		return gen(func(x, y T) T {
			if c(x, y) {
				return 1
			}
			return 0
		})
	}
	switch op {
	case backend.Add:
		return gen(func(x, y T) T { return x + y }), nil
	case backend.Sub:
		return gen(func(x, y T) T { return x - y }), nil
	case backend.Mul:
		return gen(func(x, y T) T { return x * y }), nil
	case backend.Div:
		return gen(func(x, y T) T { return x / y }), nil
	case backend.Pow:
		return gen(func(x, y T) T { return T(math.Pow(float64(x), float64(y))) }), nil
	case backend.Lt:
		return cmp(func(x, y T) bool { return x < y }), nil
	case backend.Gt:
		return cmp(func(x, y T) bool { return x > y }), nil
	case backend.Le:
		return cmp(func(x, y T) bool { return x <= y }), nil
	case backend.Ge:
		return cmp(func(x, y T) bool { return x >= y }), nil
	case backend.Eq:
		return cmp(func(x, y T) bool { return x == y }), nil
	case backend.Ne:
		return cmp(func(x, y T) bool { return x != y }), nil
	case backend.Max2:
		return gen(func(x, y T) T {
			if x > y || x != x {
				return x
			}
			return y
		}), nil
	case backend.GELUGrad:
		return gen(func(x, y T) T { return T(float64(y) * geluDeriv(float64(x))) }), nil
	case backend.Min2:
		return gen(func(x, y T) T {
			if x < y || x != x {
				return x
			}
			return y
		}), nil
	}
	return nil, fmt.Errorf("%w: function %v", backend.ErrUnsupported, op)
}

func prepareZip[T Float](b *Backend, k backend.Zip) (backend.Func, error) {
	fn, err := binaryFunc[T](k.Op)
	if err != nil {
		return nil, err
	}
	// Hot same-shape loops without the closure call per element.
	fast := fastZip[T](k.Op)
	av, bv, dst := Host[T](k.A), Host[T](k.B), Host[T](k.Dst)[:k.N]
	cost := 1
	if k.Op == backend.Pow || k.Op == backend.GELUGrad {
		cost = 16
	}
	s := b.split(k.N, cost, func(lo, hi int) {
		a, bb := av, bv
		if k.AScalar {
			a = a[:1]
		} else {
			a = a[lo:hi]
		}
		if k.BScalar {
			bb = bb[:1]
		} else {
			bb = bb[lo:hi]
		}
		if fast != nil && !k.AScalar && !k.BScalar {
			fast(dst[lo:hi], a, bb)
			return
		}
		fn(dst[lo:hi], a, bb)
	})
	return func() error { s.run(); return nil }, nil
}

// fastZip returns inlined loops of the common arithmetic on equal lengths.
func fastZip[T Float](op backend.BinaryOp) func(dst, a, b []T) {
	switch op {
	case backend.Add:
		return func(dst, a, b []T) {
			a, b = a[:len(dst)], b[:len(dst)]
			for i := range dst {
				dst[i] = a[i] + b[i]
			}
		}
	case backend.Sub:
		return func(dst, a, b []T) {
			a, b = a[:len(dst)], b[:len(dst)]
			for i := range dst {
				dst[i] = a[i] - b[i]
			}
		}
	case backend.Mul:
		return func(dst, a, b []T) {
			a, b = a[:len(dst)], b[:len(dst)]
			for i := range dst {
				dst[i] = a[i] * b[i]
			}
		}
	case backend.Div:
		return func(dst, a, b []T) {
			a, b = a[:len(dst)], b[:len(dst)]
			for i := range dst {
				dst[i] = a[i] / b[i]
			}
		}
	}
	return nil
}

func prepareReduce[T Float](b *Backend, k backend.Reduce) backend.Func {
	src := Host[T](k.Src)[:k.Outer*k.Mid*k.Inner]
	dst := Host[T](k.Dst)[:k.Outer*k.Inner]
	mid, inner := k.Mid, k.Inner
	var s *splitter
	if inner == 1 {
		// Each output is a contiguous run of Mid elements.
		s = b.split(k.Outer, mid, func(lo, hi int) {
			for o := lo; o < hi; o++ {
				row := src[o*mid : (o+1)*mid]
				if k.Op == backend.Sum {
					dst[o] = T(sum(row))
				} else {
					dst[o] = maxOf(row)
				}
			}
		})
	} else {
		// Rows of Inner elements are combined into the output row.
		s = b.split(k.Outer*inner, mid, func(lo, hi int) {
			for o := 0; o < k.Outer; o++ {
				l, h := max(lo, o*inner)-o*inner, min(hi, (o+1)*inner)-o*inner
				if l >= h {
					continue
				}
				out := dst[o*inner+l : o*inner+h]
				base := o * mid * inner
				copy(out, src[base+l:base+h])
				for m := 1; m < mid; m++ {
					row := src[base+m*inner+l : base+m*inner+h]
					if k.Op == backend.Sum {
						for i, v := range row {
							out[i] += v
						}
					} else {
						for i, v := range row {
							if v > out[i] || v != v {
								out[i] = v
							}
						}
					}
				}
			}
		})
	}
	return func() error { s.run(); return nil }
}

// sum adds a in float64, four lanes at a time.
func sum[T Float](a []T) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i])
		s1 += float64(a[i+1])
		s2 += float64(a[i+2])
		s3 += float64(a[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// maxOf returns the largest element, or NaN if there is one.
func maxOf[T Float](a []T) T {
	m := a[0]
	for _, v := range a[1:] {
		if v > m || v != v {
			m = v
			if v != v {
				return v
			}
		}
	}
	return m
}

func prepareSoftmax[T Float](b *Backend, k backend.Softmax) backend.Func {
	n := k.Outer * k.Axis * k.Inner
	src, dst := Host[T](k.Src)[:n], Host[T](k.Dst)[:n]
	axis, inner := k.Axis, k.Inner
	s := b.split(k.Outer*inner, 4*axis, func(lo, hi int) {
		for lane := lo; lane < hi; lane++ {
			o, in := lane/inner, lane%inner
			base := o*axis*inner + in
			m := src[base]
			for j := 1; j < axis; j++ {
				if v := src[base+j*inner]; v > m {
					m = v
				}
			}
			var z float64
			for j := 0; j < axis; j++ {
				z += math.Exp(float64(src[base+j*inner] - m))
			}
			if k.Log {
				lz := math.Log(z)
				for j := 0; j < axis; j++ {
					dst[base+j*inner] = T(float64(src[base+j*inner]-m) - lz)
				}
				continue
			}
			for j := 0; j < axis; j++ {
				dst[base+j*inner] = T(math.Exp(float64(src[base+j*inner]-m)) / z)
			}
		}
	})
	return func() error { s.run(); return nil }
}

func prepareSoftmaxGrad[T Float](b *Backend, k backend.SoftmaxGrad) backend.Func {
	n := k.Outer * k.Axis * k.Inner
	y, dy, dx := Host[T](k.Y)[:n], Host[T](k.DY)[:n], Host[T](k.DX)[:n]
	axis, inner := k.Axis, k.Inner
	s := b.split(k.Outer*inner, 3*axis, func(lo, hi int) {
		for lane := lo; lane < hi; lane++ {
			o, in := lane/inner, lane%inner
			base := o*axis*inner + in
			var dot float64
			for j := 0; j < axis; j++ {
				i := base + j*inner
				if k.Log {
					dot += float64(dy[i])
				} else {
					dot += float64(dy[i]) * float64(y[i])
				}
			}
			for j := 0; j < axis; j++ {
				i := base + j*inner
				if k.Log {
					dx[i] = T(float64(dy[i]) - math.Exp(float64(y[i]))*dot)
				} else {
					dx[i] = T(float64(y[i]) * (float64(dy[i]) - dot))
				}
			}
		}
	})
	return func() error { s.run(); return nil }
}

func prepareCopy[T Float](b *Backend, k backend.Copy) backend.Func {
	// Drop axes of length 1 and merge axes that are contiguous in both
	// views, so that the innermost loop is as long as possible.
	shape, ss, ds := k.Simplified()
	for _, n := range shape {
		if n < 1 {
			return func() error { return nil } // nothing to copy
		}
	}
	// Negative strides reach below the operand's offset: index from the
	// lowest element each view reaches (Check keeps it in the buffer).
	var s0, d0 int
	for i, n := range shape {
		s0 -= min(ss[i], 0) * (n - 1)
		d0 -= min(ds[i], 0) * (n - 1)
	}
	src := Host[T](backend.At(k.Src.Buf, k.Src.Off-s0))
	dst := Host[T](backend.At(k.Dst.Buf, k.Dst.Off-d0))
	d := len(shape)
	if d == 0 {
		return func() error {
			if k.Add {
				dst[0] += src[0]
			} else {
				dst[0] = src[0]
			}
			return nil
		}
	}
	inner := shape[d-1]
	outer := 1
	for _, n := range shape[:d-1] {
		outer *= n
	}
	sIn, dIn := ss[d-1], ds[d-1]
	s := b.split(outer, inner, func(lo, hi int) {
		var idx [backend.MaxDims]int
		// Position idx at row lo.
		r := lo
		for ax := d - 2; ax >= 0; ax-- {
			idx[ax] = r % shape[ax]
			r /= shape[ax]
		}
		for row := lo; row < hi; row++ {
			so, do := s0, d0
			for ax := 0; ax < d-1; ax++ {
				so += idx[ax] * ss[ax]
				do += idx[ax] * ds[ax]
			}
			switch {
			case sIn == 1 && dIn == 1 && !k.Add:
				copy(dst[do:do+inner], src[so:so+inner])
			case sIn == 1 && dIn == 1:
				dv, sv := dst[do:do+inner], src[so:so+inner]
				for i := range dv {
					dv[i] += sv[i]
				}
			case k.Add:
				for i := 0; i < inner; i++ {
					dst[do+i*dIn] += src[so+i*sIn]
				}
			default:
				for i := 0; i < inner; i++ {
					dst[do+i*dIn] = src[so+i*sIn]
				}
			}
			for ax := d - 2; ax >= 0; ax-- {
				if idx[ax]++; idx[ax] < shape[ax] {
					break
				}
				idx[ax] = 0
			}
		}
	})
	return func() error { s.run(); return nil }
}
