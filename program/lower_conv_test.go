package program

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
	"github.com/orthonet/orthonet/internal/gradcheck"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/param"
)

// conv2d is gorgonia.Conv2d, returning also the im2col node it builds, so
// that a test can give it another user.
func conv2d(x, w *G.Node, kernel tensor.Shape, pad, stride, dil []int) (y, im *G.Node, err error) {
	if y, err = G.Conv2d(x, w, kernel, pad, stride, dil); err != nil {
		return nil, nil, err
	}
	for _, n := range x.Graph().AllNodes() {
		from := x.Graph().From(n.ID())
		if n.Op() != nil && gorgoniaop.OpName(n.Op()) == gorgoniaop.Im2colOp && from.Next() && from.Node().(*G.Node) == x {
			im = n
		}
	}
	if im == nil {
		return nil, nil, errors.New("no im2col node after gorgonia.Conv2d")
	}
	return y, im, nil
}

// convCase is a gorgonia.Conv2d of images of shape x by a filter of shape
// w, both parameters unless images is constant.
func convCase(name string, x, w []int, pad, stride, dil []int, constantImages bool) graphCase {
	return graphCase{name: name, shapes: [][]int{x, w}, constant: []bool{constantImages, false},
		build: two(func(x, w *G.Node) (*G.Node, error) {
			ws := w.Shape()
			return G.Conv2d(x, w, tensor.Shape{ws[2], ws[3]}, pad, stride, dil)
		})}
}

