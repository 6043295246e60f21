package program

import (
	"errors"
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
