package backend

import (
	"fmt"
	"math"
)

// The kernels that draw random numbers on the device from a counter-based
// generator (DropoutDraw's), keyed by a seed, a stream and a step that lives
// in a buffer: dropout masks, gorgonia's dropout and its random nodes.
// Every backend draws the same values bit for bit, and a run resumed at a
// step draws what the uninterrupted run drew, without any host state.
var _ = []defined{DropoutMask{}, Dropout{}, Random{}}

// DropoutMask fills Dst (N elements) with an inverted-dropout mask: each
// entry is 0 with probability P and 1/(1-P) otherwise. Entry i's draw is
// DropoutDraw(Seed, Stream, step, i), step being the Float64 element at
// Step (a whole number), so that every backend, and a run resumed at a
// step, draws the same mask, and no mask crosses to a device.
type DropoutMask struct {
	N            int
	P            float64
	Seed, Stream uint64
	Dst, Step    Operand
}

// Check checks P and the operands.
func (k DropoutMask) Check() error {
	if !(k.P >= 0 && k.P < 1) {
		return fmt.Errorf("backend: dropout-mask: probability %v, want [0, 1)", k.P)
	}
	return checkDraws(k, k.N, k.Dst, k.Step)
}

// Host draws every entry with DropoutDraw.
func (k DropoutMask) Host(p *Pool) (Func, error) {
	return onFloats(p, k, dropoutMaskHost[float32], dropoutMaskHost[float64])
}

// Device launches on_dropout_mask, which draws as DropoutDraw does.
func (k DropoutMask) Device(p Planner) {
	p.SetType(DTypeOf(k.Dst))
	elementwise(p, "on_dropout_mask", k.N, maskArgs{N: k.N, P: k.P, Seed: k.Seed, Stream: k.Stream, Step: k.Step, Dst: k.Dst})
}

func dropoutMaskHost[T Float](p *Pool, k DropoutMask) Func {
	dst, step := hostData[T](k.Dst)[:k.N], hostData[float64](k.Step)[:1]
	keep, t := T(1/(1-k.P)), keepThreshold(k.P)
	var key uint64
	s := p.split(k.N, 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dst[i] = keepBits(keep, unitBits(key, uint64(i)) >= t)
		}
	})
	return func() error {
		key = streamKey(k.Seed, k.Stream, uint64(step[0]))
		s.run()
		return nil
	}
}

// DropoutDraw returns the uniform draw in [0, 1) of entry i of mask stream
// stream at step step of a run seeded with seed: a counter-based generator
// (SplitMix64's finalizer over the four words), the same on every backend.
func DropoutDraw(seed, stream, step, i uint64) float64 {
	h := mix64(seed)
	h = mix64(h ^ stream)
	h = mix64(h ^ step)
	h = mix64(h ^ i)
	return float64(h>>11) * 0x1p-53
}

// mix64 is SplitMix64's step: the golden-ratio increment and its finalizer.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Dropout writes into Y the inverted dropout of X (gorgonia's dropoutOp in
// training, and its gradient from the gradient of its output): each element
// is kept with probability 1 - P and divided by 1 - P (in the element type,
// as gorgonia divides), the others are zero. Element i is kept where
// DropoutDraw(Seed, Stream, step, i) >= P, step being the Float64 element
// at Step (a whole number): a forward pass and its gradient that pass the
// same seed, stream and step drop the same elements, on every backend. X and
// Y may be the same elements.
type Dropout struct {
	N            int
	P            float64
	Seed, Stream uint64
	X, Y, Step   Operand
}

// Check checks P and the operands.
func (k Dropout) Check() error {
	if !(k.P >= 0 && k.P < 1) {
		return fmt.Errorf("backend: dropout: probability %v, want [0, 1)", k.P)
	}
	if err := checkFloatDst(k, k.Y); err != nil {
		return err
	}
	return checkAll(k, DTypeOf(k.Y), "X", k.X, k.N, "Y", k.Y, k.N, Float64, "step", k.Step, 1)
}