// TestConvLowerings compares gorgonia's convolutions and poolings, compiled,
// with the tape machine: values and gradients, float64 and float32, on one
// thread and three and on the CUDA host model, with asymmetric kernels,
// paddings, strides and dilations, one channel and several, one image and
// several; fused (gorgonia.Conv2d's pattern) and unfused (its im2col used
// elsewhere too).
func TestConvLowerings(t *testing.T) {
	im2col := func(kernel tensor.Shape, pad, stride, dil []int) func([]*G.Node) (*G.Node, error) {
		return one(func(x *G.Node) (*G.Node, error) { return G.Im2Col(x, kernel, pad, stride, dil) })
	}
	pool := func(f func(*G.Node) (*G.Node, error)) func([]*G.Node) (*G.Node, error) { return one(f) }
	cases := []graphCase{
		// gorgonia's im2col alone (the general path), and its gradient col2im.
		{name: "im2col", shapes: [][]int{{2, 3, 5, 6}}, build: im2col(tensor.Shape{3, 2}, []int{1, 0}, []int{1, 2}, []int{1, 1})},
		{name: "im2col-dilated", shapes: [][]int{{1, 2, 7, 5}}, build: im2col(tensor.Shape{2, 3}, []int{2, 1}, []int{2, 1}, []int{3, 2})},
		{name: "im2col-1x1", shapes: [][]int{{3, 1, 4, 4}}, build: im2col(tensor.Shape{1, 1}, []int{0, 0}, []int{3, 2}, []int{1, 1})},
		// gorgonia.Conv2d, fused.
		convCase("conv", []int{2, 3, 5, 6}, []int{4, 3, 3, 2}, []int{1, 0}, []int{1, 2}, []int{1, 1}, false),
		convCase("conv-one-channel", []int{3, 1, 7, 5}, []int{2, 1, 2, 3}, []int{0, 2}, []int{2, 1}, []int{1, 1}, false),
		convCase("conv-dilated", []int{1, 2, 8, 7}, []int{3, 2, 3, 2}, []int{2, 1}, []int{1, 2}, []int{2, 3}, false),
		convCase("conv-same", []int{2, 3, 6, 6}, []int{5, 3, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}, false),
		convCase("conv-wide", []int{3, 2, 17, 16}, []int{4, 2, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}, false),
		// Taps further from the window's edge than the image is wide.
		convCase("conv-far-taps", []int{2, 2, 3, 3}, []int{2, 2, 1, 2}, []int{0, 10}, []int{1, 1}, []int{1, 20}, false),
		convCase("conv-input-constant", []int{3, 2, 5, 4}, []int{3, 2, 2, 2}, []int{1, 1}, []int{2, 2}, []int{1, 1}, true),
		{name: "conv1d", shapes: [][]int{{2, 3, 1, 9}, {4, 3, 1, 3}}, build: two(func(x, w *G.Node) (*G.Node, error) { return G.Conv1d(x, w, 3, 1, 2, 1) })},
		{name: "conv1d-dilated", shapes: [][]int{{1, 2, 1, 11}, {2, 2, 1, 2}}, build: two(func(x, w *G.Node) (*G.Node, error) { return G.Conv1d(x, w, 2, 0, 1, 4) })},
		// The same pattern with its im2col used elsewhere: the general path.
		{name: "conv-im2col-shared", shapes: [][]int{{2, 3, 5, 6}, {4, 3, 3, 2}}, build: two(func(x, w *G.Node) (*G.Node, error) {
			y, im, err := conv2d(x, w, tensor.Shape{3, 2}, []int{1, 0}, []int{1, 2}, []int{1, 1})
			if err != nil {
				return nil, err
			}
			// (Not Square(im): the tape machine's gradient of w is then
			// wrong, 1.84 by finite differences and compiled, -0.0027 on
			// the tape machine: its Square overwrites the im2col that the
			// backward's product still reads.)
			return G.Mul(y, G.Must(G.Mean(im)))
		})},
		// Two convolutions, ReLU and max pooling, a dense layer: a small
		// convnet as gorgonia's examples build one.
		{name: "convnet", shapes: [][]int{{2, 1, 7, 6}, {3, 1, 3, 3}, {4, 3, 2, 2}, {16, 5}}, build: func(l []*G.Node) (*G.Node, error) {
			c0 := G.Must(G.Conv2d(l[0], l[1], tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
			p0 := G.Must(G.MaxPool2D(G.Must(G.Rectify(c0)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			c1 := G.Must(G.Conv2d(p0, l[2], tensor.Shape{2, 2}, []int{0, 0}, []int{1, 1}, []int{1, 1}))
			a1 := G.Must(G.Rectify(c1))
			s := a1.Shape()
			return G.Mul(G.Must(G.Reshape(a1, tensor.Shape{s[0], s[1] * s[2] * s[3]})), l[3])
		}},
		// Max pooling after gorgonia.Rectify (fused): 2 x 2 tiles with an
		// odd side left out, overlapping padded windows, and the rectified
		// values used elsewhere too (the general path).
		{name: "relu-maxpool", shapes: [][]int{{2, 3, 6, 5}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(G.Must(G.Rectify(x)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
		})},
		{name: "relu-maxpool-overlap", shapes: [][]int{{2, 2, 5, 6}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(G.Must(G.Rectify(x)), tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2})
		})},
		{name: "relu-maxpool-shared", shapes: [][]int{{2, 2, 4, 4}}, build: pool(func(x *G.Node) (*G.Node, error) {
			r := G.Must(G.Rectify(x))
			p := G.Must(G.MaxPool2D(r, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			return G.Mul(p, G.Must(G.Mean(r)))
		})},
		// Max pooling: overlapping windows, paddings (symmetric and, with
		// four, gorgonia's asymmetric reading of them), one dimension.
		{name: "maxpool", shapes: [][]int{{2, 3, 5, 7}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(x, tensor.Shape{2, 3}, []int{1, 1}, []int{1, 2})
		})},
		{name: "maxpool-2x2", shapes: [][]int{{3, 2, 6, 5}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
		})},
		{name: "maxpool-four-pads", shapes: [][]int{{1, 2, 6, 5}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(x, tensor.Shape{3, 2}, []int{2, 1, 0, 1}, []int{2, 1})
		})},
		{name: "maxpool1d", shapes: [][]int{{2, 3, 1, 8}}, build: pool(func(x *G.Node) (*G.Node, error) { return G.MaxPool1D(x, 3, 1, 2) })},
		// Ties: every value twice in a window; the gradient goes to the
		// first, as gorgonia's.
		{name: "maxpool-ties", shapes: [][]int{{2, 2, 3, 3}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.MaxPool2D(G.Must(G.Concat(3, x, x)), tensor.Shape{2, 4}, []int{0, 0}, []int{1, 1})
		})},
		// Average pooling, gorgonia's (divided by the input's width, with
		// its own backward), and AveragePool1D (gorgonia's is a max pooling).
		{name: "avgpool", shapes: [][]int{{2, 3, 5, 7}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.AveragePool2D(x, tensor.Shape{2, 3}, []int{1, 1}, []int{2, 1})
		})},
		{name: "avgpool-2x2", shapes: [][]int{{1, 2, 4, 6}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.AveragePool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
		})},
		{name: "avgpool-four-pads", shapes: [][]int{{2, 1, 5, 4}}, build: pool(func(x *G.Node) (*G.Node, error) {
			return G.AveragePool2D(x, tensor.Shape{2, 2}, []int{1, 0, 0, 1}, []int{1, 1})
		})},
		{name: "avgpool1d", shapes: [][]int{{2, 2, 1, 7}}, build: pool(func(x *G.Node) (*G.Node, error) { return G.AveragePool1D(x, 2, 0, 2) })},
		// gorgonia gives GlobalAveragePool2D no gradient.
		{name: "global-avgpool", shapes: [][]int{{3, 4, 5, 3}}, noGrad: true, build: pool(G.GlobalAveragePool2D)},
	}
	runCases(t, cases)
}

