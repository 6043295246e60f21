package backend

import "fmt"

// The kernels of orthonet's fused layers (package fused defines them as
// Gorgonia ops; its Do methods are the reference these kernels are tested
// against).
var (
	_ Kernel = SoftmaxCrossEntropy{}
	_ Kernel = SoftmaxCrossEntropyGrad{}
	_ Kernel = LayerNorm{}
	_ Kernel = LayerNormGrad{}
	_ Kernel = LayerNormParamGrad{}
	_ Kernel = Attention{}
	_ Kernel = AttentionGrad{}
	_ Kernel = BiasAct{}
	_ Kernel = BiasActGrad{}
)

// Activation is the nonlinearity of BiasAct.
type Activation uint8

// The activations.
const (
	ActIdentity Activation = iota
	ActReLU
	ActGELU // the tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
)

func checkAll(name string, dt DType, ops ...any) error {
	for i := 0; i+2 < len(ops); i += 3 {
		what, op, n := ops[i].(string), ops[i+1].(Operand), ops[i+2].(int)
		if err := CheckOperand(name+" "+what, op, dt, n); err != nil {
			return err
		}
	}
	return nil
}

func positive(name string, sizes ...int) error {
	for _, s := range sizes {
		if s < 1 {
			return fmt.Errorf("backend: %s: sizes %v, want positive", name, sizes)
		}
	}
	return nil
}

// SoftmaxCrossEntropy writes into Loss (one element) the mean over Rows of
// logsumexp(z_i) sum_j t_ij - sum_j t_ij z_ij, for logits Z and targets T
// of Rows x Classes, computed stably.
type SoftmaxCrossEntropy struct {
	Rows, Classes int
	Z, T, Loss    Operand
}

// Name returns "softmax-cross-entropy".
func (SoftmaxCrossEntropy) Name() string { return "softmax-cross-entropy" }

// Operands returns Z, T and Loss.
func (k SoftmaxCrossEntropy) Operands() []Operand { return []Operand{k.Z, k.T, k.Loss} }

// Check checks the operands.
func (k SoftmaxCrossEntropy) Check() error {
	if err := positive(k.Name(), k.Rows, k.Classes); err != nil {
		return err
	}
	n := k.Rows * k.Classes
	return checkAll(k.Name(), DTypeOf(k.Loss), "Z", k.Z, n, "T", k.T, n, "loss", k.Loss, 1)
}

// SoftmaxCrossEntropyGrad writes into DZ the gradient of
// SoftmaxCrossEntropy's loss with respect to Z, scaled by G (one element):
// G (softmax(z_i) sum_j t_ij - t_i) / Rows.
type SoftmaxCrossEntropyGrad struct {
	Rows, Classes int
	Z, T, G, DZ   Operand
}

// Name returns "softmax-cross-entropy-grad".
func (SoftmaxCrossEntropyGrad) Name() string { return "softmax-cross-entropy-grad" }

// Operands returns Z, T, G and DZ.
func (k SoftmaxCrossEntropyGrad) Operands() []Operand { return []Operand{k.Z, k.T, k.G, k.DZ} }

// Check checks the operands.
func (k SoftmaxCrossEntropyGrad) Check() error {
	if err := positive(k.Name(), k.Rows, k.Classes); err != nil {
		return err
	}
	n := k.Rows * k.Classes
	return checkAll(k.Name(), DTypeOf(k.DZ), "Z", k.Z, n, "T", k.T, n, "G", k.G, 1, "DZ", k.DZ, n)
}

// LayerNorm writes into Y, for each of the Rows rows of X (Rows x D), the
// row normalized to zero mean and unit (biased) variance, times Gamma plus
// Beta (both D elements): (x - mean) / sqrt(var + Eps) * gamma + beta.
type LayerNorm struct {
	Rows, D           int
	Eps               float64
	X, Gamma, Beta, Y Operand
}

// Name returns "layer-norm".
func (LayerNorm) Name() string { return "layer-norm" }

// Operands returns X, Gamma, Beta and Y.
func (k LayerNorm) Operands() []Operand { return []Operand{k.X, k.Gamma, k.Beta, k.Y} }

// Check checks the operands.
func (k LayerNorm) Check() error {
	if err := positive(k.Name(), k.Rows, k.D); err != nil {
		return err
	}
	n := k.Rows * k.D
	return checkAll(k.Name(), DTypeOf(k.Y), "X", k.X, n, "gamma", k.Gamma, k.D, "beta", k.Beta, k.D, "Y", k.Y, n)
}

// LayerNormGrad writes into DX the gradient of LayerNorm with respect to
// X, from X, Gamma and the gradient DY of Y: per row, with xhat the
// normalized row, rstd = 1/sqrt(var + Eps) and g = dy * gamma,
// rstd (g - mean(g) - xhat mean(g xhat)).
type LayerNormGrad struct {
	Rows, D          int
	Eps              float64
	X, Gamma, DY, DX Operand
}

// Name returns "layer-norm-grad".
func (LayerNormGrad) Name() string { return "layer-norm-grad" }

// Operands returns X, Gamma, DY and DX.
func (k LayerNormGrad) Operands() []Operand { return []Operand{k.X, k.Gamma, k.DY, k.DX} }

// Check checks the operands.
func (k LayerNormGrad) Check() error {
	if err := positive(k.Name(), k.Rows, k.D); err != nil {
		return err
	}
	n := k.Rows * k.D
	return checkAll(k.Name(), DTypeOf(k.DX), "X", k.X, n, "gamma", k.Gamma, k.D, "DY", k.DY, n, "DX", k.DX, n)
}

