package cpu

import (
	"math"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/linalg"
)

// prepareFused prepares orthonet's fused layer kernels; ok is false for any
// other kernel.
func prepareFused[T Float](b *Backend, k backend.Kernel) (f backend.Func, ok bool, err error) {
	switch k := k.(type) {
	case backend.SoftmaxCrossEntropy:
		return prepareCE[T](k), true, nil
	case backend.SoftmaxCrossEntropyGrad:
		return prepareCEGrad[T](k), true, nil
	case backend.LayerNorm:
		return prepareLayerNorm[T](b, k), true, nil
	case backend.LayerNormGrad:
		return prepareLayerNormGrad[T](b, k), true, nil
	case backend.LayerNormParamGrad:
		return prepareLayerNormParamGrad[T](b, k), true, nil
	case backend.Attention:
		return prepareAttention[T](b, k), true, nil
	case backend.AttentionGrad:
		return prepareAttentionGrad[T](b, k), true, nil
	case backend.BiasAct:
		return prepareBiasAct[T](b, k), true, nil
	case backend.BiasActGrad:
		return prepareBiasActGrad[T](b, k), true, nil
	}
	return nil, false, nil
}

// geluC is sqrt(2/pi).
var geluC = math.Sqrt(2 / math.Pi)

// gelu is the tanh form of GELU (package fused defines the op).
func gelu(x float64) float64 { return 0.5 * x * (1 + math.Tanh(geluC*(x+0.044715*x*x*x))) }