// kernelTypes returns the names of the kernels a program runs.
func kernelTypes(p *Program) map[string]int {
	out := map[string]int{}
	for _, k := range p.kernels {
		out[backend.Name(k)]++
	}
	return out
}

// checkKernels fails t unless p has a kernel of each name in want and none
// of those in notWant.
func checkKernels(t *testing.T, p *Program, want, notWant []string) {
	t.Helper()
	got := kernelTypes(p)
	for _, k := range want {
		if got[k] == 0 {
			t.Errorf("no %s kernel among %v", k, got)
		}
	}
	for _, k := range notWant {
		if got[k] != 0 {
			t.Errorf("%d %s kernels among %v", got[k], k, got)
		}
	}
}

// TestConvFusion checks which path a convolution takes: gorgonia.Conv2d and
// its gradients become the fused kernels, with no im2col matrix or GEMM
// left; only the filter's gradient when the images are not a
// parameter; none when the im2col has another user, or when an inner node
// is an output.
func TestConvFusion(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, c := range []struct {
		name          string
		imagesParam   bool
		shareIm2col   bool
		outputIm2col  bool
		want, notWant []string
	}{
		{name: "fused", imagesParam: true, want: []string{"conv", "conv-grad-filter", "conv-grad-input"}, notWant: []string{"im2col", "col2im", "gemm"}},
		{name: "images-constant", want: []string{"conv", "conv-grad-filter"}, notWant: []string{"conv-grad-input", "im2col", "col2im", "gemm"}},
		{name: "im2col-shared", imagesParam: true, shareIm2col: true, want: []string{"im2col", "col2im", "gemm", "copy"}, notWant: []string{"conv", "conv-grad-filter", "conv-grad-input"}},
		{name: "im2col-output", imagesParam: true, outputIm2col: true, want: []string{"im2col", "col2im", "gemm"}, notWant: []string{"conv", "conv-grad-filter", "conv-grad-input"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := newLeaf(g, tensor.Float64, "x", []int{2, 3, 5, 6}, make([]float64, 180))
			w := newLeaf(g, tensor.Float64, "w", []int{4, 3, 3, 2}, make([]float64, 72))
			y, im, err := conv2d(x, w, tensor.Shape{3, 2}, []int{1, 0}, []int{1, 2}, []int{1, 1})
			if err != nil {
				t.Fatal(err)
			}
			if c.shareIm2col {
				y = G.Must(G.Mul(y, G.Must(G.Mean(im))))
			}
			loss := G.Must(G.Sum(G.Must(G.Square(y))))
			params := []param.Param{param.Plain(w)}
			wrt := []*G.Node{w}
			if c.imagesParam {
				params, wrt = append(params, param.Plain(x)), append(wrt, x)
			}
			if _, err := G.Grad(loss, wrt...); err != nil {
				t.Fatal(err)
			}
			outputs := []*G.Node{loss}
			if c.outputIm2col {
				outputs = append(outputs, im)
			}
			p, err := Compile(g, Config{Backend: be, Outputs: outputs, Params: params})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			checkKernels(t, p, c.want, c.notWant)
		})
	}
}

