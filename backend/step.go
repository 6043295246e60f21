package backend

import "fmt"

// The kernels of optimizer steps on a device (optim.DeviceSolver): step
// sizes come from Float64 operands that the host writes before each step,
// so that a prepared step serves every step size a schedule gives.
var (
	_ Kernel = SGDStep{}
	_ Kernel = AdamStep{}
	_ Kernel = AddScaled{}
	_ Kernel = SkewStep{}
	_ Kernel = IdentityDelta{}
	_ Kernel = Symmetrize{}
	_ Kernel = DropoutMask{}
)

// SGDStep is a step of SGD on N elements of W from its gradient G, with
// the step size lr at LR (one Float64 element): with Decay > 0, first
// W = (1 - lr Decay) W; then with Momentum, Mom = Momentum Mom + G and
// W -= lr Mom, else W -= lr G. Arithmetic is in W's type.
type SGDStep struct {
	N               int
	Momentum, Decay float64
	W, G, Mom, LR   Operand
}

// Name returns "sgd-step".
func (SGDStep) Name() string { return "sgd-step" }

// Operands returns W, G, Mom and LR.
func (k SGDStep) Operands() []Operand { return []Operand{k.W, k.G, k.Mom, k.LR} }

// Check checks the operands; Mom may have no buffer when Momentum is 0.
func (k SGDStep) Check() error {
	if k.N < 1 {
		return fmt.Errorf("backend: sgd-step: %d elements", k.N)
	}
	dt := DTypeOf(k.W)
	if err := checkAll(k.Name(), dt, "W", k.W, k.N, "G", k.G, k.N); err != nil {
		return err
	}
	if k.Momentum != 0 {
		if err := CheckOperand("sgd-step momentum", k.Mom, dt, k.N); err != nil {
			return err
		}
	}
	return CheckOperand("sgd-step step size", k.LR, Float64, 1)
}

// AdamStep is a step of Adam on N elements of W from its gradient G, with
// the moments M and V (W's type) and Hyper (three Float64 elements: the
// step size lr and the bias corrections c1 = 1 - Beta1^t, c2 = 1 - Beta2^t):
// with Decay > 0 first W = (1 - lr Decay) W (AdamW); then, in float64,
// m = Beta1 m + (1 - Beta1) g, v = Beta2 v + (1 - Beta2) g^2 and
// W -= lr (m / c1) / (sqrt(v / c2) + Eps).
type AdamStep struct {
	N                        int
	Beta1, Beta2, Eps, Decay float64
	W, G, M, V, Hyper        Operand
}

// Name returns "adam-step".
func (AdamStep) Name() string { return "adam-step" }

// Operands returns W, G, M, V and Hyper.
func (k AdamStep) Operands() []Operand { return []Operand{k.W, k.G, k.M, k.V, k.Hyper} }