// geluDeriv is its derivative.
func geluDeriv(x float64) float64 {
	t := math.Tanh(geluC * (x + 0.044715*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t*t)*geluC*(1+3*0.044715*x*x)
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

func prepareCE[T Float](k backend.SoftmaxCrossEntropy) backend.Func {
	n := k.Rows * k.Classes
	z, t, loss := Host[T](k.Z)[:n], Host[T](k.T)[:n], Host[T](k.Loss)[:1]
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

func prepareCEGrad[T Float](k backend.SoftmaxCrossEntropyGrad) backend.Func {
	n := k.Rows * k.Classes
	z, t, g, dz := Host[T](k.Z)[:n], Host[T](k.T)[:n], Host[T](k.G)[:1], Host[T](k.DZ)[:n]
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

func prepareLayerNorm[T Float](b *Backend, k backend.LayerNorm) backend.Func {
	d, n := k.D, k.Rows*k.D
	x, gamma, beta, y := Host[T](k.X)[:n], Host[T](k.Gamma)[:d], Host[T](k.Beta)[:d], Host[T](k.Y)[:n]
	s := b.split(k.Rows, 4*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
			mean, rstd := rowStats(xr, k.Eps)
			m, rs := T(mean), T(rstd)
			for j, v := range xr {
				yr[j] = (v-m)*rs*gamma[j] + beta[j]
			}
		}
	})
	return func() error { s.run(); return nil }
}

func prepareLayerNormGrad[T Float](b *Backend, k backend.LayerNormGrad) backend.Func {
	d, n := k.D, k.Rows*k.D
	x, gamma, dy, dx := Host[T](k.X)[:n], Host[T](k.Gamma)[:d], Host[T](k.DY)[:n], Host[T](k.DX)[:n]
	s := b.split(k.Rows, 8*d, func(lo, hi int) {
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
	return func() error { s.run(); return nil }
}

func prepareLayerNormParamGrad[T Float](b *Backend, k backend.LayerNormParamGrad) backend.Func {
	d, n := k.D, k.Rows*k.D
	x, dy, dp := Host[T](k.X)[:n], Host[T](k.DY)[:n], Host[T](k.DParams)[:2*d]
	stats := make([]float64, 2*k.Rows) // mean and rstd per row
	st := b.split(k.Rows, 3*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			stats[2*r], stats[2*r+1] = rowStats(x[r*d:(r+1)*d], k.Eps)
		}
	})
	acc := make([]float64, 2*d)
	cols := b.split(d, 4*k.Rows, func(lo, hi int) {
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

func newAttention[T Float](seqs, tokens, heads, d int, scale float64, q, k, v backend.Operand) *attention[T] {
	n := seqs * tokens * d
	return &attention[T]{seqs: seqs, t: tokens, h: heads, d: d, dh: d / heads, scale: T(scale),
		q: Host[T](q)[:n], k: Host[T](k)[:n], v: Host[T](v)[:n], p: make([]T, seqs*heads*tokens*tokens)}
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

// parallel runs the pairs split across the backend's threads, each product
// on one OpenBLAS thread: the per-head products are small (65 x 65 x 256 in
// the paper's ViT) and OpenBLAS's own threads share them badly.
func parallel(b *Backend, pairs, cost int, fn func(lo, hi int)) backend.Func {
	s := b.split(pairs, cost, fn)
	return func() error {
		if s.parts <= 1 {
			s.run()
			return nil
		}
		prev := linalg.SetBLASThreads(1)
		s.run()
		linalg.SetBLASThreads(prev)
		return nil
	}
}

func prepareAttention[T Float](b *Backend, k backend.Attention) backend.Func {
	a := newAttention[T](k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V)
	out := Host[T](k.Out)[:k.Seqs*k.Tokens*k.D]
	return parallel(b, a.seqs*a.h, 4*a.t*a.t*a.dh, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a.weights(i)
			o, w := a.block(i)
			linalg.Gemm(false, false, a.t, a.dh, a.t, 1, a.p[w:], a.t, a.v[o:], a.d, 0, out[o:], a.d)
		}
	})
}

func prepareAttentionGrad[T Float](b *Backend, k backend.AttentionGrad) backend.Func {
	a := newAttention[T](k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V)
	n := k.Seqs * k.Tokens * k.D
	dout := Host[T](k.DOut)[:n]
	dqkv := Host[T](k.DQKV)[:3*n]
	dq, dk, dv := dqkv[:n], dqkv[n:2*n], dqkv[2*n:]
	ds := make([]T, len(a.p))
	return parallel(b, a.seqs*a.h, 12*a.t*a.t*a.dh, func(lo, hi int) {
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
	})
}

func prepareBiasAct[T Float](b *Backend, k backend.BiasAct) backend.Func {
	n, w := k.Rows*k.N, k.N
	x, bias, y := Host[T](k.X)[:n], Host[T](k.Bias)[:w], Host[T](k.Y)[:n]
	cost := 1
	if k.Act == backend.ActGELU {
		cost = 16
	}
	s := b.split(k.Rows, cost*w, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*w:(r+1)*w], y[r*w:(r+1)*w]
			switch k.Act {
			case backend.ActReLU:
				for j, v := range xr {
					v += bias[j]
					if v < 0 { // NaN stays NaN
						v = 0
					}
					yr[j] = v
				}
			case backend.ActGELU:
				for j, v := range xr {
					yr[j] = T(gelu(float64(v + bias[j])))
				}
			default:
				for j, v := range xr {
					yr[j] = v + bias[j]
				}
			}
		}
	})
	return func() error { s.run(); return nil }
}

func prepareBiasActGrad[T Float](b *Backend, k backend.BiasActGrad) backend.Func {
	n, w := k.Rows*k.N, k.N
	x, bias, dy, dx := Host[T](k.X)[:n], Host[T](k.Bias)[:w], Host[T](k.DY)[:n], Host[T](k.DX)[:n]
	cost := 1
	if k.Act == backend.ActGELU {
		cost = 16
	}
	s := b.split(k.Rows, cost*w, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, dyr, dxr := x[r*w:(r+1)*w], dy[r*w:(r+1)*w], dx[r*w:(r+1)*w]
			switch k.Act {
			case backend.ActReLU:
				for j, v := range xr {
					if v+bias[j] > 0 {
						dxr[j] = dyr[j]
					} else {
						dxr[j] = 0
					}
				}
			case backend.ActGELU:
				for j, v := range xr {
					dxr[j] = T(float64(dyr[j]) * geluDeriv(float64(v+bias[j])))
				}
			default:
				copy(dxr, dyr)
			}
		}
	})
	return func() error { s.run(); return nil }
}
