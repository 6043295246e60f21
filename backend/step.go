package backend

import (
	"fmt"

	"github.com/orthonet/orthonet/internal/update"
)

// The kernels of optimizer steps on a device (package optim/device's
// steppers, which optim.Solver runs through Options.Device): step sizes
// come from Float64 operands that the host writes before each step, so
// that a prepared step serves every step size a schedule gives.
var _ = []defined{SGDStep{}, AdamStep{}, AddScaled{}, SkewStep{}, IdentityDelta{}, Symmetrize{}}

// SGDStep is a step of SGD on N elements of W from its gradient G, with
// the step size lr at LR (one Float64 element): with Decay > 0, first
// W = (1 - lr Decay) W; then with Momentum, Mom = Momentum Mom + G and
// W -= lr Mom, else W -= lr G. Arithmetic is in W's type.
type SGDStep struct {
	N               int
	Momentum, Decay float64
	W, G, Mom, LR   Operand
}

// Check checks the operands; Mom may have no buffer when Momentum is 0.
func (k SGDStep) Check() error {
	dt := DTypeOf(k.W)
	if err := checkSized(k, []int{k.N}, dt, "W", k.W, k.N, "G", k.G, k.N); err != nil {
		return err
	}
	if k.Momentum != 0 {
		if err := CheckOperand("sgd-step momentum", k.Mom, dt, k.N); err != nil {
			return err
		}
	}
	return CheckOperand("sgd-step step size", k.LR, Float64, 1)
}

// Host steps in W's type.
func (k SGDStep) Host(p *Pool) (Func, error) {
	return onFloats(p, k, sgdHost[float32], sgdHost[float64])
}

// Device launches on_sgd.
func (k SGDStep) Device(p Planner) {
	elementwise(p, "on_sgd", k.N, sgdArgs{N: k.N, Momentum: k.Momentum, Decay: k.Decay, W: k.W, G: k.G, Mom: k.Mom, Lr: k.LR})
}

func sgdHost[T Float](p *Pool, k SGDStep) Func {
	w, g, lrp := hostData[T](k.W)[:k.N], hostData[T](k.G)[:k.N], hostData[float64](k.LR)
	var mom []T
	if k.Momentum != 0 {
		mom = hostData[T](k.Mom)[:k.N]
	}
	var lr T
	s := p.split(k.N, 2, func(lo, hi int) {
		update.Decay(w[lo:hi], lrp[0], k.Decay)
		var ms []T
		if mom != nil {
			ms = mom[lo:hi]
		}
		update.SGD(w[lo:hi], g[lo:hi], ms, lr, T(k.Momentum))
	})
	return func() error {
		lr = T(lrp[0])
		s.run()
		return nil
	}
}

// AdamStep is a step of Adam on N elements of W from its gradient G, with
// the moments M and V (W's type) and Hyper (two Float64 elements: the step
// size lr and the step's count t >= 1, a whole number, from which the step
// computes the bias corrections c1 = 1 - Beta1^t and c2 = 1 - Beta2^t, the
// powers bit for bit as math.Pow makes them): with Decay > 0 first
// W = (1 - lr Decay) W (AdamW); then, in float64, m = Beta1 m + (1 - Beta1) g,
// v = Beta2 v + (1 - Beta2) g^2 and W -= lr (m / c1) / (sqrt(v / c2) + Eps).
// Beta1 and Beta2 are in [0, 1).
type AdamStep struct {
	N                        int
	Beta1, Beta2, Eps, Decay float64
	W, G, M, V, Hyper        Operand
}

// Check checks the operands.
func (k AdamStep) Check() error {
	if !(k.Beta1 >= 0 && k.Beta1 < 1 && k.Beta2 >= 0 && k.Beta2 < 1) {
		return fmt.Errorf("backend: %s: betas %v and %v, want [0, 1)", Name(k), k.Beta1, k.Beta2)
	}
	return checkSized(k, []int{k.N}, DTypeOf(k.W), "W", k.W, k.N, "G", k.G, k.N, "M", k.M, k.N, "V", k.V, k.N, Float64, "hyperparameters", k.Hyper, 2)
}

// Host steps with the moments in float64.
func (k AdamStep) Host(p *Pool) (Func, error) {
	return onFloats(p, k, adamHost[float32], adamHost[float64])
}

// Device launches on_adam.
func (k AdamStep) Device(p Planner) {
	elementwise(p, "on_adam", k.N,
		adamArgs{N: k.N, B1: k.Beta1, B2: k.Beta2, Eps: k.Eps, Decay: k.Decay, W: k.W, G: k.G, M: k.M, V: k.V, Hyper: k.Hyper})
}

func adamHost[T Float](p *Pool, k AdamStep) Func {
	w, g := hostData[T](k.W)[:k.N], hostData[T](k.G)[:k.N]
	m, v, hyper := hostData[T](k.M)[:k.N], hostData[T](k.V)[:k.N], hostData[float64](k.Hyper)[:2]
	s := p.split(k.N, 8, func(lo, hi int) {
		lr, t := hyper[0], hyper[1]
		c1, c2 := update.AdamCorrections(k.Beta1, k.Beta2, t)
		update.Decay(w[lo:hi], lr, k.Decay)
		update.Adam(w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], lr, k.Beta1, k.Beta2, k.Eps, c1, c2)
	})
	return s.loop()
}