// Check checks the operands.
func (k AdamStep) Check() error {
	if k.N < 1 {
		return fmt.Errorf("backend: adam-step: %d elements", k.N)
	}
	if err := checkAll(k.Name(), DTypeOf(k.W), "W", k.W, k.N, "G", k.G, k.N, "M", k.M, k.N, "V", k.V, k.N); err != nil {
		return err
	}
	return CheckOperand("adam-step hyperparameters", k.Hyper, Float64, 3)
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

// Name returns "add-scaled".
func (AddScaled) Name() string { return "add-scaled" }

// Operands returns X, Y, Dst and Scale.
func (k AddScaled) Operands() []Operand { return []Operand{k.X, k.Y, k.Dst, k.Scale} }

// Check checks the operands.
func (k AddScaled) Check() error {
	if err := checkAll(k.Name(), DTypeOf(k.Dst), "X", k.X, k.N, "Y", k.Y, k.N, "Dst", k.Dst, k.N); err != nil {
		return err
	}
	if k.Scale.Buf != nil {
		return CheckOperand("add-scaled scale", k.Scale, Float64, 1)
	}
	return nil
}

// SkewStep writes into Y (R x R, Float64) the point I - lr (B - B^T) / 2
// of RSDM's first inner step, from B = P G (PX)^T (R x R, float32 or
// float64) and the step size lr at LR (one Float64 element).
type SkewStep struct {
	R        int
	B, Y, LR Operand
}

// Name returns "skew-step".
func (SkewStep) Name() string { return "skew-step" }

// Operands returns B, Y and LR.
func (k SkewStep) Operands() []Operand { return []Operand{k.B, k.Y, k.LR} }

// Check checks the operands.
func (k SkewStep) Check() error {
	if k.R < 1 {
		return fmt.Errorf("backend: skew-step: r = %d", k.R)
	}
	if dt := DTypeOf(k.B); dt != Float32 && dt != Float64 {
		return fmt.Errorf("backend: skew-step: B of %v", dt)
	}
	if err := CheckOperand("skew-step B", k.B, 0, k.R*k.R); err != nil {
		return err
	}
	if err := CheckOperand("skew-step Y", k.Y, Float64, k.R*k.R); err != nil {
		return err
	}
	return CheckOperand("skew-step step size", k.LR, Float64, 1)
}

// IdentityDelta writes Y - I, Y an R x R Float64 matrix, into Dst in
// Dst's type: RSDM's correction of the sampled rows.
type IdentityDelta struct {
	R      int
	Y, Dst Operand
}

// Name returns "identity-delta".
func (IdentityDelta) Name() string { return "identity-delta" }

// Operands returns Y and Dst.
func (k IdentityDelta) Operands() []Operand { return []Operand{k.Y, k.Dst} }

// Check checks the operands.
func (k IdentityDelta) Check() error {
	if k.R < 1 {
		return fmt.Errorf("backend: identity-delta: r = %d", k.R)
	}
	if err := CheckOperand("identity-delta Y", k.Y, Float64, k.R*k.R); err != nil {
		return err
	}
	if dt := DTypeOf(k.Dst); dt != Float32 && dt != Float64 {
		return fmt.Errorf("backend: identity-delta: destination of %v", dt)
	}
	return CheckOperand("identity-delta destination", k.Dst, 0, k.R*k.R)
}

// Symmetrize replaces A, an N x N matrix, by (A + A^T) / 2.
type Symmetrize struct {
	N int
	A Operand
}

// Name returns "symmetrize".
func (Symmetrize) Name() string { return "symmetrize" }

// Operands returns A.
func (k Symmetrize) Operands() []Operand { return []Operand{k.A} }

// Check checks the operand.
func (k Symmetrize) Check() error {
	if k.N < 1 {
		return fmt.Errorf("backend: symmetrize: %d x %d", k.N, k.N)
	}
	return CheckOperand("symmetrize", k.A, 0, k.N*k.N)
}

// DropoutMask fills Dst (N elements) with an inverted-dropout mask: each
// entry is 0 with probability P and 1/(1-P) otherwise. Entry i's draw is
// DropoutDraw(Seed, Stream, step, i), step being the Float64 element at
// Step (a whole number), so that every backend, and a run resumed at a
// step, draws the same mask, and no mask crosses to a device.
type DropoutMask struct {
	N            int
	P            float64
	Seed, Stream uint64
	Step, Dst    Operand
}

// Name returns "dropout-mask".
func (DropoutMask) Name() string { return "dropout-mask" }

// Operands returns Dst and Step.
func (k DropoutMask) Operands() []Operand { return []Operand{k.Dst, k.Step} }

// Check checks P and the operands.
func (k DropoutMask) Check() error {
	if !(k.P >= 0 && k.P < 1) {
		return fmt.Errorf("backend: dropout-mask: probability %v, want [0, 1)", k.P)
	}
	if dt := DTypeOf(k.Dst); dt != Float32 && dt != Float64 {
		return fmt.Errorf("backend: dropout-mask: destination of %v", dt)
	}
	if err := CheckOperand("dropout-mask destination", k.Dst, 0, k.N); err != nil {
		return err
	}
	return CheckOperand("dropout-mask step", k.Step, Float64, 1)
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
