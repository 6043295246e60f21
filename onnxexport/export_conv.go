package onnxexport

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/gorgoniaop"
	"github.com/orthonet/orthonet/onnx"
)

// The ONNX export of gorgonia's image ops (exporters' entries): im2col as
// the shifted windows of the padded images, stacked (Pad, Slice, Concat and
// Reshape, so that it is exact and runs in either float type: ONNX Runtime
// has no DOUBLE Conv), so that gorgonia.Conv2d exports as the product it is
// built from; max pooling as MaxPool; global average pooling as
// ReduceMean.

// exportIm2col writes im2col of x (B, C, H, W) into (B, OH, OW, C KH KW),
// element c KH KW + u KW + v of a window being x_padded[c, oh stride + u
// dilation, ow stride + v dilation]: for each tap (u, v) the strided slice of
// the padded images (B, C, OH, OW), the taps stacked after the channels
// (B, C, KH KW, OH, OW), reshaped and transposed channels last.
func exportIm2col(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	g, err := gorgoniaop.ConvGeomOf(n.Op(), args[0].Shape())
	if err != nil {
		return "", err
	}
	if want := gorgoniaop.ColShape(g); !want.Eq(n.Shape()) {
		return "", fmt.Errorf("im2col of %v gives %v, the node %v", args[0].Shape(), want, n.Shape())
	}
	oh, ow := g.Out()
	padded := in[0]
	if g.PadH > 0 || g.PadW > 0 {
		padded = x.op("Pad", []string{in[0], x.ints("pads", 0, 0, g.PadH, g.PadW, 0, 0, g.PadH, g.PadW)})
	}
	axes, steps := x.ints("axes", 2, 3), x.ints("steps", g.StrideH, g.StrideW)
	var taps []string
	for u := 0; u < g.KH; u++ {
		for v := 0; v < g.KW; v++ {
			r0, c0 := u*g.DilH, v*g.DilW
			tap := x.op("Slice", []string{padded, x.ints("starts", r0, c0), x.ints("ends", r0+(oh-1)*g.StrideH+1, c0+(ow-1)*g.StrideW+1), axes, steps})
			taps = append(taps, x.op("Unsqueeze", []string{tap, x.ints("axes", 2)}))
		}
	}
	stacked := taps[0]
	if len(taps) > 1 {
		stacked = x.op("Concat", taps, onnx.Int("axis", 2))
	}
	cols := x.reshapeTo(stacked, tensor.Shape{g.B, g.Patch(), oh, ow})
	return x.op("Transpose", []string{cols}, onnx.Ints("perm", 0, 2, 3, 1)), nil
}

// exportMaxPool writes gorgonia's max pooling as MaxPool, which pads with
// -inf: the same wherever a window holds an image value. A window wholly in
// the padding (gorgonia gives it -MaxFloat) and gorgonia's four paddings
// (its first window starts at the south and east ones) have no equivalent
// and are refused.
func exportMaxPool(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	g, err := gorgoniaop.PoolGeomOf(n.Op(), args[0].Shape(), n.Shape())
	if err != nil {
		return "", err
	}
	if explicit, err := gorgoniaop.BoolField(n.Op(), "explicitPadding"); err != nil || explicit {
		return "", errors.Join(err, fmt.Errorf("%w: max pooling with four paddings (gorgonia starts its windows at the south and east ones)", ErrNotExportable))
	}
	if g.PadH >= g.KH || g.PadW >= g.KW {
		return "", fmt.Errorf("%w: max pooling with padding %d,%d not below its %dx%d window (a window in the padding alone: -MaxFloat in gorgonia, -inf in ONNX)", ErrNotExportable, g.PadH, g.PadW, g.KH, g.KW)
	}
	out := x.op("MaxPool", in[:1],
		onnx.Ints("kernel_shape", int64(g.KH), int64(g.KW)),
		onnx.Ints("pads", int64(g.PadH), int64(g.PadW), int64(g.PadH), int64(g.PadW)),
		onnx.Ints("strides", int64(g.StrideH), int64(g.StrideW)))
	if oh, ow := (g.H+2*g.PadH-g.KH)/g.StrideH+1, (g.W+2*g.PadW-g.KW)/g.StrideW+1; oh != g.OutH || ow != g.OutW {
		return "", fmt.Errorf("%w: max pooling to %dx%d, where ONNX's MaxPool gives %dx%d", ErrNotExportable, g.OutH, g.OutW, oh, ow)
	}
	return out, nil
}

// exportGlobalAvgPool writes the mean of each image's channel as a
// ReduceMean over its height and width (ONNX Runtime has no DOUBLE
// GlobalAveragePool), shaped as the node.
func exportGlobalAvgPool(x *exporter, n *G.Node, args []*G.Node, in []string) (string, error) {
	s := args[0].Shape()
	if len(s) != 4 {
		return "", fmt.Errorf("global average pooling of shape %v", s)
	}
	mean := x.op("ReduceMean", in[:1], onnx.Ints("axes", 2, 3), onnx.Int("keepdims", 1))
	return x.reshape(mean, tensor.Shape{s[0], s[1], 1, 1}, n.Shape()), nil
}