// Host draws every element's keep with DropoutDraw.
func (k Dropout) Host(p *Pool) (Func, error) {
	return onFloats(p, k, dropoutHost[float32], dropoutHost[float64])
}

// Device launches on_dropout, which draws as DropoutDraw does.
func (k Dropout) Device(p Planner) {
	elementwise(p, "on_dropout", k.N, dropArgs{N: k.N, P: k.P, Seed: k.Seed, Stream: k.Stream, Step: k.Step, X: k.X, Y: k.Y})
}

func dropoutHost[T Float](p *Pool, k Dropout) Func {
	x, y, step := hostData[T](k.X)[:k.N], hostData[T](k.Y)[:k.N], hostData[float64](k.Step)[:1]
	keep, t := T(1-k.P), keepThreshold(k.P)
	var key uint64
	s := p.split(k.N, 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			// Without a branch on the draw, which a CPU mispredicts a
			// fraction P of the time (half the loop's time).
			y[i] = keepBits(x[i]/keep, unitBits(key, uint64(i)) >= t)
		}
	})
	return func() error {
		key = streamKey(k.Seed, k.Stream, uint64(step[0]))
		s.run()
		return nil
	}
}

// RandomDist is a distribution Random draws from.
type RandomDist uint8

// The distributions, with the meaning of Random's A and B.
const (
	// DrawUniform draws from [A, B): A + (B - A) u, u uniform on [0, 1) in
	// steps of 2^-53.
	DrawUniform RandomDist = iota + 1
	// DrawGaussian draws from the normal distribution of mean A and
	// standard deviation B, by the Box-Muller transform of two uniform
	// draws.
	DrawGaussian
	// DrawBinomial draws the number of successes in A trials (a whole
	// number, at most MaxTrials) of probability B, each trial a uniform
	// draw of its own.
	DrawBinomial
)

// MaxTrials bounds a binomial draw's trials.
const MaxTrials = 1 << 16

// String returns the distribution's name.
func (d RandomDist) String() string {
	switch d {
	case DrawUniform:
		return "uniform"
	case DrawGaussian:
		return "gaussian"
	case DrawBinomial:
		return "binomial"
	}
	return fmt.Sprintf("RandomDist(%d)", int(d))
}

// Random fills Dst (N elements) with draws from Dist with parameters A and
// B (gorgonia's UniformRandomNode, GaussianRandomNode and
// BinomialRandomNode): element i is RandomDraw(Dist, A, B, Seed, Stream,
// step, i) in the element type, step being the Float64 element at Step (a
// whole number). Every backend draws the same bits: the draws use +, -, *,
// / and sqrt alone, which are correctly rounded everywhere (kernels.cu is
// compiled without fused multiply-adds).
type Random struct {
	Dist         RandomDist
	N            int
	A, B         float64
	Seed, Stream uint64
	Dst, Step    Operand
}

// Check checks the distribution's parameters and the operands.
func (k Random) Check() error {
	if math.IsInf(k.A, 0) || math.IsNaN(k.A) || math.IsInf(k.B, 0) || math.IsNaN(k.B) {
		return fmt.Errorf("backend: random: %v parameters %v and %v, want finite ones", k.Dist, k.A, k.B)
	}
	switch k.Dist {
	case DrawUniform, DrawGaussian:
	case DrawBinomial:
		if !(k.A >= 0 && k.A <= MaxTrials && k.A == math.Trunc(k.A)) {
			return fmt.Errorf("backend: random: binomial of %v trials, want a whole number from 0 to %d", k.A, MaxTrials)
		}
		if !(k.B >= 0 && k.B <= 1) {
			return fmt.Errorf("backend: random: binomial of probability %v, want [0, 1]", k.B)
		}
	default:
		return fmt.Errorf("backend: random: unknown distribution %d", k.Dist)
	}
	return checkDraws(k, k.N, k.Dst, k.Step)
}

// Host draws every element with RandomDraw.
func (k Random) Host(p *Pool) (Func, error) {
	return onFloats(p, k, randomHost[float32], randomHost[float64])
}

