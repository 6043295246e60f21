package backend_test

import (
	"math"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/backendtest"
)

// TestNormChecks checks the operands of the batch norm, dropout and random
// kernels (exact, then each one short or of another type) and their
// refusals, each with an error that says what is wrong.
func TestNormChecks(t *testing.T) {
	f, d := backend.Float32, backend.Float64
	const b, c, s = 3, 4, 5
	n := b * c * s
	exact(t, "batch-norm", []backend.DType{f, f, f, f}, [][2]int{{0, n - 1}, {0, n - 1}, {0, c - 1}, {0, c - 1}},
		[]string{"batch-norm X", "batch-norm Y", "batch-norm Mean", "batch-norm Var"},
		func(o []backend.Operand) backend.Kernel {
			return backend.BatchNorm{Batch: b, C: c, Spatial: s, Momentum: 0.1, Eps: 1e-5, Training: true, X: o[0], Y: o[1], Mean: o[2], Var: o[3]}
		})
	exact(t, "batch-norm-grad", []backend.DType{f, f, f, f}, [][2]int{{0, n - 1}, {0, n - 1}, {0, c - 1}, {0, n - 1}},
		[]string{"batch-norm-grad X", "batch-norm-grad DY", "batch-norm-grad Var", "batch-norm-grad DX"},
		func(o []backend.Operand) backend.Kernel {
			return backend.BatchNormGrad{Batch: b, C: c, Spatial: s, Eps: 1e-5, X: o[0], DY: o[1], Var: o[2], DX: o[3]}
		})
	exact(t, "dropout", []backend.DType{f, f, d}, [][2]int{{0, n - 1}, {0, n - 1}, {0, 0}},
		[]string{"dropout X", "dropout Y", "dropout step"},
		func(o []backend.Operand) backend.Kernel {
			return backend.Dropout{N: n, P: 0.5, X: o[0], Y: o[1], Step: o[2]}
		})
	// Random's destination may be of either float type.
	for _, dt := range []backend.DType{f, d} {
		random := func(dst, step backend.Operand) backend.Kernel {
			return backend.Random{Dist: backend.DrawBinomial, N: n, A: 3, B: 0.5, Dst: dst, Step: step}
		}
		dst, step := backend.At(backendtest.Extent(dt, n+1), 1), backend.At(backendtest.Extent(d, 1), 0)
		if err := random(dst, step).Check(); err != nil {
			t.Errorf("random of %v with exact operands: %v", dt, err)
		}
		for _, c := range []struct {
			dst, step backend.Operand
			want      string
		}{
			{backend.At(dst.Buf, 2), step, "random destination"},
			{dst, backend.At(backendtest.Extent(d, 0), 0), "random step"},
			{dst, backend.At(backendtest.Extent(f, 1), 0), "random step: buffer of float32"},
		} {
			if err := random(c.dst, c.step).Check(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("random of %v: %v, want an error naming %q", dt, err, c.want)
			}
		}
	}
	x, ch, step := backend.At(backendtest.Extent(f, n), 0), backend.At(backendtest.Extent(f, c), 0), backend.At(backendtest.Extent(d, 1), 0)
	ints := backend.At(backendtest.Extent(backend.Int32, n), 0)
	for _, k := range []struct {
		k    backend.Kernel
		want string
	}{
		{backend.BatchNorm{Batch: 1, C: n, Spatial: 1, Training: true, X: x, Y: x, Mean: x, Var: x}, "1 value(s) per channel, training needs at least 2"},
		{backend.BatchNorm{Batch: 0, C: c, Spatial: s, X: x, Y: x, Mean: ch, Var: ch}, "sizes [0 4 5], want positive"},
		{backend.BatchNormGrad{Batch: b, C: c, Spatial: -1, X: x, DY: x, Var: ch, DX: x}, "want positive"},
		{backend.Dropout{N: n, P: 1, X: x, Y: x, Step: step}, "probability 1, want [0, 1)"},
		{backend.Dropout{N: n, P: math.NaN(), X: x, Y: x, Step: step}, "probability NaN"},
		{backend.Dropout{N: n, P: 0.1, X: ints, Y: ints, Step: step}, "destination of int32"},
		{backend.Random{Dist: 9, N: n, Dst: x, Step: step}, "unknown distribution 9"},
		{backend.Random{Dist: backend.DrawUniform, N: n, A: math.Inf(-1), B: 1, Dst: x, Step: step}, "want finite ones"},
		{backend.Random{Dist: backend.DrawBinomial, N: n, A: backend.MaxTrials + 1, B: 0.5, Dst: x, Step: step}, "binomial of 65537 trials"},
		{backend.Random{Dist: backend.DrawBinomial, N: n, A: 2.5, B: 0.5, Dst: x, Step: step}, "want a whole number"},
		{backend.Random{Dist: backend.DrawBinomial, N: n, A: 2, B: -0.1, Dst: x, Step: step}, "probability -0.1, want [0, 1]"},
		{backend.Random{Dist: backend.DrawGaussian, N: n, Dst: ints, Step: step}, "destination of int32"},
	} {
		if err := k.k.Check(); err == nil || !strings.Contains(err.Error(), k.want) {
			t.Errorf("%+v: %v, want an error saying %q", k.k, err, k.want)
		}
	}
}
