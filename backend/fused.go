package backend

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
)

// The kernels of fused layers (package fused defines most of them as
// Gorgonia ops, whose Do runs the CPU implementation here) and of YOLOv3's
// decoding of a detection grid.
var _ = []defined{
	SoftmaxCrossEntropy{}, SoftmaxCrossEntropyGrad{}, LayerNorm{}, LayerNormGrad{}, LayerNormParamGrad{},
	Attention{}, AttentionGrad{}, BiasAct{}, BiasActGrad{}, YOLODecode{},
}

// Activation is the nonlinearity of BiasAct.
type Activation uint8

// The activations.
const (
	ActIdentity Activation = iota
	ActReLU
	ActGELU // the tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
)

// activations are the activations as the UnaryOps that compute them.
var activations = [...]UnaryOp{ActIdentity: Identity, ActReLU: ReLU, ActGELU: GELU}

// String returns the activation's name: that of its UnaryOp.
func (a Activation) String() string {
	if int(a) < len(activations) {
		return activations[a].String()
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// SoftmaxCrossEntropy writes into Loss (one element) the mean over Rows of
// logsumexp(z_i) sum_j t_ij - sum_j t_ij z_ij, for logits Z and targets T
// of Rows x Classes, computed stably.
type SoftmaxCrossEntropy struct {
	Rows, Classes int
	Z, T, Loss    Operand
}

// Check checks the operands.
func (k SoftmaxCrossEntropy) Check() error {
	n := k.Rows * k.Classes
	return checkSized(k, []int{k.Rows, k.Classes}, DTypeOf(k.Loss), "Z", k.Z, n, "T", k.T, n, "loss", k.Loss, 1)
}

// Host computes the loss row by row, in float64.
func (k SoftmaxCrossEntropy) Host(p *Pool) (Func, error) {
	return onFloats(p, k, ceHost[float32], ceHost[float64])
}

// Device takes a block per row (on_ce_rows), then one block adds the
// rows' losses in order (on_ce).
func (k SoftmaxCrossEntropy) Device(p Planner) {
	part := p.Scratch(Float64, k.Rows)
	p.Launch("on_ce_rows", k.Rows, ceRowsArgs{Rows: k.Rows, Classes: k.Classes, Z: k.Z, T: k.T, Part: part})
	p.Launch("on_ce", 1, ceArgs{Rows: k.Rows, Part: part, Loss: k.Loss})
}

// rowLSE returns the maximum and log-sum-exp of a row, in float64.
func rowLSE[T Float](z []T) (m, lse float64) {
	m = float64(z[0])
	for _, v := range z[1:] {
		m = max(m, float64(v))
	}
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v) - m)
	}
	return m, m + math.Log(s)
}

func ceHost[T Float](_ *Pool, k SoftmaxCrossEntropy) Func {
	n := k.Rows * k.Classes
	z, t, loss := hostData[T](k.Z)[:n], hostData[T](k.T)[:n], hostData[T](k.Loss)[:1]
	return func() error {
		var sum float64
		for i := 0; i < k.Rows; i++ {
			zi, ti := z[i*k.Classes:(i+1)*k.Classes], t[i*k.Classes:(i+1)*k.Classes]
			_, lse := rowLSE(zi)
			for j, v := range zi {
				sum += float64(ti[j]) * (lse - float64(v))
			}
		}
		loss[0] = T(sum / float64(k.Rows))
		return nil
	}
}

// SoftmaxCrossEntropyGrad writes into DZ the gradient of
// SoftmaxCrossEntropy's loss with respect to Z, scaled by G (one element):
// G (softmax(z_i) sum_j t_ij - t_i) / Rows.
type SoftmaxCrossEntropyGrad struct {
	Rows, Classes int
	Z, T, G, DZ   Operand
}

// Check checks the operands.
func (k SoftmaxCrossEntropyGrad) Check() error {
	n := k.Rows * k.Classes
	return checkSized(k, []int{k.Rows, k.Classes}, DTypeOf(k.DZ), "Z", k.Z, n, "T", k.T, n, "G", k.G, 1, "DZ", k.DZ, n)
}

// Host computes the gradient row by row.
func (k SoftmaxCrossEntropyGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, ceGradHost[float32], ceGradHost[float64])
}