// LayerNormParamGrad writes into DParams (2 x D) the gradients of
// LayerNorm with respect to Gamma (row 0: the column sums of DY * xhat)
// and Beta (row 1: the column sums of DY).
type LayerNormParamGrad struct {
	Rows, D        int
	Eps            float64
	X, DY, DParams Operand
}

// Name returns "layer-norm-param-grad".
func (LayerNormParamGrad) Name() string { return "layer-norm-param-grad" }

// Operands returns X, DY and DParams.
func (k LayerNormParamGrad) Operands() []Operand { return []Operand{k.X, k.DY, k.DParams} }

// Check checks the operands.
func (k LayerNormParamGrad) Check() error {
	if err := positive(k.Name(), k.Rows, k.D); err != nil {
		return err
	}
	n := k.Rows * k.D
	return checkAll(k.Name(), DTypeOf(k.DParams), "X", k.X, n, "DY", k.DY, n, "DParams", k.DParams, 2*k.D)
}

// Attention is the core of multi-head self-attention over Seqs sequences
// of Tokens rows: Q, K, V and Out are (Seqs*Tokens) x D, head h occupying
// columns h*D/Heads to (h+1)*D/Heads. For every sequence and head it
// writes softmax(Q_h K_h^T Scale) V_h into the head's columns of Out (the
// softmax along rows, computed stably).
type Attention struct {
	Seqs, Tokens, Heads, D int
	Scale                  float64
	Q, K, V, Out           Operand
}

// Name returns "attention".
func (Attention) Name() string { return "attention" }

// Operands returns Q, K, V and Out.
func (k Attention) Operands() []Operand { return []Operand{k.Q, k.K, k.V, k.Out} }

// Check checks the sizes and operands.
func (k Attention) Check() error {
	if err := positive(k.Name(), k.Seqs, k.Tokens, k.Heads, k.D); err != nil {
		return err
	}
	if k.D%k.Heads != 0 {
		return fmt.Errorf("backend: attention: %d heads do not divide %d features", k.Heads, k.D)
	}
	n := k.Seqs * k.Tokens * k.D
	return checkAll(k.Name(), DTypeOf(k.Out), "Q", k.Q, n, "K", k.K, n, "V", k.V, n, "Out", k.Out, n)
}

// AttentionGrad writes into DQKV (3 x (Seqs*Tokens) x D) the gradients of
// Attention's Out with respect to Q, K and V, one above the other, from Q,
// K, V and the gradient DOut: per sequence and head, with P the softmax
// weights, dV = P^T dO, dS = P (dO V^T - rowsum(dO V^T P)),
// dQ = Scale dS K, dK = Scale dS^T Q.
type AttentionGrad struct {
	Seqs, Tokens, Heads, D int
	Scale                  float64
	Q, K, V, DOut, DQKV    Operand
}

// Name returns "attention-grad".
func (AttentionGrad) Name() string { return "attention-grad" }

// Operands returns Q, K, V, DOut and DQKV.
func (k AttentionGrad) Operands() []Operand { return []Operand{k.Q, k.K, k.V, k.DOut, k.DQKV} }

// Check checks the sizes and operands.
func (k AttentionGrad) Check() error {
	if err := positive(k.Name(), k.Seqs, k.Tokens, k.Heads, k.D); err != nil {
		return err
	}
	if k.D%k.Heads != 0 {
		return fmt.Errorf("backend: attention-grad: %d heads do not divide %d features", k.Heads, k.D)
	}
	n := k.Seqs * k.Tokens * k.D
	return checkAll(k.Name(), DTypeOf(k.DQKV), "Q", k.Q, n, "K", k.K, n, "V", k.V, n, "DOut", k.DOut, n, "DQKV", k.DQKV, 3*n)
}

// BiasAct writes into Y the activation Act of X (Rows x N) plus Bias (N
// elements) added to every row.
type BiasAct struct {
	Rows, N    int
	Act        Activation
	X, Bias, Y Operand
}

// Name returns "bias-act".
func (BiasAct) Name() string { return "bias-act" }

// Operands returns X, Bias and Y.
func (k BiasAct) Operands() []Operand { return []Operand{k.X, k.Bias, k.Y} }

// Check checks the operands.
func (k BiasAct) Check() error {
	if err := positive(k.Name(), k.Rows, k.N); err != nil {
		return err
	}
	if k.Act > ActGELU {
		return fmt.Errorf("backend: bias-act: unknown activation %d", k.Act)
	}
	n := k.Rows * k.N
	return checkAll(k.Name(), DTypeOf(k.Y), "X", k.X, n, "bias", k.Bias, k.N, "Y", k.Y, n)
}

// BiasActGrad writes into DX the gradient of BiasAct with respect to X:
// DY * Act'(X + Bias).
type BiasActGrad struct {
	Rows, N         int
	Act             Activation
	X, Bias, DY, DX Operand
}

// Name returns "bias-act-grad".
func (BiasActGrad) Name() string { return "bias-act-grad" }

// Operands returns X, Bias, DY and DX.
func (k BiasActGrad) Operands() []Operand { return []Operand{k.X, k.Bias, k.DY, k.DX} }

// Check checks the operands.
func (k BiasActGrad) Check() error {
	if err := positive(k.Name(), k.Rows, k.N); err != nil {
		return err
	}
	if k.Act > ActGELU {
		return fmt.Errorf("backend: bias-act-grad: unknown activation %d", k.Act)
	}
	n := k.Rows * k.N
	return checkAll(k.Name(), DTypeOf(k.DX), "X", k.X, n, "bias", k.Bias, k.N, "DY", k.DY, n, "DX", k.DX, n)
}