// AddScaled is Dst = X + s Y for N elements, s = Alpha times the Float64
// element at Scale (Alpha alone when Scale has no buffer), s rounded to
// the elements' type first. Dst may be X or Y.
type AddScaled struct {
	N         int
	Alpha     float64
	X, Y, Dst Operand
	Scale     Operand
}

// Check checks the operands.
func (k AddScaled) Check() error {
	if err := checkAll(k, DTypeOf(k.Dst), "X", k.X, k.N, "Y", k.Y, k.N, "Dst", k.Dst, k.N); err != nil {
		return err
	}
	if k.Scale.Buf != nil {
		return CheckOperand("add-scaled scale", k.Scale, Float64, 1)
	}
	return nil
}

// Host adds in the elements' type.
func (k AddScaled) Host(p *Pool) (Func, error) {
	return onFloats(p, k, addScaledHost[float32], addScaledHost[float64])
}

// Device launches on_add_scaled.
func (k AddScaled) Device(p Planner) {
	elementwise(p, "on_add_scaled", k.N, addScaledArgs(k))
}

func addScaledHost[T Float](p *Pool, k AddScaled) Func {
	x, y, dst := hostData[T](k.X)[:k.N], hostData[T](k.Y)[:k.N], hostData[T](k.Dst)[:k.N]
	var scale []float64
	if k.Scale.Buf != nil {
		scale = hostData[float64](k.Scale)[:1]
	}
	var a T
	s := p.split(k.N, 1, func(lo, hi int) {
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

// SkewStep writes into Y (R x R, Float64) the point I - lr (B - B^T) / 2
// of RSDM's first inner step, from B = P G (PX)^T (R x R, float32 or
// float64) and the step size lr at LR (one Float64 element).
type SkewStep struct {
	R        int
	B, Y, LR Operand
}

// Check checks the operands.
func (k SkewStep) Check() error {
	if dt := DTypeOf(k.B); dt != Float32 && dt != Float64 {
		return fmt.Errorf("backend: skew-step: B of %v", dt)
	}
	return checkSized(k, []int{k.R}, 0, "B", k.B, k.R*k.R, Float64, "Y", k.Y, k.R*k.R, "step size", k.LR, 1)
}

// Host computes Y in float64.
func (k SkewStep) Host(p *Pool) (Func, error) {
	return onFloats(p, k, skewHost[float32], skewHost[float64])
}

// Device launches on_skew in B's type.
func (k SkewStep) Device(p Planner) {
	p.SetType(DTypeOf(k.B))
	elementwise(p, indexed(p, "on_skew", k.R*k.R), k.R*k.R, skewArgs{R: k.R, B: k.B, Y: k.Y, Lr: k.LR})
}

func skewHost[T Float](_ *Pool, k SkewStep) Func {
	r := k.R
	bm, y, lr := hostData[T](k.B)[:r*r], hostData[float64](k.Y)[:r*r], hostData[float64](k.LR)[:1]
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

// IdentityDelta writes Y - I, Y an R x R Float64 matrix, into Dst in
// Dst's type: RSDM's correction of the sampled rows.
type IdentityDelta struct {
	R      int
	Y, Dst Operand
}

// Check checks the operands.
func (k IdentityDelta) Check() error {
	if err := checkFloatDst(k, k.Dst); err != nil {
		return err
	}
	return checkSized(k, []int{k.R}, Float64, "Y", k.Y, k.R*k.R, DType(0), "destination", k.Dst, k.R*k.R)
}

// Host writes Dst in its type.
func (k IdentityDelta) Host(p *Pool) (Func, error) {
	if DTypeOf(k.Dst) == Float64 {
		return identityDeltaHost[float64](p, k), nil
	}
	return identityDeltaHost[float32](p, k), nil
}

// Device launches on_identity_delta in Dst's type.
func (k IdentityDelta) Device(p Planner) {
	p.SetType(DTypeOf(k.Dst))
	elementwise(p, indexed(p, "on_identity_delta", k.R*k.R), k.R*k.R, deltaArgs(k))
}

func identityDeltaHost[T Float](_ *Pool, k IdentityDelta) Func {
	r := k.R
	y, dst := hostData[float64](k.Y)[:r*r], hostData[T](k.Dst)[:r*r]
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

// Symmetrize replaces A, an N x N matrix, by (A + A^T) / 2.
type Symmetrize struct {
	N int
	A Operand
}

// Check checks the operand.
func (k Symmetrize) Check() error {
	return checkSized(k, []int{k.N}, 0, "A", k.A, k.N*k.N)
}

// Host averages each pair once.
func (k Symmetrize) Host(p *Pool) (Func, error) {
	return onFloats(p, k, symmetrizeHost[float32], symmetrizeHost[float64])
}

// Device launches on_symmetrize.
func (k Symmetrize) Device(p Planner) {
	elementwise(p, indexed(p, "on_symmetrize", k.N*k.N), k.N*k.N, symArgs(k))
}

func symmetrizeHost[T Float](_ *Pool, k Symmetrize) Func {
	n := k.N
	a := hostData[T](k.A)[:n*n]
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