// Device takes a block per row (on_ce_grad).
func (k SoftmaxCrossEntropyGrad) Device(p Planner) {
	p.Launch("on_ce_grad", k.Rows, ceGradArgs{Rows: k.Rows, Classes: k.Classes, Z: k.Z, T: k.T, G: k.G, Dz: k.DZ})
}

func ceGradHost[T Float](_ *Pool, k SoftmaxCrossEntropyGrad) Func {
	n := k.Rows * k.Classes
	z, t, g, dz := hostData[T](k.Z)[:n], hostData[T](k.T)[:n], hostData[T](k.G)[:1], hostData[T](k.DZ)[:n]
	return func() error {
		scale := float64(g[0]) / float64(k.Rows)
		for i := 0; i < k.Rows; i++ {
			lo, hi := i*k.Classes, (i+1)*k.Classes
			_, lse := rowLSE(z[lo:hi])
			var mass float64
			for _, v := range t[lo:hi] {
				mass += float64(v)
			}
			for j := lo; j < hi; j++ {
				dz[j] = T(scale * (math.Exp(float64(z[j])-lse)*mass - float64(t[j])))
			}
		}
		return nil
	}
}

// LayerNorm writes into Y, for each of the Rows rows of X (Rows x D), the
// row normalized to zero mean and unit (biased) variance, times Gamma plus
// Beta (both D elements): (x - mean) / sqrt(var + Eps) * gamma + beta.
type LayerNorm struct {
	Rows, D           int
	Eps               float64
	X, Gamma, Beta, Y Operand
}

// Check checks the operands.
func (k LayerNorm) Check() error {
	n := k.Rows * k.D
	return checkSized(k, []int{k.Rows, k.D}, DTypeOf(k.Y), "X", k.X, n, "gamma", k.Gamma, k.D, "beta", k.Beta, k.D, "Y", k.Y, n)
}

// Host normalizes row by row, the statistics in float64.
func (k LayerNorm) Host(p *Pool) (Func, error) {
	return onFloats(p, k, layerNormHost[float32], layerNormHost[float64])
}

// Device takes a block per row (on_layer_norm).
func (k LayerNorm) Device(p Planner) {
	p.Launch("on_layer_norm", k.Rows, lnArgs(k))
}

// rowStats returns the mean and 1/sqrt(var + eps) of a row, in float64.
func rowStats[T Float](x []T, eps float64) (mean, rstd float64) {
	mean = sum(x) / float64(len(x))
	var v0, v1 float64
	i := 0
	for ; i+2 <= len(x); i += 2 {
		a, b := float64(x[i])-mean, float64(x[i+1])-mean
		v0 += a * a
		v1 += b * b
	}
	for ; i < len(x); i++ {
		a := float64(x[i]) - mean
		v0 += a * a
	}
	return mean, 1 / math.Sqrt((v0+v1)/float64(len(x))+eps)
}

func layerNormHost[T Float](p *Pool, k LayerNorm) Func {
	d, n := k.D, k.Rows*k.D
	x, gamma, beta, y := hostData[T](k.X)[:n], hostData[T](k.Gamma)[:d], hostData[T](k.Beta)[:d], hostData[T](k.Y)[:n]
	s := p.split(k.Rows, 4*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
			mean, rstd := rowStats(xr, k.Eps)
			m, rs := T(mean), T(rstd)
			for j, v := range xr {
				yr[j] = (v-m)*rs*gamma[j] + beta[j]
			}
		}
	})
	return s.loop()
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

// Check checks the operands.
func (k LayerNormGrad) Check() error {
	n := k.Rows * k.D
	return checkSized(k, []int{k.Rows, k.D}, DTypeOf(k.DX), "X", k.X, n, "gamma", k.Gamma, k.D, "DY", k.DY, n, "DX", k.DX, n)
}

// Host computes the gradient row by row.
func (k LayerNormGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, layerNormGradHost[float32], layerNormGradHost[float64])
}

// Device takes a block per row (on_layer_norm_grad).
func (k LayerNormGrad) Device(p Planner) {
	p.Launch("on_layer_norm_grad", k.Rows, lnGradArgs{Rows: k.Rows, D: k.D, Eps: k.Eps, X: k.X, Gamma: k.Gamma, Dy: k.DY, Dx: k.DX})
}