// Device launches on_random, which draws as RandomDraw does.
func (k Random) Device(p Planner) {
	p.SetType(DTypeOf(k.Dst))
	elementwise(p, "on_random", k.N,
		randomArgs{Dist: int(k.Dist), N: k.N, A: k.A, B: k.B, Seed: k.Seed, Stream: k.Stream, Step: k.Step, Dst: k.Dst})
}

func randomHost[T Float](p *Pool, k Random) Func {
	dst, step := hostData[T](k.Dst)[:k.N], hostData[float64](k.Step)[:1]
	var key uint64
	cost := 8
	if k.Dist == DrawBinomial {
		cost = max(cost, int(k.A))
	}
	s := p.split(k.N, cost, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dst[i] = T(drawFrom(k.Dist, k.A, k.B, key, uint64(i)))
		}
	})
	return func() error {
		key = streamKey(k.Seed, k.Stream, uint64(step[0]))
		s.run()
		return nil
	}
}

// RandomDraw returns element i of Random's draws from dist with parameters
// a and b, in stream stream at step step of a run seeded with seed, in
// float64 (a float32 buffer holds it rounded to nearest).
func RandomDraw(dist RandomDist, a, b float64, seed, stream, step, i uint64) float64 {
	return drawFrom(dist, a, b, streamKey(seed, stream, step), i)
}

// drawFrom is RandomDraw from the stream's key. Every product is converted
// explicitly so that the compiler fuses none into a multiply-add.
func drawFrom(dist RandomDist, a, b float64, key, i uint64) float64 {
	switch dist {
	case DrawUniform:
		return a + float64((b-a)*unitDraw(key, i))
	case DrawGaussian:
		u1 := 1 - unitDraw(key, 2*i) // in (0, 1]
		r := math.Sqrt(float64(-2 * lnUnit(u1)))
		return a + float64(b*float64(r*cos2pi(unitDraw(key, 2*i+1))))
	case DrawBinomial:
		n, hits := uint64(a), 0
		for j := range n {
			if unitDraw(key, i*n+j) < b {
				hits++
			}
		}
		return float64(hits)
	}
	return math.NaN()
}

// streamKey returns the generator's key for one stream at one step:
// DropoutDraw(seed, stream, step, i) is unitDraw(streamKey(seed, stream,
// step), i).
func streamKey(seed, stream, step uint64) uint64 { return mix64(mix64(mix64(seed)^stream) ^ step) }

// unitDraw returns draw i of a stream, uniform in [0, 1) in steps of 2^-53.
func unitDraw(key, i uint64) float64 { return float64(int64(unitBits(key, i))) * 0x1p-53 }

// unitBits returns draw i of a stream as the whole number of 2^-53 steps
// that unitDraw scales, below 2^53.
func unitBits(key, i uint64) uint64 { return mix64(key^i) >> 11 }

// keepThreshold returns the fewest 2^-53 steps of a draw that is at least
// p (p in [0, 1)): unitDraw(key, i) >= p exactly where unitBits(key, i) is
// at least that.
func keepThreshold(p float64) uint64 { return uint64(math.Ceil(p * 0x1p53)) }

// keepBits returns v where keep is set and +0 elsewhere, without a branch.
func keepBits[T Float](v T, keep bool) T {
	var m uint64
	if keep { // compiled to a conditional move
		m = ^uint64(0)
	}
	switch x := any(v).(type) {
	case float32:
		return T(math.Float32frombits(math.Float32bits(x) & uint32(m)))
	case float64:
		return T(math.Float64frombits(math.Float64bits(x) & m))
	}
	return v
}

// lnSeries are 1/(2k+1), k = 0..11: ln(m) = 2 s sum_k s^2k/(2k+1) with
// s = (m-1)/(m+1).
var lnSeries = [...]float64{0x1p+00, 0x1.5555555555555p-02, 0x1.999999999999ap-03, 0x1.2492492492492p-03,
	0x1.c71c71c71c71cp-04, 0x1.745d1745d1746p-04, 0x1.3b13b13b13b14p-04, 0x1.1111111111111p-04,
	0x1.e1e1e1e1e1e1ep-05, 0x1.af286bca1af28p-05, 0x1.8618618618618p-05, 0x1.642c8590b2164p-05}

