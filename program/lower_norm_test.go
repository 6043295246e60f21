package program

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/testval"
)

// batchNormCase is a BatchNorm of x (leaf 0) with scale and shift (leaves 1
// and 2, broadcast over the axes of length 1), in training or, with the
// running statistics set to fixed values, in inference (EvalMode).
func batchNormCase(name string, shapes [][]int, training, noGrad bool) graphCase {
	return graphCase{name: name, shapes: shapes, noGrad: noGrad, evalMode: !training, build: func(l []*G.Node) (*G.Node, error) {
		y, _, _, op, err := G.BatchNorm(l[0], l[1], l[2], 0.3, 1e-3)
		if err != nil {
			return nil, err
		}
		return y, setStats(op, l[0].Dtype(), shapes[0][1])
	}}
}

// setStats gives op running statistics drawn from a fixed stream: means
// N(0, 1), variances in (0.5, 2).
func setStats(op *G.BatchNormOp, dt tensor.Dtype, ch int) error {
	rng := rand.New(rand.NewPCG(5, uint64(ch)))
	mean, vr := make([]float64, ch), make([]float64, ch)
	for i := range mean {
		mean[i], vr[i] = rng.NormFloat64(), 0.5+1.5*rng.Float64()
	}
	return op.SetStats(testval.Tensor(dt, []int{ch}, mean), testval.Tensor(dt, []int{ch}, vr))
}

func groupNormCase(name string, shape []int, groups int) graphCase {
	scale := make([]int, len(shape))
	for i := range scale {
		scale[i] = 1
	}
	scale[1] = shape[1]
	return graphCase{name: name, shapes: [][]int{shape, scale, scale}, build: func(l []*G.Node) (*G.Node, error) {
		return G.GroupNorm(l[0], l[1], l[2], groups, shape[1], 1e-4)
	}}
}

// TestNormLowerings compares the lowerings of gorgonia's BatchNorm,
// GroupNorm and (as the identity: in inference, or with p = 0) Dropout with
// the tape machine: values and gradients, in float64 and float32, on odd
// shapes, on every test backend (the CUDA host model among them where cgo
// is on). Where gorgonia's gradient op is wrong (see lower/norm.go) only
// the values are compared here; the gradients are checked by
// TestNormGradients.
func TestNormLowerings(t *testing.T) {
	dropout := func(p float64) func(l []*G.Node) (*G.Node, error) {
		return func(l []*G.Node) (*G.Node, error) { return G.Dropout(l[0], p) }
	}
	cases := []graphCase{
		batchNormCase("batchnorm-2d", [][]int{{7, 5}, {1, 5}, {1, 5}}, true, false),
		batchNormCase("batchnorm-3d", [][]int{{4, 3, 7}, {1, 3, 1}, {1, 3, 1}}, true, false),
		batchNormCase("batchnorm-4d", [][]int{{3, 4, 2, 5}, {1, 4, 1, 1}, {1, 4, 1, 1}}, true, false),
		batchNormCase("batchnorm-4d-full-scale", [][]int{{2, 3, 3, 3}, {2, 3, 3, 3}, {2, 3, 3, 3}}, true, false),
		batchNormCase("batchnorm-2d-inference", [][]int{{6, 5}, {1, 5}, {1, 5}}, false, false),
		batchNormCase("batchnorm-4d-inference", [][]int{{3, 4, 2, 5}, {1, 4, 1, 1}, {1, 4, 1, 1}}, false, true),
		groupNormCase("groupnorm-4d", []int{2, 6, 3, 5}, 3),
		groupNormCase("groupnorm-3d", []int{3, 4, 7}, 2),
		groupNormCase("groupnorm-2d", []int{5, 6}, 6),
		groupNormCase("groupnorm-one-group", []int{2, 3, 4, 4}, 1),
		{name: "dropout-p0", shapes: [][]int{{3, 5}}, build: dropout(0), noGrad: true},
		{name: "dropout-inference", shapes: [][]int{{4, 3, 2}}, build: dropout(0.3), noGrad: true, evalMode: true},
	}
	runCases(t, cases)
}
