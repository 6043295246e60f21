package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/param"
)

// Conv2dConfig sizes a 2-D convolution over NCHW images: In input channels,
// Out output channels, square kernels of Kernel x Kernel taps, the same
// Stride and Pad (zeros) on both axes.
type Conv2dConfig struct {
	In, Out, Kernel int
	// Stride is 1 when 0.
	Stride int
	Pad    int
	// Bias adds a learnable bias per output channel.
	Bias bool
	// Orthogonal puts the kernel on the Stiefel manifold in its flattened
	// form (see Conv2d) with a Haar-random start; otherwise it starts as
	// PyTorch's nn.Conv2d does, uniform in +-1/sqrt(In Kernel^2).
	Orthogonal bool
}

// Conv2d is a convolution layer y = conv(x, W) + b. Its kernel W has shape
// (Out, In, Kernel, Kernel); an orthogonal layer's W is marked as a point of
// the Stiefel manifold (param.OnStiefel) in its flattened form, the
// Out x (In Kernel^2) matrix of its row-major layout (optim.Param.Matrix):
// orthonormal rows (each filter of unit norm, the filters orthogonal) when
// Out <= In Kernel^2, orthonormal columns otherwise. The optimizers step it
// as that matrix, with no copy.
type Conv2d struct {
	Cfg Conv2dConfig
	W   param.Param
	B   param.Param // B.Node is nil without bias; shape (1, Out, 1, 1)
}

// NewConv2d returns a convolution layer on g named name (its kernel
// name.W, its bias name.b).
func NewConv2d(g *G.ExprGraph, name string, cfg Conv2dConfig, dt tensor.Dtype, rng *rand.Rand) (*Conv2d, error) {
	if cfg.Stride == 0 {
		cfg.Stride = 1
	}
	if cfg.In < 1 || cfg.Out < 1 || cfg.Kernel < 1 || cfg.Stride < 1 || cfg.Pad < 0 {
		return nil, fmt.Errorf("nn: %s: convolution %+v: want positive channels, kernel and stride, and a padding >= 0", name, cfg)
	}
	shape := []int{cfg.Out, cfg.In, cfg.Kernel, cfg.Kernel}
	fan := cfg.In * cfg.Kernel * cfg.Kernel
	bound := 1 / math.Sqrt(float64(fan))
	init := func(int) float64 { return bound * (2*rng.Float64() - 1) }
	if cfg.Orthogonal {
		x, err := haar(cfg.Out, fan, rng)
		if err != nil {
			return nil, fmt.Errorf("nn: %s: %w", name, err)
		}
		init = func(i int) float64 { return x[i] }
	}
	w, err := NewTensor(g, name+".W", dt, shape, init)
	if err != nil {
		return nil, err
	}
	c := &Conv2d{Cfg: cfg, W: param.Plain(w)}
	if cfg.Orthogonal {
		c.W = param.OnStiefel(w)
	}
	if cfg.Bias {
		binit := func(int) float64 { return bound * (2*rng.Float64() - 1) }
		if cfg.Orthogonal {
			binit = func(int) float64 { return 0 }
		}
		b, err := NewTensor(g, name+".b", dt, []int{1, cfg.Out, 1, 1}, binit)
		if err != nil {
			return nil, err
		}
		c.B = param.Plain(b)
	}
	return c, nil
}

// haar returns a Haar-random rows x cols matrix, row-major, with
// orthonormal columns when rows >= cols and orthonormal rows otherwise.
func haar(rows, cols int, rng *rand.Rand) ([]float64, error) {
	n, p := max(rows, cols), min(rows, cols)
	st, err := manifold.NewStiefel[float64](n, p)
	if err != nil {
		return nil, err
	}
	x := make([]float64, n*p)
	if err := st.Random(x, rng); err != nil {
		return nil, err
	}
	if rows >= cols {
		return x, nil
	}
	t := make([]float64, len(x)) // the transpose of the n x p sample
	for i := 0; i < n; i++ {
		for j := 0; j < p; j++ {
			t[j*n+i] = x[i*p+j]
		}
	}
	return t, nil
}

// OutSize returns the height (or width) of the output for an input of size
// in.
func (c *Conv2d) OutSize(in int) int {
	return (in+2*c.Cfg.Pad-c.Cfg.Kernel)/c.Cfg.Stride + 1
}

// Forward returns conv(x, W) + b for x of shape (batch, In, height, width).
func (c *Conv2d) Forward(x *G.Node) (*G.Node, error) {
	name := c.W.Name()
	if s := x.Shape(); len(s) != 4 || s[1] != c.Cfg.In {
		return nil, fmt.Errorf("nn: %s: input of shape %v, want (batch, %d, height, width)", name, s, c.Cfg.In)
	}
	if s := x.Shape(); c.OutSize(s[2]) < 1 || c.OutSize(s[3]) < 1 {
		return nil, fmt.Errorf("nn: %s: a %d x %d input is smaller than the %d x %d kernel with padding %d", name, s[2], s[3], c.Cfg.Kernel, c.Cfg.Kernel, c.Cfg.Pad)
	}
	k, p, st := c.Cfg.Kernel, c.Cfg.Pad, c.Cfg.Stride
	y, err := G.Conv2d(x, c.W.Node, tensor.Shape{k, k}, []int{p, p}, []int{st, st}, []int{1, 1})
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", name, err)
	}
	if c.B.Node == nil {
		return y, nil
	}
	if y, err = G.BroadcastAdd(y, c.B.Node, nil, []byte{0, 2, 3}); err != nil {
		return nil, fmt.Errorf("nn: %s: bias: %w", name, err)
	}
	return y, nil
}

// Params returns the layer's parameters: W, then b if there is one.
func (c *Conv2d) Params() []param.Param {
	if c.B.Node == nil {
		return []param.Param{c.W}
	}
	return []param.Param{c.W, c.B}
}