func layerNormGradHost[T Float](p *Pool, k LayerNormGrad) Func {
	d, n := k.D, k.Rows*k.D
	x, gamma, dy, dx := hostData[T](k.X)[:n], hostData[T](k.Gamma)[:d], hostData[T](k.DY)[:n], hostData[T](k.DX)[:n]
	s := p.split(k.Rows, 8*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, dyr, dxr := x[r*d:(r+1)*d], dy[r*d:(r+1)*d], dx[r*d:(r+1)*d]
			mean, rstd := rowStats(xr, k.Eps)
			var mg, mgx float64
			for j, v := range xr {
				g := float64(dyr[j]) * float64(gamma[j])
				mg += g
				mgx += g * (float64(v) - mean) * rstd
			}
			mg /= float64(d)
			mgx /= float64(d)
			for j, v := range xr {
				g := float64(dyr[j]) * float64(gamma[j])
				dxr[j] = T(rstd * (g - mg - (float64(v)-mean)*rstd*mgx))
			}
		}
	})
	return s.loop()
}

// LayerNormParamGrad writes into DParams (2 x D) the gradients of
// LayerNorm with respect to Gamma (row 0: the column sums of DY * xhat)
// and Beta (row 1: the column sums of DY).
type LayerNormParamGrad struct {
	Rows, D        int
	Eps            float64
	X, DY, DParams Operand
}

// Check checks the operands.
func (k LayerNormParamGrad) Check() error {
	n := k.Rows * k.D
	return checkSized(k, []int{k.Rows, k.D}, DTypeOf(k.DParams), "X", k.X, n, "DY", k.DY, n, "DParams", k.DParams, 2*k.D)
}

// Host takes the rows' statistics, then the column sums in float64.
func (k LayerNormParamGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, layerNormParamGradHost[float32], layerNormParamGradHost[float64])
}

// Device takes the rows' statistics (on_layer_norm_stats), then a thread
// per column sums down the rows, in chunks of rows first where there are
// many rows and few columns.
func (k LayerNormParamGrad) Device(p Planner) {
	stats := p.Scratch(Float64, 2*k.Rows)
	p.Launch("on_layer_norm_stats", k.Rows, lnStatsArgs{Rows: k.Rows, D: k.D, Eps: k.Eps, X: k.X, Stats: stats})
	if k.D >= splitCols || k.Rows < 2*splitRows {
		elementwise(p, "on_layer_norm_param", k.D, lnParamArgs{Rows: k.Rows, D: k.D, X: k.X, Dy: k.DY, Stats: stats, Dp: k.DParams})
		return
	}
	chunks := chunksOf(k.Rows)
	part := p.Scratch(Float64, chunks*2*k.D)
	p.Launch("on_layer_norm_param_partial", chunks*((k.D+DeviceThreads-1)/DeviceThreads),
		lnPartArgs{Rows: k.Rows, D: k.D, Chunks: chunks, X: k.X, Dy: k.DY, Stats: stats, Part: part})
	elementwise(p, "on_sum_parts", 2*k.D, partsArgs{Cols: 2 * k.D, Chunks: chunks, Part: part, Dst: k.DParams})
}

func layerNormParamGradHost[T Float](p *Pool, k LayerNormParamGrad) Func {
	d, n := k.D, k.Rows*k.D
	x, dy, dp := hostData[T](k.X)[:n], hostData[T](k.DY)[:n], hostData[T](k.DParams)[:2*d]
	stats := make([]float64, 2*k.Rows) // mean and rstd per row
	st := p.split(k.Rows, 3*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			stats[2*r], stats[2*r+1] = rowStats(x[r*d:(r+1)*d], k.Eps)
		}
	})
	acc := make([]float64, 2*d)
	cols := p.split(d, 4*k.Rows, func(lo, hi int) {
		dg, db := acc[lo:hi], acc[d+lo:d+hi]
		clear(dg)
		clear(db)
		for r := 0; r < k.Rows; r++ {
			mean, rstd := stats[2*r], stats[2*r+1]
			xr, dyr := x[r*d+lo:r*d+hi], dy[r*d+lo:r*d+hi]
			for j, v := range dyr {
				g := float64(v)
				dg[j] += g * (float64(xr[j]) - mean) * rstd
				db[j] += g
			}
		}
		for j := range dg {
			dp[lo+j] = T(dg[j])
			dp[d+lo+j] = T(db[j])
		}
	})
	return func() error {
		st.run()
		cols.run()
		return nil
	}
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