// TestPoolingPaddedBorders compares pooled values element by element with
// the tape machine where gorgonia's windows lie wholly in the padding (max
// pooling gives the lowest finite value there, average pooling 0), which
// gorgonia's four paddings produce at the south and east borders. Only the
// values: gorgonia's backward fails on such windows.
func TestPoolingPaddedBorders(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, c := range []struct {
			name string
			f    func(x *G.Node) (*G.Node, error)
		}{
			{"max", func(x *G.Node) (*G.Node, error) {
				return G.MaxPool2D(x, tensor.Shape{1, 2}, []int{0, 2, 0, 3}, []int{1, 1})
			}},
			{"max-pad-over-kernel", func(x *G.Node) (*G.Node, error) { return G.MaxPool2D(x, tensor.Shape{2, 1}, []int{2, 1}, []int{1, 1}) }},
			{"avg", func(x *G.Node) (*G.Node, error) {
				return G.AveragePool2D(x, tensor.Shape{1, 2}, []int{0, 2, 0, 3}, []int{1, 1})
			}},
		} {
			values := make([]float64, 2*3*4*5)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range values {
				values[i] = r.NormFloat64()
			}
			run := func(compiled bool) []float64 {
				g := G.NewGraph()
				x := newLeaf(g, dt, "x", []int{2, 3, 4, 5}, values)
				y, err := c.f(x)
				if err != nil {
					t.Fatal(err)
				}
				if !compiled {
					var v G.Value
					G.Read(y, &v)
					vm := G.NewTapeMachine(g)
					defer vm.Close()
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
					return testval.Floats(v.Data())
				}
				be := cpu.New(cpu.Options{})
				defer be.Close()
				p, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{y}, NoGrad: true})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				out := make([]float64, y.Shape().TotalSize())
				if dt == tensor.Float32 {
					f := make([]float32, len(out))
					if err := p.Read(y, f); err != nil {
						t.Fatal(err)
					}
					return testval.Floats(f)
				}
				if err := p.Read(y, out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			want, got := run(false), run(true)
			var padded int
			for i := range want {
				if math.Abs(want[i]) > 1e38 {
					padded++
				}
				if d := math.Abs(got[i] - want[i]); !(d <= tolerance(dt)*max(1, math.Abs(want[i]))) {
					t.Errorf("%s %v: element %d is %v, the tape machine's %v", c.name, dt, i, got[i], want[i])
				}
			}
			if c.name != "avg" && padded == 0 {
				t.Errorf("%s %v: no window lies in the padding: the case tests nothing", c.name, dt)
			}
		}
	}
}

// TestGorgoniaPoolingGradients checks gorgonia's own backward ops, which a
// compiled program runs as they are, against central finite differences
// of their forward ops (float64): im2col's (col2im) and max pooling's agree;
// average pooling's avgPoolDiffOp does not compute the gradient of
// avgPoolOp (see backend.AvgPoolGrad), and this test says so as long as it
// stays that way.
func TestGorgoniaPoolingGradients(t *testing.T) {
	for _, c := range []struct {
		name  string
		f     func(x *G.Node) (*G.Node, error)
		agree bool
	}{
		{"im2col", func(x *G.Node) (*G.Node, error) {
			return G.Im2Col(x, tensor.Shape{3, 2}, tensor.Shape{1, 0}, tensor.Shape{1, 2}, tensor.Shape{2, 1})
		}, true},
		{"maxpool", func(x *G.Node) (*G.Node, error) { return G.MaxPool2D(x, tensor.Shape{2, 3}, []int{1, 1}, []int{1, 2}) }, true},
		{"avgpool", func(x *G.Node) (*G.Node, error) {
			return G.AveragePool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
		}, false},
	} {
		g := G.NewGraph()
		values := make([]float64, 2*2*5*6)
		r := rand.New(rand.NewPCG(3, 4))
		for i := range values {
			values[i] = r.NormFloat64()
		}
		x := newLeaf(g, tensor.Float64, "x", []int{2, 2, 5, 6}, values)
		y, err := c.f(x)
		if err != nil {
			t.Fatal(err)
		}
		weights := make([]float64, y.Shape().TotalSize())
		for i := range weights {
			weights[i] = r.NormFloat64()
		}
		rw := newLeaf(g, tensor.Float64, "r", []int(y.Shape()), weights)
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, rw))))
		err = gradcheck.Check(g, loss, 1e-6, 1e-6, x)
		switch {
		case c.agree && err != nil:
			t.Errorf("%s: gorgonia's gradient and finite differences differ: %v", c.name, err)
		case !c.agree && err == nil:
			t.Errorf("%s: gorgonia's gradient now agrees with finite differences: the compiled kernels copy the old one (backend.AvgPoolGrad) and the README says it is wrong", c.name)
		case !c.agree:
			t.Logf("%s, as expected: %v", c.name, err)
		}
	}
}

