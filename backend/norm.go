package backend

import (
	"fmt"
	"math"
)

// The kernels of batch normalization (gorgonia's BatchNormOp and its
// gradient), each with its CPU implementation beside its CUDA launches.
// Group normalization needs no kernel of its own: a group of a sample is a
// row of consecutive values, which LayerNorm normalizes.
var _ = []defined{BatchNorm{}, BatchNormGrad{}}

// BatchNorm writes into Y the values of X, a row-major (Batch, C, Spatial)
// array, normalized per channel c over its Batch x Spatial values, as
// gorgonia's BatchNormOp does (without its scale and shift, which are ops
// of their own). In training, with the batch's mean and biased variance,
// y = (x - mean) / sqrt(var + Eps), after which the running statistics Mean
// and Var (C values each) move towards the batch's:
// Mean = Momentum mean + (1 - Momentum) Mean, Var likewise with the
// unbiased variance. In inference, with Mean and Var, which it only reads.
type BatchNorm struct {
	Batch, C, Spatial int
	Momentum, Eps     float64
	Training          bool
	X, Y, Mean, Var   Operand
}

// Check checks the sizes and the operands: training needs two values per
// channel (the unbiased variance divides by their number less one).
func (k BatchNorm) Check() error {
	if k.Training && k.Batch*k.Spatial < 2 {
		return fmt.Errorf("backend: batch-norm: %d value(s) per channel, training needs at least 2", k.Batch*k.Spatial)
	}
	n := k.Batch * k.C * k.Spatial
	return checkSized(k, []int{k.Batch, k.C, k.Spatial}, DTypeOf(k.Y), "X", k.X, n, "Y", k.Y, n, "Mean", k.Mean, k.C, "Var", k.Var, k.C)
}

// Host takes each channel's statistics (in float64, the channels split
// across the pool's threads), then normalizes row by row.
func (k BatchNorm) Host(p *Pool) (Func, error) {
	return onFloats(p, k, batchNormHost[float32], batchNormHost[float64])
}

// normStats adds the launches that write a batch normalization's
// statistics per channel into scratch memory, whose address it returns: in
// training the batch's (on_batch_norm_stats, s), else from the running
// ones (on_batch_norm_running, r).
func normStats(p Planner, training bool, s bnStatsArgs, r bnRunArgs) uint64 {
	st := p.Scratch(Float64, 4*s.C)
	s.St, r.St = st, st
	if training {
		p.Launch("on_batch_norm_stats", s.C, s)
	} else {
		elementwise(p, "on_batch_norm_running", r.C, r)
	}
	return st
}

// Device takes a block per channel for the statistics (on_batch_norm_stats,
// which also moves the running ones) or reads the running ones
// (on_batch_norm_running), then normalizes elementwise
// (on_batch_norm_apply).
func (k BatchNorm) Device(p Planner) {
	st := normStats(p, k.Training,
		bnStatsArgs{Batch: k.Batch, C: k.C, Spatial: k.Spatial, Update: true, Momentum: k.Momentum, Eps: k.Eps, X: k.X, Mean: k.Mean, Var: k.Var},
		bnRunArgs{C: k.C, Eps: k.Eps, Mean: k.Mean, Var: k.Var})
	n := k.Batch * k.C * k.Spatial
	elementwise(p, "on_batch_norm_apply", n, bnApplyArgs{N: n, C: k.C, Spatial: k.Spatial, X: k.X, St: st, Y: k.Y})
}

func batchNormHost[T Float](p *Pool, k BatchNorm) Func {
	n := k.Batch * k.C * k.Spatial
	x, y := hostData[T](k.X)[:n], hostData[T](k.Y)[:n]
	mean, vr := hostData[T](k.Mean)[:k.C], hostData[T](k.Var)[:k.C]
	st := make([]float64, 4*k.C)
	stats := p.split(k.C, 3*k.Batch*k.Spatial, func(lo, hi int) {
		if !k.Training {
			for c := lo; c < hi; c++ {
				st[4*c], st[4*c+1] = float64(mean[c]), 1/math.Sqrt(float64(vr[c])+k.Eps)
			}
			return
		}
		channelStats(k.Batch, k.C, k.Spatial, k.Eps, x, nil, st, lo, hi)
		m, count := k.Momentum, float64(k.Batch*k.Spatial)
		for c := lo; c < hi; c++ {
			mean[c] = T(m*st[4*c] + (1-m)*float64(mean[c]))
			vr[c] = T(m*(st[4*c+2]/(count-1)) + (1-m)*float64(vr[c]))
		}
	})
	apply := p.split(k.Batch*k.C, k.Spatial, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c := r % k.C
			m, rs := T(st[4*c]), T(st[4*c+1])
			yr := y[r*k.Spatial : (r+1)*k.Spatial]
			for j, v := range x[r*k.Spatial : (r+1)*k.Spatial] {
				yr[j] = (v - m) * rs
			}
		}
	})
	return func() error {
		stats.run()
		apply.run()
		return nil
	}
}