// Check checks the sizes and operands.
func (k Attention) Check() error {
	n := k.Seqs * k.Tokens * k.D
	return checkHeads(k, k.Seqs, k.Tokens, k.Heads, k.D, DTypeOf(k.Out), "Q", k.Q, n, "K", k.K, n, "V", k.V, n, "Out", k.Out, n)
}

// checkHeads checks the sizes of Attention or AttentionGrad, then their
// operands as checkAll does.
func checkHeads(k Kernel, seqs, tokens, heads, d int, dt DType, ops ...any) error {
	if err := checkSized(k, []int{seqs, tokens, heads, d}, dt); err != nil {
		return err
	}
	if d%heads != 0 {
		return fmt.Errorf("backend: %s: %d heads do not divide %d features", Name(k), heads, d)
	}
	return checkAll(k, dt, ops...)
}

// Host computes each sequence's heads across the pool's threads.
func (k Attention) Host(p *Pool) (Func, error) {
	return onFloats(p, k, attentionHost[float32], attentionHost[float64])
}

// Device runs batched products per head and one softmax over all.
func (k Attention) Device(p Planner) {
	attentionDevice(p, k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V, k.Out, Operand{})
}

// softmaxRows replaces each row of m (rows of width w) by its softmax.
func softmaxRows[T Float](m []T, w int) {
	for lo := 0; lo+w <= len(m); lo += w {
		row := m[lo : lo+w]
		mx := row[0]
		for _, v := range row[1:] {
			if v > mx {
				mx = v
			}
		}
		var s float64
		for j, v := range row {
			e := math.Exp(float64(v - mx))
			row[j] = T(e)
			s += e
		}
		inv := T(1 / s)
		for j := range row {
			row[j] *= inv
		}
	}
}

// attention holds what the attention kernels share: the operands, and the
// softmax weights of every sequence and head.
type attention[T Float] struct {
	seqs, t, h, d, dh int
	scale             T
	q, k, v           []T
	p                 []T // seqs*h blocks of t x t weights
}

func newAttention[T Float](seqs, tokens, heads, d int, scale float64, q, k, v Operand) *attention[T] {
	n := seqs * tokens * d
	return &attention[T]{seqs: seqs, t: tokens, h: heads, d: d, dh: d / heads, scale: T(scale),
		q: hostData[T](q)[:n], k: hostData[T](k)[:n], v: hostData[T](v)[:n], p: make([]T, seqs*heads*tokens*tokens)}
}

// block returns the offset of pair i (sequence i / h, head i % h) in a
// (rows, d) matrix, and of its weights in p.
func (a *attention[T]) block(i int) (o, w int) {
	s, h := i/a.h, i%a.h
	return s*a.t*a.d + h*a.dh, i * a.t * a.t
}

// weights fills the softmax weights of pair i.
func (a *attention[T]) weights(i int) {
	o, w := a.block(i)
	linalg.Gemm(false, true, a.t, a.t, a.dh, a.scale, a.q[o:], a.d, a.k[o:], a.d, 0, a.p[w:], a.t)
	softmaxRows(a.p[w:w+a.t*a.t], a.t)
}

func attentionHost[T Float](p *Pool, k Attention) Func {
	a := newAttention[T](k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V)
	out := hostData[T](k.Out)[:k.Seqs*k.Tokens*k.D]
	return oneBLASThread(p.split(a.seqs*a.h, 4*a.t*a.t*a.dh, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a.weights(i)
			o, w := a.block(i)
			linalg.Gemm(false, false, a.t, a.dh, a.t, 1, a.p[w:], a.t, a.v[o:], a.d, 0, out[o:], a.d)
		}
	}))
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

// Check checks the sizes and operands.
func (k AttentionGrad) Check() error {
	n := k.Seqs * k.Tokens * k.D
	return checkHeads(k, k.Seqs, k.Tokens, k.Heads, k.D, DTypeOf(k.DQKV), "Q", k.Q, n, "K", k.K, n, "V", k.V, n, "DOut", k.DOut, n, "DQKV", k.DQKV, 3*n)
}

// Host computes each sequence's heads across the pool's threads.
func (k AttentionGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, attentionGradHost[float32], attentionGradHost[float64])
}