// TestRectifyPoolFusion checks which path max pooling after
// gorgonia.Rectify takes: one MaxPool and one MaxPoolGrad with Rectify set
// and no comparison or product left, unless the rectified values have
// another user.
func TestRectifyPoolFusion(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, shared := range []bool{false, true} {
		g := G.NewGraph()
		x := newLeaf(g, tensor.Float64, "x", []int{2, 3, 6, 4}, make([]float64, 144))
		r := G.Must(G.Rectify(x))
		y := G.Must(G.MaxPool2D(r, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		if shared {
			y = G.Must(G.Mul(y, G.Must(G.Mean(r))))
		}
		loss := G.Must(G.Sum(y))
		if _, err := G.Grad(loss, x); err != nil {
			t.Fatal(err)
		}
		p, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{loss}, Params: []param.Param{param.Plain(x)}})
		if err != nil {
			t.Fatal(err)
		}
		var rectified, compares int
		for _, k := range p.kernels {
			switch k := k.(type) {
			case backend.MaxPool:
				rectified += map[bool]int{true: 1}[k.Rectify]
			case backend.MaxPoolGrad:
				rectified += map[bool]int{true: 1}[k.Rectify]
			case backend.Zip:
				compares += map[bool]int{true: 1}[k.Op == backend.Ge]
			}
		}
		p.Close()
		if want := map[bool][2]int{false: {2, 0}, true: {0, 1}}[shared]; rectified != want[0] || compares != want[1] {
			t.Errorf("shared %v: %d rectifying poolings and %d comparisons, want %d and %d", shared, rectified, compares, want[0], want[1])
		}
	}
}

