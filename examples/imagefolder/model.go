// Command imagefolder trains a small convolutional network of one's own,
// written in plain Gorgonia, on a folder of images, its dense hidden
// weight on the Stiefel manifold.
package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/param"
)

// Sizes of the network's layers.
const (
	filters = 8  // channels of the convolution
	hidden  = 64 // width of the dense hidden layer, the Stiefel weight's columns
)

// buildModel builds on g, in float32, a classifier of batch images of c
// channels of h x w pixels into classes: a 3 x 3 convolution of 8 filters,
// ReLU, 2 x 2 max pooling, a dense layer of 64 units and ReLU, and a dense
// layer to the logits. x is the (batch, c*h*w) input, each row an image in
// channel-major order; y the (batch, classes) one-hot labels; loss the mean
// cross-entropy. The dense hidden weight w1 is on the Stiefel manifold
// (Haar-random: the sign-fixed QR of a Gaussian matrix), the other
// weights Glorot-normal and the biases zero, all drawn from rng.
// gorgonia.Grad is not called.
func buildModel(g *G.ExprGraph, batch, c, h, w, classes int, rng *rand.Rand) (loss, logits, x, y *G.Node, params []param.Param, err error) {
	if batch < 1 || c < 1 || h < 2 || w < 2 || classes < 2 {
		return nil, nil, nil, nil, nil, fmt.Errorf("imagefolder: batch %d of %d x %d x %d images into %d classes: want positive sizes, images of 2 x 2 pixels or more and 2 classes or more",
			batch, c, h, w, classes)
	}
	defer func() { // G.Must's panics, from shapes that do not fit, as errors
		if r := recover(); r != nil {
			loss, logits, x, y, params, err = nil, nil, nil, nil, nil, fmt.Errorf("imagefolder: building the model: %v", r)
		}
	}()
	f32 := tensor.Float32
	x = G.NewMatrix(g, f32, G.WithShape(batch, c*h*w), G.WithName("x"), G.WithInit(G.Zeroes()))
	y = G.NewMatrix(g, f32, G.WithShape(batch, classes), G.WithName("y"), G.WithInit(G.Zeroes()))
	flat := filters * (h / 2) * (w / 2)
	conv := G.NewTensor(g, f32, 4, G.WithShape(filters, c, 3, 3), G.WithName("conv"), G.WithInit(glorotN(rng)))
	w1 := G.NewMatrix(g, f32, G.WithShape(flat, hidden), G.WithName("w1"), G.WithInit(glorotN(rng)))
	b1 := G.NewMatrix(g, f32, G.WithShape(1, hidden), G.WithName("b1"), G.WithInit(G.Zeroes()))
	w2 := G.NewMatrix(g, f32, G.WithShape(hidden, classes), G.WithName("w2"), G.WithInit(glorotN(rng)))
	b2 := G.NewMatrix(g, f32, G.WithShape(1, classes), G.WithName("b2"), G.WithInit(G.Zeroes()))
	stiefel := param.OnStiefel(w1)
	if err := stiefel.Orthonormalize(); err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("imagefolder: %w", err)
	}
	params = []param.Param{param.Plain(conv), stiefel, param.Plain(b1), param.Plain(w2), param.Plain(b2)}

	im := G.Must(G.Reshape(x, tensor.Shape{batch, c, h, w}))
	a := G.Must(G.Rectify(G.Must(G.Conv2d(im, conv, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))))
	a = G.Must(G.MaxPool2D(a, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	a = G.Must(G.Reshape(a, tensor.Shape{batch, flat}))
	a = G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(a, w1)), b1, nil, []byte{0}))))
	logits = G.Must(G.BroadcastAdd(G.Must(G.Mul(a, w2)), b2, nil, []byte{0}))
	logp := G.Must(G.LogSoftMax(logits))
	loss = G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(logp, y)), 1))))))
	return loss, logits, x, y, params, nil
}

// glorotN returns Gorgonia's GlorotN(1) initialisation drawn from rng
// instead of Gorgonia's global source, so that a seed gives the same
// weights: Gaussian with standard deviation sqrt(2 / (fanIn + fanOut)),
// where fanIn + fanOut is (in + out) of an (in, out) matrix and
// (in + out) kh kw of an (out, in, kh, kw) filter.
func glorotN(rng *rand.Rand) G.InitWFn {
	return func(_ tensor.Dtype, s ...int) any {
		fans := s[0] + s[1]
		for _, d := range s[2:] {
			fans *= d
		}
		std := math.Sqrt(2 / float64(fans))
		v := make([]float32, tensor.Shape(s).TotalSize())
		for i := range v {
			v[i] = float32(std * rng.NormFloat64())
		}
		return v
	}
}