// Device runs batched products per head and the softmax's gradient over
// all.
func (k AttentionGrad) Device(p Planner) {
	attentionDevice(p, k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V, k.DQKV, k.DOut)
}

func attentionGradHost[T Float](p *Pool, k AttentionGrad) Func {
	a := newAttention[T](k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V)
	n := k.Seqs * k.Tokens * k.D
	dout := hostData[T](k.DOut)[:n]
	dqkv := hostData[T](k.DQKV)[:3*n]
	dq, dk, dv := dqkv[:n], dqkv[n:2*n], dqkv[2*n:]
	ds := make([]T, len(a.p))
	return oneBLASThread(p.split(a.seqs*a.h, 12*a.t*a.t*a.dh, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a.weights(i)
			o, w := a.block(i)
			p, d := a.p[w:w+a.t*a.t], ds[w:w+a.t*a.t]
			// dV = P^T dO, dP = dO V^T.
			linalg.Gemm(true, false, a.t, a.dh, a.t, 1, p, a.t, dout[o:], a.d, 0, dv[o:], a.d)
			linalg.Gemm(false, true, a.t, a.t, a.dh, 1, dout[o:], a.d, a.v[o:], a.d, 0, d, a.t)
			// dS = P (dP - rowsum(dP P)), row by row.
			for r := 0; r < a.t; r++ {
				pr, dr := p[r*a.t:(r+1)*a.t], d[r*a.t:(r+1)*a.t]
				var dot float64
				for j, pv := range pr {
					dot += float64(dr[j]) * float64(pv)
				}
				for j, pv := range pr {
					dr[j] = T(float64(pv) * (float64(dr[j]) - dot))
				}
			}
			// dQ = Scale dS K, dK = Scale dS^T Q.
			linalg.Gemm(false, false, a.t, a.dh, a.t, a.scale, d, a.t, a.k[o:], a.d, 0, dq[o:], a.d)
			linalg.Gemm(true, false, a.t, a.dh, a.t, a.scale, d, a.t, a.q[o:], a.d, 0, dk[o:], a.d)
		}
	}))
}

// attentionDevice plans Attention (dout has no buffer) or AttentionGrad,
// out being Out or DQKV: per head, the weights of every sequence by one
// batched product, a softmax over all of them, then the products of the
// layer or of its gradient.
func attentionDevice(p Planner, seqs, t, heads, d int, scale float64, q, k, v, out, dout Operand) {
	dh, n := d/heads, seqs*t*d
	dt := DTypeOf(q)
	qa, ka, va, oa := p.Addr(q), p.Addr(k), p.Addr(v), p.Addr(out)
	es := uint64(dt.Size())
	head := func(base uint64, h int) uint64 { return base + uint64(h*dh)*es }
	blocks := seqs * t * t // one head's weights: seqs blocks of t x t
	pw := p.Scratch(dt, heads*blocks)
	pb := func(h int) uint64 { return pw + uint64(h*blocks)*es }
	// product adds the batch over sequences of C = alpha op(A) op(B), each
	// operand with its leading dimension and its stride between sequences.
	product := func(ta, tb bool, m, n, kk int, alpha float64, a uint64, lda, sa int, b uint64, ldb, sb int, c uint64, ldc, sc int) {
		p.Gemm(DeviceGemm{TransA: ta, TransB: tb, M: m, N: n, K: kk, Alpha: alpha, A: a, B: b, C: c,
			LDA: lda, LDB: ldb, LDC: ldc, StrideA: sa, StrideB: sb, StrideC: sc, Batch: seqs})
	}
	for h := range heads {
		product(false, true, t, t, dh, scale, head(qa, h), d, t*d, head(ka, h), d, t*d, pb(h), t, t*t)
	}
	alongAxis(p, "on_softmax", heads*blocks/t, 1, softmaxArgs{Outer: heads * blocks / t, Axis: t, Inner: 1, Src: pw, Dst: pw})
	if dout.Buf == nil {
		for h := range heads {
			product(false, false, t, dh, t, 1, pb(h), t, t*t, head(va, h), d, t*d, head(oa, h), d, t*d)
		}
		return
	}
	doa := p.Addr(dout)
	dq, dk, dv := oa, oa+uint64(n)*es, oa+uint64(2*n)*es
	dpw := p.Scratch(dt, heads*blocks)
	dpb := func(h int) uint64 { return dpw + uint64(h*blocks)*es }
	for h := range heads {
		// dV = P^T dO, dP = dO V^T
		product(true, false, t, dh, t, 1, pb(h), t, t*t, head(doa, h), d, t*d, head(dv, h), d, t*d)
		product(false, true, t, t, dh, 1, head(doa, h), d, t*d, head(va, h), d, t*d, dpb(h), t, t*t)
	}
	// dS = P (dP - rowsum(dP P)), in place of dP
	alongAxis(p, "on_softmax_grad", heads*blocks/t, 1, softmaxGradArgs{Outer: heads * blocks / t, Axis: t, Inner: 1, Y: pw, Dy: dpw, Dx: dpw})
	for h := range heads {
		// dQ = scale dS K, dK = scale dS^T Q
		product(false, false, t, dh, t, scale, dpb(h), t, t*t, head(ka, h), d, t*d, head(dq, h), d, t*d)
		product(true, false, t, dh, t, scale, dpb(h), t, t*t, head(qa, h), d, t*d, head(dk, h), d, t*d)
	}
}