// channelStats writes, for the channels c in [lo, hi) of the (batch, ch,
// spatial) array x, into st[4c:4c+4] the mean, 1/sqrt(var + eps) with the
// biased variance, and the sum of squared deviations; with dy, the last two
// are instead the sums of dy and of (x - mean) dy. Each channel's sums run
// in one order whatever lo and hi are, so that a result does not depend on
// how the channels are split across threads.
func channelStats[T Float](batch, ch, spatial int, eps float64, x, dy []T, st []float64, lo, hi int) {
	for c := lo; c < hi; c++ {
		st[4*c], st[4*c+2], st[4*c+3] = 0, 0, 0
	}
	for b := 0; b < batch; b++ {
		for c := lo; c < hi; c++ {
			off := (b*ch + c) * spatial
			st[4*c] += sum(x[off : off+spatial])
		}
	}
	count := float64(batch * spatial)
	for c := lo; c < hi; c++ {
		st[4*c] /= count
	}
	for b := 0; b < batch; b++ {
		for c := lo; c < hi; c++ {
			off, m := (b*ch+c)*spatial, st[4*c]
			var s float64
			for _, v := range x[off : off+spatial] {
				d := float64(v) - m
				s += d * d
			}
			st[4*c+2] += s
		}
	}
	for c := lo; c < hi; c++ {
		st[4*c+1] = 1 / math.Sqrt(st[4*c+2]/count+eps)
	}
	if dy == nil {
		return
	}
	for c := lo; c < hi; c++ {
		st[4*c+2] = 0
	}
	for b := 0; b < batch; b++ {
		for c := lo; c < hi; c++ {
			off, m := (b*ch+c)*spatial, st[4*c]
			var g, gd float64
			for j, v := range x[off : off+spatial] {
				d := float64(dy[off+j])
				g += d
				gd += (float64(v) - m) * d
			}
			st[4*c+2] += g
			st[4*c+3] += gd
		}
	}
}

// BatchNormGrad writes into DX the gradient of BatchNorm's Y with respect to
// X, from X and the gradient DY of Y. In training, per channel, with the
// batch's statistics (taken again from X), xhat = (x - mean) rstd,
// rstd = 1/sqrt(var + Eps) and n = Batch Spatial values:
// dx = rstd (dy - sum(dy)/n - xhat sum(dy xhat)/n). In inference,
// dx = dy / sqrt(Var + Eps).
type BatchNormGrad struct {
	Batch, C, Spatial int
	Eps               float64
	Training          bool
	X, DY, Var, DX    Operand
}

// Check checks the sizes and the operands.
func (k BatchNormGrad) Check() error {
	n := k.Batch * k.C * k.Spatial
	return checkSized(k, []int{k.Batch, k.C, k.Spatial}, DTypeOf(k.DX), "X", k.X, n, "DY", k.DY, n, "Var", k.Var, k.C, "DX", k.DX, n)
}

// Host takes each channel's statistics and sums (in float64, the channels
// split across the pool's threads), then the gradient row by row.
func (k BatchNormGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, batchNormGradHost[float32], batchNormGradHost[float64])
}

// Device takes a block per channel for the statistics and sums
// (on_batch_norm_stats) or reads the running variance
// (on_batch_norm_running), then the gradient elementwise
// (on_batch_norm_grad_apply).
func (k BatchNormGrad) Device(p Planner) {
	st := normStats(p, k.Training, bnStatsArgs{Batch: k.Batch, C: k.C, Spatial: k.Spatial, Eps: k.Eps, X: k.X, Dy: k.DY},
		bnRunArgs{C: k.C, Eps: k.Eps, Var: k.Var})
	n := k.Batch * k.C * k.Spatial
	elementwise(p, "on_batch_norm_grad_apply", n,
		bnGradArgs{N: n, C: k.C, Spatial: k.Spatial, Training: k.Training, X: k.X, Dy: k.DY, St: st, Dx: k.DX})
}

func batchNormGradHost[T Float](p *Pool, k BatchNormGrad) Func {
	n := k.Batch * k.C * k.Spatial
	x, dy, dx := hostData[T](k.X)[:n], hostData[T](k.DY)[:n], hostData[T](k.DX)[:n]
	vr := hostData[T](k.Var)[:k.C]
	st := make([]float64, 4*k.C)
	count := float64(k.Batch * k.Spatial)
	stats := p.split(k.C, 4*k.Batch*k.Spatial, func(lo, hi int) {
		if k.Training {
			channelStats(k.Batch, k.C, k.Spatial, k.Eps, x, dy, st, lo, hi)
			return
		}
		for c := lo; c < hi; c++ {
			st[4*c+1] = 1 / math.Sqrt(float64(vr[c])+k.Eps)
		}
	})
	apply := p.split(k.Batch*k.C, 2*k.Spatial, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c := r % k.C
			rs := T(st[4*c+1])
			xr, dyr, dxr := x[r*k.Spatial:(r+1)*k.Spatial], dy[r*k.Spatial:(r+1)*k.Spatial], dx[r*k.Spatial:(r+1)*k.Spatial]
			if !k.Training {
				for j, g := range dyr {
					dxr[j] = g * rs
				}
				continue
			}
			m, gm := T(st[4*c]), T(st[4*c+2]/count)
			kk := T(st[4*c+3] * st[4*c+1] * st[4*c+1] / count)
			for j, g := range dyr {
				dxr[j] = (g - gm - (xr[j]-m)*kk) * rs
			}
		}
	})
	return func() error {
		stats.run()
		apply.run()
		return nil
	}
}