// cosSeries are (-1)^k/(2k)! and sinSeries (-1)^k/(2k+1)!, k = 0..10, the
// Taylor coefficients of cos x and sin(x)/x in x^2.
var (
	cosSeries = [...]float64{0x1p+00, -0x1p-01, 0x1.5555555555555p-05, -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
		-0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-45,
		-0x1.6827863b97d97p-53, 0x1.e542ba4020225p-62}
	sinSeries = [...]float64{0x1p+00, -0x1.5555555555555p-03, 0x1.1111111111111p-07, -0x1.a01a01a01a01ap-13,
		0x1.71de3a556c734p-19, -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33, -0x1.ae7f3e733b81fp-41,
		0x1.952c77030ad4ap-49, -0x1.2f49b46814157p-57, 0x1.71b8ef6dcf572p-66}
)

// Constants of lnUnit and cos2pi: sqrt(2), ln 2 split in a part with
// trailing zeros (so that e ln2Hi is exact) and the rest (fdlibm's), 2 pi.
const (
	sqrt2  = 0x1.6a09e667f3bcdp+00
	ln2Hi  = 0x1.62e42feep-01
	ln2Lo  = 0x1.a39ef35793c76p-33
	twoPi  = 0x1.921fb54442d18p+02
	eighth = 0.125
)

// horner evaluates sum_k c[k] z^k.
func horner(c []float64, z float64) float64 {
	p := c[len(c)-1]
	for k := len(c) - 2; k >= 0; k-- {
		p = float64(p*z) + c[k]
	}
	return p
}

// lnUnit returns ln(u) for u in [2^-53, 1] (within a few ulp) from +, -, *
// and / alone, as kernels.cu's ln_unit does: u = m 2^e with m in
// [sqrt(1/2), sqrt(2)], ln(m) by its series in s = (m-1)/(m+1) (|s| <= 0.18,
// to s^23).
func lnUnit(u float64) float64 {
	bits := math.Float64bits(u)
	e := int64(bits>>52) - 1023
	m := math.Float64frombits(bits&(1<<52-1) | 1023<<52) // in [1, 2)
	if m > sqrt2 {
		m *= 0.5
		e++
	}
	s := (m - 1) / (m + 1)
	fe := float64(e)
	return float64(fe*ln2Hi) + (float64(fe*ln2Lo) + float64(float64(2*s)*horner(lnSeries[:], float64(s*s))))
}

// cos2pi returns cos(2 pi t) for t in [0, 1) (within a few ulp) from +, -,
// * and / alone, as kernels.cu's cos_2pi does: the symmetries of the
// cosine bring t exactly to a in [0, 1/8] (cos) or [0, 1/8] (sin of the
// complement), whose Taylor series to x^20 at x = 2 pi a are exact to
// rounding.
func cos2pi(t float64) float64 {
	a, sign := t, 1.0
	if a > 0.5 {
		a = 1 - a // exact: cos(2 pi t) = cos(2 pi (1 - t))
	}
	if a > 0.25 {
		a, sign = 0.5-a, -1 // cos(pi - x) = -cos x
	}
	if a > eighth {
		x := float64(twoPi * (0.25 - a)) // cos(pi/2 - x) = sin x
		return sign * float64(x*horner(sinSeries[:], float64(x*x)))
	}
	x := float64(twoPi * a)
	return sign * horner(cosSeries[:], float64(x*x))
}

// checkDraws checks the operands of k, a kernel that draws n values into
// dst: dst holds n float32 or float64 elements, step one float64.
func checkDraws(k Kernel, n int, dst, step Operand) error {
	if err := checkFloatDst(k, dst); err != nil {
		return err
	}
	return checkAll(k, 0, "destination", dst, n, Float64, "step", step, 1)
}