// BiasAct writes into Y the activation Act of X (Rows x N) plus Bias (N
// elements) added to every row.
type BiasAct struct {
	Rows, N    int
	Act        Activation
	X, Bias, Y Operand
}

// Check checks the operands.
func (k BiasAct) Check() error {
	return checkBiasAct(k, k.Act, k.Rows, k.N, DTypeOf(k.Y), k.X, k.Bias, "Y", k.Y)
}

// Host adds and applies the activation row by row.
func (k BiasAct) Host(p *Pool) (Func, error) {
	return onFloats(p, k, biasActHost[float32], biasActHost[float64])
}

// Device launches on_bias_act.
func (k BiasAct) Device(p Planner) {
	biasActDevice(p, biasActArgs{Rows: k.Rows, N: k.N, Act: int(k.Act), Grad: false, X: k.X, Bias: k.Bias, Dy: k.X, Out: k.Y})
}

// checkBiasAct checks a BiasAct or BiasActGrad k: its activation, x
// (rows x n), the bias (n) and the rows x n operands of named (name,
// operand, ...), all of type dt.
func checkBiasAct(k Kernel, act Activation, rows, n int, dt DType, x, bias Operand, named ...any) error {
	if act > ActGELU {
		return fmt.Errorf("backend: %s: unknown activation %d", Name(k), act)
	}
	ops := []any{"X", x, rows * n, "bias", bias, n}
	for i := 0; i+1 < len(named); i += 2 {
		ops = append(ops, named[i], named[i+1], rows*n)
	}
	return checkSized(k, []int{rows, n}, dt, ops...)
}

// biasActDevice launches on_bias_act, a thread per element.
func biasActDevice(p Planner, a biasActArgs) {
	elementwise(p, indexed(p, "on_bias_act", a.Rows*a.N), a.Rows*a.N, a)
}

// actCost is the cost of an activation relative to an addition, for
// splitting loops.
func actCost(act Activation) int {
	if act == ActGELU {
		return 16
	}
	return 1
}

func biasActHost[T Float](p *Pool, k BiasAct) Func {
	n, w := k.Rows*k.N, k.N
	x, bias, y := hostData[T](k.X)[:n], hostData[T](k.Bias)[:w], hostData[T](k.Y)[:n]
	f := in[func(T) T](unaries[activations[k.Act]])
	return p.split(k.Rows, actCost(k.Act)*w, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*w:(r+1)*w], y[r*w:(r+1)*w]
			for j, v := range xr {
				yr[j] = f(v + bias[j])
			}
		}
	}).loop()
}

// BiasActGrad writes into DX the gradient of BiasAct with respect to X:
// DY * Act'(X + Bias).
type BiasActGrad struct {
	Rows, N         int
	Act             Activation
	X, Bias, DY, DX Operand
}

// Check checks the operands.
func (k BiasActGrad) Check() error {
	return checkBiasAct(k, k.Act, k.Rows, k.N, DTypeOf(k.DX), k.X, k.Bias, "DY", k.DY, "DX", k.DX)
}

// Host computes the gradient row by row.
func (k BiasActGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, biasActGradHost[float32], biasActGradHost[float64])
}