// TestConvGeometryRefused checks that a convolution gorgonia builds but
// whose kernel does not fit the padded image is refused at Compile, with
// an error that names the node and says why.
func TestConvGeometryRefused(t *testing.T) {
	g := G.NewGraph()
	x := newLeaf(g, tensor.Float64, "x", []int{1, 1, 2, 2}, make([]float64, 4))
	// gorgonia gives it an output of (2 - 5)/1 + 1 = -2 rows.
	im, err := G.Im2Col(x, tensor.Shape{5, 1}, tensor.Shape{0, 0}, tensor.Shape{1, 1}, tensor.Shape{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(cpu.Options{})
	defer be.Close()
	_, err = Compile(g, Config{Backend: be, Outputs: []*G.Node{im}, NoGrad: true})
	if err == nil || !strings.Contains(err.Error(), im.Name()) || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("Compile: %v, want an error naming %q and saying the kernel does not fit", err, im.Name())
	}
}

// block is a convolution block as gorgonia's examples and nn.Conv2d build
// one: gorgonia.Conv2d of x by w (padding pad, stride stride, dilation
// dil), the channel bias b added by BroadcastAdd where b is not nil,
// Rectify, MaxPool2D (window pool, padding ppad, stride pstride), and
// gorgonia.Dropout of probability drop where it is above 0.
type block struct {
	pad, stride, dil []int
	pool             tensor.Shape
	ppad, pstride    []int
	drop             float64
}

// apply builds the block.
func (k block) apply(x, w, b *G.Node) (*G.Node, error) {
	ws := w.Shape()
	y, err := G.Conv2d(x, w, tensor.Shape{ws[2], ws[3]}, k.pad, k.stride, k.dil)
	if err != nil {
		return nil, err
	}
	if b != nil {
		if y, err = G.BroadcastAdd(y, b, nil, []byte{0, 2, 3}); err != nil {
			return nil, err
		}
	}
	if y, err = G.Rectify(y); err != nil {
		return nil, err
	}
	if y, err = G.MaxPool2D(y, k.pool, k.ppad, k.pstride); err != nil {
		return nil, err
	}
	if k.drop > 0 {
		return G.Dropout(y, k.drop)
	}
	return y, nil
}

// same is a 3 x 3 convolution with padding 1 and 2 x 2 max pooling, the
// examples' block.
var same = block{pad: []int{1, 1}, stride: []int{1, 1}, dil: []int{1, 1}, pool: tensor.Shape{2, 2}, ppad: []int{0, 0}, pstride: []int{2, 2}}

// withDrop returns k with dropout p.
func (k block) withDrop(p float64) block { k.drop = p; return k }

// blockCase is a graphCase of one block over leaves x, w and, with bias,
// b (1, F, 1, 1).
func blockCase(name string, k block, x, w []int, bias bool) graphCase {
	shapes := [][]int{x, w}
	if bias {
		shapes = append(shapes, []int{1, w[0], 1, 1})
	}
	return graphCase{name: name, shapes: shapes, build: func(l []*G.Node) (*G.Node, error) {
		var b *G.Node
		if bias {
			b = l[2]
		}
		return k.apply(l[0], l[1], b)
	}}
}

// twoBlocks is a small CNN: two biased blocks, the second's output
// flattened into a dense layer (leaves x, w1, b1, w2, b2, dense).
func twoBlocks(k1, k2 block) func(l []*G.Node) (*G.Node, error) {
	return func(l []*G.Node) (*G.Node, error) {
		h, err := k1.apply(l[0], l[1], l[2])
		if err != nil {
			return nil, err
		}
		if h, err = k2.apply(h, l[3], l[4]); err != nil {
			return nil, err
		}
		s := h.Shape()
		return G.Mul(G.Must(G.Reshape(h, tensor.Shape{s[0], s.TotalSize() / s[0]})), l[5])
	}
}

// TestConvPoolLowerings compares convolution blocks (convolution, channel
// bias, ReLU, max pooling), compiled with backend.ConvPool and its
// gradients, with the tape machine: values and gradients, float64 and
// float32, on one thread and three and on the CUDA host model; 2 x 2 tiles
// with an odd side left out, overlapping windows in the padding after a
// strided and dilated convolution, images wide enough for the CPU to
// multiply one at a time, channels enough for Winograd's products (and
// convolutions of as many alone), constant images or bias, the forward
// pass alone, dropout in inference, and two blocks in a row.
func TestConvPoolLowerings(t *testing.T) {
	overlap := block{pad: []int{1, 2}, stride: []int{2, 1}, dil: []int{1, 2}, pool: tensor.Shape{3, 2}, ppad: []int{1, 1}, pstride: []int{2, 1}}
	imagesConstant := blockCase("conv-pool-images-constant", same, []int{3, 2, 5, 6}, []int{3, 2, 3, 3}, true)
	imagesConstant.constant = []bool{true}
	biasConstant := blockCase("conv-pool-bias-constant", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, true)
	biasConstant.constant = []bool{false, false, true}
	forward := blockCase("conv-pool-forward", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, true)
	forward.noGrad = true
	dropEval := blockCase("conv-pool-dropout-inference", same.withDrop(0.3), []int{2, 3, 6, 6}, []int{4, 3, 3, 3}, true)
	dropEval.evalMode, dropEval.noGrad = true, true // gorgonia's gradient divides by p in inference too (lower/norm.go)
	cases := []graphCase{
		blockCase("conv-pool", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, false),
		blockCase("conv-pool-bias", same, []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, true),
		blockCase("conv-pool-overlap", overlap, []int{2, 3, 5, 7}, []int{3, 3, 3, 2}, true),
		blockCase("conv-pool-wide", same, []int{3, 2, 17, 16}, []int{3, 2, 3, 3}, true),
		imagesConstant, biasConstant, forward, dropEval,
		// Channels enough for the CPU's Winograd products, alone and in a
		// block, paddings 0 to 2.
		convCase("conv-winograd", []int{2, 16, 5, 7}, []int{17, 16, 3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}, false),
		convCase("conv-winograd-pads", []int{2, 16, 6, 4}, []int{16, 16, 3, 3}, []int{0, 2}, []int{1, 1}, []int{1, 1}, false),
		blockCase("conv-pool-winograd", same, []int{3, 16, 6, 7}, []int{17, 16, 3, 3}, true),
		{name: "conv-pool-two-blocks", shapes: [][]int{{3, 2, 8, 9}, {4, 2, 3, 3}, {1, 4, 1, 1}, {5, 4, 3, 3}, {1, 5, 1, 1}, {20, 3}},
			build: twoBlocks(same, same)},
	}
	runCases(t, cases)
}

// kernelCount returns how many kernels of p have the given name.
func kernelCount(p *Program, name string) int { return kernelTypes(p)[name] }

// TestConvPoolMatchesUnfused compiles convolution blocks with gorgonia's
// Dropout in training (the tape machine draws other masks; one after the
// block's output is flattened; one with channels enough for Winograd's
// products) fused and, the
// same graph, unfused, and checks on every test backend, float64 and
// float32, over two steps, that the outputs, the loss and every gradient
// agree within 1e-10 (1e-5 for float32), and that the fused program runs
// ConvPool and no separate dropout or pooling.
func TestConvPoolMatchesUnfused(t *testing.T) {
	for _, c := range []struct {
		name   string
		shapes [][]int
		build  func(l []*G.Node) (*G.Node, error)
	}{
		{"dropout", [][]int{{3, 2, 6, 5}, {4, 2, 3, 3}, {1, 4, 1, 1}}, func(l []*G.Node) (*G.Node, error) {
			return same.withDrop(0.3).apply(l[0], l[1], l[2])
		}},
		{"dropout-wide-overlap", [][]int{{2, 3, 16, 17}, {3, 3, 3, 3}, {1, 3, 1, 1}}, func(l []*G.Node) (*G.Node, error) {
			k := same.withDrop(0.5)
			k.pool, k.ppad, k.pstride = tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}
			return k.apply(l[0], l[1], l[2])
		}},
		{"winograd-dropout", [][]int{{3, 16, 6, 7}, {17, 16, 3, 3}, {1, 17, 1, 1}}, func(l []*G.Node) (*G.Node, error) {
			return same.withDrop(0.3).apply(l[0], l[1], l[2])
		}},
		{"flattened-dropout", [][]int{{2, 3, 6, 6}, {4, 3, 3, 3}, {1, 4, 1, 1}, {36, 5}}, func(l []*G.Node) (*G.Node, error) {
			p, err := same.apply(l[0], l[1], l[2])
			if err != nil {
				return nil, err
			}
			d := G.Must(G.Dropout(G.Must(G.Reshape(p, tensor.Shape{2, 36})), 0.35))
			return G.Mul(d, l[3])
		}},
		{"two-blocks-dropout", [][]int{{3, 2, 8, 9}, {4, 2, 3, 3}, {1, 4, 1, 1}, {5, 4, 3, 3}, {1, 5, 1, 1}, {20, 3}},
			twoBlocks(same.withDrop(0.2), same.withDrop(0.4))},
	} {
		for bi, be := range testBackends(t) {
			for _, dt := range floatTypes {
				t.Run(fmt.Sprintf("%s/backend%d/%v", c.name, bi, dt), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(11, 12))
					values := make([][]float64, len(c.shapes))
					for i, s := range c.shapes {
						values[i] = make([]float64, numel(s))
						for j := range values[i] {
							values[i][j] = rng.NormFloat64()
						}
					}
					var progs [2]*Program
					var nodes [2][2]*G.Node // output and loss
					for i, unfused := range []bool{false, true} {
						g := G.NewGraph()
						var leaves []*G.Node
						var params []param.Param
						for j, s := range c.shapes {
							l := newLeaf(g, dt, fmt.Sprintf("x%d", j), s, values[j])
							leaves, params = append(leaves, l), append(params, param.Plain(l))
						}
						out, err := c.build(leaves)
						if err != nil {
							t.Fatal(err)
						}
						rr := rand.New(rand.NewPCG(13, 14))
						rv := make([]float64, out.Shape().TotalSize())
						for j := range rv {
							rv[j] = rr.NormFloat64()
						}
						loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, newLeaf(g, dt, "R", []int(out.Shape()), rv)))))
						if _, err := G.Grad(loss, leaves...); err != nil {
							t.Fatal(err)
						}
						p, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{out, loss}, Params: params, DropoutSeed: 3, unfused: unfused})
						if err != nil {
							t.Fatal(err)
						}
						defer p.Close()
						progs[i], nodes[i] = p, [2]*G.Node{out, loss}
					}
					if n := kernelCount(progs[0], "conv-pool"); n == 0 || kernelCount(progs[0], "dropout")+kernelCount(progs[0], "max-pool") != 0 {
						t.Fatalf("fused: %v", kernelTypes(progs[0]))
					}
					if kernelCount(progs[1], "conv-pool") != 0 || kernelCount(progs[1], "dropout") == 0 {
						t.Fatalf("unfused: %v", kernelTypes(progs[1]))
					}
					tol := tolerance(dt)
					for step := range 2 {
						var got [2][][]float64
						for i, p := range progs {
							if err := p.SetStep(step); err != nil {
								t.Fatal(err)
							}
							if err := p.Run(); err != nil {
								t.Fatal(err)
							}
							got[i] = append(got[i], readNode(t, p, nodes[i][0]), readNode(t, p, nodes[i][1]))
							for j := range c.shapes {
								got[i] = append(got[i], readGrad(t, p, j))
							}
						}
						for j := range got[0] {
							if d := testval.MaxRel(got[0][j], got[1][j]); !(d <= tol) {
								t.Errorf("step %d: value %d (output, loss, then gradients) of the fused program differs from the unfused one's by %.3g, %s",
									step, j, d, testval.Worst(got[0][j], got[1][j]))
							}
						}
					}
				})
			}
		}
	}
}