// Device launches on_bias_act with its gradient flag.
func (k BiasActGrad) Device(p Planner) {
	biasActDevice(p, biasActArgs{Rows: k.Rows, N: k.N, Act: int(k.Act), Grad: true, X: k.X, Bias: k.Bias, Dy: k.DY, Out: k.DX})
}

func biasActGradHost[T Float](p *Pool, k BiasActGrad) Func {
	n, w := k.Rows*k.N, k.N
	x, bias, dy, dx := hostData[T](k.X)[:n], hostData[T](k.Bias)[:w], hostData[T](k.DY)[:n], hostData[T](k.DX)[:n]
	s := p.split(k.Rows, actCost(k.Act)*w, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, dyr, dxr := x[r*w:(r+1)*w], dy[r*w:(r+1)*w], dx[r*w:(r+1)*w]
			switch k.Act {
			case ActReLU:
				for j, v := range xr {
					if v+bias[j] > 0 {
						dxr[j] = dyr[j]
					} else {
						dxr[j] = 0
					}
				}
			case ActGELU:
				for j, v := range xr {
					dxr[j] = T(float64(dyr[j]) * geluDeriv(float64(v+bias[j])))
				}
			default:
				copy(dxr, dyr)
			}
		}
	})
	return s.loop()
}

// YOLODecode decodes YOLOv3's detection grid, as gorgonia's YOLOv3 does
// outside training: Src is (Batch, Boxes*Attrs, Grid, Grid) (Attrs = 5 +
// classes per box), Dst is (Batch, Grid*Grid*Boxes, Attrs), row (cell, box)
// of image b holding box b's attributes at cell (x, y) = (cell % Grid,
// cell / Grid): x and y become (sigmoid(v) + x or y) * Stride, the width
// and height exp(v) * Anchors[2 box] (or [2 box + 1]) * Stride, the
// objectness and the class scores sigmoid(v). Anchors holds each box's
// anchor divided by Stride, in the data's type.
type YOLODecode struct {
	Batch, Boxes, Attrs, Grid int
	Stride                    float64
	Anchors, Src, Dst         Operand
}

// Check checks the operands.
func (k YOLODecode) Check() error {
	if k.Attrs < 5 {
		return fmt.Errorf("backend: yolo-decode: %d attributes per box, want at least 5", k.Attrs)
	}
	n := k.Batch * k.Boxes * k.Attrs * k.Grid * k.Grid
	return checkSized(k, []int{k.Batch, k.Boxes, k.Grid}, DTypeOf(k.Dst), "anchors", k.Anchors, 2*k.Boxes,
		"source", k.Src, n, "destination", k.Dst, n)
}

// Host decodes row by row of the destination.
func (k YOLODecode) Host(p *Pool) (Func, error) {
	return onFloats(p, k, yoloHost[float32], yoloHost[float64])
}

// Device launches on_yolo, a thread per element.
func (k YOLODecode) Device(p Planner) {
	elementwise(p, "on_yolo", k.Batch*k.Grid*k.Grid*k.Boxes*k.Attrs,
		yoloArgs(k))
}

func yoloHost[T Float](p *Pool, k YOLODecode) Func {
	cells := k.Grid * k.Grid
	n := k.Batch * k.Boxes * k.Attrs * cells
	anchors, src, dst := hostData[T](k.Anchors)[:2*k.Boxes], hostData[T](k.Src)[:n], hostData[T](k.Dst)[:n]
	stride := T(k.Stride)
	return p.split(k.Batch*cells*k.Boxes, 4*k.Attrs, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			box, cell, b := row%k.Boxes, (row/k.Boxes)%cells, row/(k.Boxes*cells)
			in := src[(b*k.Boxes+box)*k.Attrs*cells+cell:]
			out := dst[row*k.Attrs : (row+1)*k.Attrs]
			for a := range out {
				v := in[a*cells]
				switch a {
				case 0:
					out[a] = (T(sigmoid(float64(v))) + T(cell%k.Grid)) * stride
				case 1:
					out[a] = (T(sigmoid(float64(v))) + T(cell/k.Grid)) * stride
				case 2, 3:
					out[a] = T(math.Exp(float64(v))) * anchors[2*box+a-2] * stride
				default:
					out[a] = T(sigmoid(float64(v)))
				}
			}
		}
	}).loop()
}