// TestConvPoolFusion checks which path a convolution block takes: one
// ConvPool and its gradients, with no pooling, dropout, comparison or
// reduction (but the loss's) left; the dropout left out where the pooled values have
// another user; and the general path (a plain convolution) where the
// convolution's output, its biased or its rectified values have another
// user or are an output.
func TestConvPoolFusion(t *testing.T) {
	for _, c := range []struct {
		name string
		// use returns, from the block's inner nodes, a node to add to the
		// loss, and whether it is an output instead.
		use           func(y, z, a, p *G.Node) (*G.Node, bool)
		want, notWant []string
	}{
		{name: "fused", want: []string{"conv-pool", "conv-pool-grad-filter", "conv-pool-grad-input", "conv-pool-grad-bias"},
			notWant: []string{"conv", "max-pool", "max-pool-grad", "dropout", "zip"}},
		{name: "pooled-shared", use: func(_, _, _, p *G.Node) (*G.Node, bool) { return p, false },
			want: []string{"conv-pool", "conv-pool-grad-filter", "conv-pool-grad-input", "dropout"}, notWant: []string{"conv", "max-pool"}},
		{name: "rectified-shared", use: func(_, _, a, _ *G.Node) (*G.Node, bool) { return a, false },
			want: []string{"conv", "conv-grad-filter", "max-pool"}, notWant: []string{"conv-pool"}},
		{name: "biased-shared", use: func(_, z, _, _ *G.Node) (*G.Node, bool) { return z, false },
			want: []string{"conv", "max-pool"}, notWant: []string{"conv-pool"}},
		{name: "conv-output", use: func(y, _, _, _ *G.Node) (*G.Node, bool) { return y, true },
			want: []string{"conv", "max-pool"}, notWant: []string{"conv-pool"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := newLeaf(g, tensor.Float64, "x", []int{2, 3, 6, 6}, make([]float64, 216))
			w := newLeaf(g, tensor.Float64, "w", []int{4, 3, 3, 3}, make([]float64, 108))
			b := newLeaf(g, tensor.Float64, "b", []int{1, 4, 1, 1}, make([]float64, 4))
			y := G.Must(G.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
			z := G.Must(G.BroadcastAdd(y, b, nil, []byte{0, 2, 3}))
			a := G.Must(G.Rectify(z))
			p := G.Must(G.MaxPool2D(a, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			l := G.Must(G.Dropout(p, 0.25))
			loss := G.Must(G.Sum(l))
			outputs := []*G.Node{loss}
			if c.use != nil {
				n, output := c.use(y, z, a, p)
				if output {
					outputs = append(outputs, n)
				} else {
					loss = G.Must(G.Add(loss, G.Must(G.Sum(n))))
					outputs[0] = loss
				}
			}
			if _, err := G.Grad(loss, x, w, b); err != nil {
				t.Fatal(err)
			}
			be := testBackends(t)[0]
			prog, err := Compile(g, Config{Backend: be, Outputs: outputs, Params: []param.Param{param.Plain(x), param.Plain(w), param.Plain(b)}})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			checkKernels(t, prog, c.want, c.notWant)
			if got := kernelTypes(prog); c.name == "fused" && got["reduce"] != 1 {
				t.Errorf("%d reductions among %v: want only the loss's", got["reduce"], got)
			}
		})
	}
}
