package lower

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
)

// Convolutions and pooling: gorgonia's im2colOp, col2imOp, maxPoolOp,
// maxPoolDiffOp, avgPoolOp, avgPoolDiffOp and globalAveragePoolOp, each
// lowered as it is (the general path), and the fusion of a whole
// gorgonia.Conv2d with its gradients into convolution kernels.

// im2col lowers im2colOp.
func (l *Lowering) im2col(n *G.Node, in []*Value, out *Value) error {
	g, err := gorgoniaop.ConvGeomOf(n.Op(), in[0].Shape)
	if err != nil {
		return err
	}
	if want := gorgoniaop.ColShape(g); !want.Eq(out.Shape) {
		return fmt.Errorf("im2col of %v gives %v, the node %v", in[0].Shape, want, out.Shape)
	}
	l.Emit(backend.Im2col{Geom: g, Src: in[0].Operand(), Dst: out.Operand()})
	return nil
}

// col2im lowers col2imOp, im2col's gradient: its images' shape is the op's.
func (l *Lowering) col2im(n *G.Node, in []*Value, out *Value) error {
	g, err := gorgoniaop.ConvGeomOf(n.Op(), out.Shape)
	if err != nil {
		return err
	}
	if want := gorgoniaop.ColShape(g); !want.Eq(in[0].Shape) {
		return fmt.Errorf("col2im of %v into %v, want %v", in[0].Shape, out.Shape, want)
	}
	l.Emit(backend.Col2im{Geom: g, Src: in[0].Operand(), Dst: out.Operand()})
	return nil
}

// pool lowers maxPoolOp and avgPoolOp.
func (l *Lowering) pool(n *G.Node, in []*Value, out *Value) error {
	g, err := gorgoniaop.PoolGeomOf(n.Op(), in[0].Shape, out.Shape)
	if err != nil {
		return err
	}
	if gorgoniaop.OpName(n.Op()) == gorgoniaop.MaxPoolOp {
		l.Emit(backend.MaxPool{Geom: g, X: in[0].Operand(), Y: out.Operand()})
	} else {
		l.Emit(backend.AvgPool{Geom: g, X: in[0].Operand(), Y: out.Operand()})
	}
	return nil
}

// poolGrad lowers maxPoolDiffOp and avgPoolDiffOp, whose arguments are the
// pooling's input, its output and the output's gradient. (gorgonia's
// backward reads the window positions its forward op recorded; the max
// pooling's gradient finds them again from the input and the output.)
func (l *Lowering) poolGrad(n *G.Node, in []*Value, out *Value) error {
	if len(in) != 3 {
		return fmt.Errorf("pooling gradient of %d arguments, want 3", len(in))
	}
	g, err := gorgoniaop.PoolGeomOf(n.Op(), in[0].Shape, in[2].Shape)
	if err != nil {
		return err
	}
	if gorgoniaop.OpName(n.Op()) == gorgoniaop.MaxPoolDiffOp {
		l.Emit(backend.MaxPoolGrad{Geom: g, X: in[0].Operand(), Y: in[1].Operand(), DY: in[2].Operand(), DX: out.Operand()})
	} else {
		l.Emit(backend.AvgPoolGrad{Geom: g, DY: in[2].Operand(), DX: out.Operand()})
	}
	return nil
}

// globalAvgPool lowers globalAveragePoolOp: the sum over each image's
// channel, divided by its area. (gorgonia gives the op no gradient.)
func (l *Lowering) globalAvgPool(n *G.Node, in []*Value, out *Value) error {
	s := in[0].Shape
	if len(s) != 4 || out.Size != s[0]*s[1] {
		return fmt.Errorf("global average pooling of %v into %v", s, out.Shape)
	}
	l.Emit(backend.Reduce{Op: backend.Sum, Outer: s[0] * s[1], Mid: s[2] * s[3], Inner: 1, Src: in[0].Operand(), Dst: out.Operand()})
	area := l.NewBuffer(out.Buf.Type, 1, true, n.Name()+" area")
	area.Init = []float64{float64(s[2] * s[3])}
	if area.Type == backend.Float32 {
		area.Init = []float32{float32(s[2] * s[3])}
	}
	l.Emit(backend.Zip{Op: backend.Div, N: out.Size, A: out.Operand(), B: backend.At(area, 0), BScalar: true, Dst: out.Operand()})
	return nil
}

// A rewrite lowers a node from other arguments than its own: inputs taken
// from further down the graph, so that the nodes in between (a pattern's
// inner nodes) are neither ordered nor lowered. Children and Lower follow
// l.rewrites.
type rewrite struct {
	inputs []*G.Node
	lower  func(l *Lowering, n *G.Node, in []*Value, out *Value) error
}

// A fusion is rewrites taken together or not at all, with the inner nodes
// they absorb.
type fusion struct {
	roots map[*G.Node]rewrite
	inner []*G.Node
}

// fusions are the patterns the compiler fuses: each finds its candidates
// among the nodes a compilation needs, users mapping every node to the
// needed nodes that take it as an argument. A pattern that contains
// another comes before it.
var fusions = []func(l *Lowering, needed []*G.Node, users map[*G.Node][]*G.Node) []fusion{
	(*Lowering).convPoolFusions,
	(*Lowering).convFusions,
	(*Lowering).rectifyPoolFusions,
}

// Fuse takes every fusion whose inner nodes nothing else needs: neither
// another needed node nor the caller (targets: outputs, parameters and
// gradients), and records its rewrites, which Children and Lower then
// follow. It reports whether it took any.
func (l *Lowering) Fuse(needed, targets []*G.Node) bool {
	users := map[*G.Node][]*G.Node{}
	for _, n := range needed {
		for _, ch := range l.Children(n) {
			if !slices.Contains(users[ch], n) {
				users[ch] = append(users[ch], n)
			}
		}
	}
	target := map[*G.Node]bool{}
	for _, t := range targets {
		target[t] = true
	}
	taken := map[*G.Node]bool{} // the nodes of the fusions taken
	took := false
	for _, find := range fusions {
	candidates:
		for _, f := range find(l, needed, users) {
			mine := map[*G.Node]bool{}
			for r := range f.roots {
				mine[r] = true
			}
			for _, n := range f.inner {
				if target[n] || mine[n] && f.roots[n].lower != nil {
					continue candidates
				}
				mine[n] = true
			}
			for n := range mine {
				if taken[n] {
					continue candidates
				}
			}
			for _, n := range f.inner {
				for _, u := range users[n] {
					if !mine[u] {
						continue candidates
					}
				}
			}
			if l.rewrites == nil {
				l.rewrites = map[*G.Node]rewrite{}
			}
			for r, rw := range f.roots {
				l.rewrites[r] = rw
			}
			for n := range mine {
				taken[n] = true
			}
			took = true
		}
	}
	return took
}

// Children returns n's arguments in order: those of its rewrite, if it
// has one, or else its own.
func (l *Lowering) Children(n *G.Node) []*G.Node {
	if rw, ok := l.rewrites[n]; ok {
		return rw.inputs
	}
	return gorgoniaop.Args(n)
}

// isOp reports whether n is an op node of the named gorgonia type.
func isOp(n *G.Node, name gorgoniaop.OpType) bool {
	return n != nil && n.Op() != nil && gorgoniaop.OpName(n.Op()) == name
}

// isProduct reports whether n is a matrix product op(A) op(B) with the
// given transposes.
func isProduct(n *G.Node, tA, tB bool) bool {
	if !isOp(n, gorgoniaop.LinAlgBinOp) {
		return false
	}
	kind, a, b, err := gorgoniaop.LinAlgOf(n.Op())
	return err == nil && kind == gorgoniaop.MatMul && a == tA && b == tB
}

// isTranspose reports whether n transposes with the given pattern.
func isTranspose(n *G.Node, pattern ...int) bool {
	if !isOp(n, gorgoniaop.TransposeOp) {
		return false
	}
	p, err := gorgoniaop.IntsField(n.Op(), "pattern")
	return err == nil && slices.Equal(p, pattern)
}

// convFusions finds gorgonia.Conv2d's pattern and its gradients'. Conv2d
// builds, for images x (B, C, H, W) and a filter reshaped to W (F, K):
//
//	y = transpose(reshape(reshape(im2col(x)) (BP, K) x W^T) (B, OH, OW, F), 0, 3, 1, 2)
//
// and gorgonia.Grad, from the gradient dy of y (B, F, OH, OW),
//
//	dc = reshape(transpose(dy, 0, 2, 3, 1)) (BP, F)
//	dW = dc^T reshape(im2col(x))            (F, K)
//	dx = col2im(reshape(dc W) (B, OH, OW, K))
//
// which become one Conv (inputs x and W), one ConvGradFilter (x, dy) and
// one ConvGradInput (dy, W): no im2col matrix, no transposes.
func (l *Lowering) convFusions(needed []*G.Node, users map[*G.Node][]*G.Node) []fusion {
	var out []fusion
	for _, y := range needed {
		if m, ok := l.matchConv(y, users); ok {
			out = append(out, m.fusion())
		}
	}
	return out
}

// convMatch is gorgonia.Conv2d's pattern found at its output y: images x
// convolved with the filter w in geometry g by f filters, the pattern's
// inner nodes (forward and gradients), and its gradients' outputs.
type convMatch struct {
	g       backend.ConvGeom
	f       int
	x, w, y *G.Node
	inner   []*G.Node
	filter  []convGrad // the filter's gradients (dW, a product)
	input   []convGrad // the images' gradients (col2im)
}

// convGrad is a gradient's output node and the output gradient dy it is
// computed from.
type convGrad struct{ node, dy *G.Node }

// fusion returns the match's rewrites as convFusions lowers them.
func (m convMatch) fusion() fusion {
	g, f := m.g, m.f
	fu := fusion{roots: map[*G.Node]rewrite{m.y: {inputs: []*G.Node{m.x, m.w}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
		l.Emit(backend.Conv{Geom: g, F: f, X: in[0].Operand(), W: in[1].Operand(), Y: out.Operand()})
		return nil
	}}}, inner: m.inner}
	for _, d := range m.filter {
		fu.roots[d.node] = rewrite{inputs: []*G.Node{m.x, d.dy}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
			l.Emit(backend.ConvGradFilter{Geom: g, F: f, X: in[0].Operand(), DY: in[1].Operand(), DW: out.Operand()})
			return nil
		}}
	}
	for _, d := range m.input {
		fu.roots[d.node] = rewrite{inputs: []*G.Node{d.dy, m.w}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
			l.Emit(backend.ConvGradInput{Geom: g, F: f, DY: in[0].Operand(), W: in[1].Operand(), DX: out.Operand()})
			return nil
		}}
	}
	return fu
}

// matchConv matches the pattern at y, the forward output.
func (l *Lowering) matchConv(y *G.Node, users map[*G.Node][]*G.Node) (convMatch, bool) {
	cm, patch, ok := l.matchConvForward(y)
	if !ok {
		return convMatch{}, false
	}
	// The gradients: each product of a dc with the patches.
	for _, dw := range users[patch] {
		if dw == cm.inner[1] || !isProduct(dw, true, false) || l.arg(dw, 1) != patch {
			continue
		}
		dc := l.arg(dw, 0)
		tr := l.arg(dc, 0)
		if !isOp(dc, gorgoniaop.ReshapeOp) || !isTranspose(tr, 0, 2, 3, 1) {
			continue
		}
		dy := l.arg(tr, 0)
		if !dy.Shape().Eq(y.Shape()) {
			continue
		}
		cm.filter = append(cm.filter, convGrad{dw, dy})
		cm.inner = append(cm.inner, dc, tr)
		l.matchConvInputGrads(&cm, dw, dc, dy, users)
	}
	return cm, true
}

// arg returns argument i of n, nil where it has none.
func (l *Lowering) arg(n *G.Node, i int) *G.Node {
	if ch := l.Children(n); i < len(ch) {
		return ch[i]
	}
	return nil
}

// matchConvForward matches y = transpose(reshape(reshape(im2col(x)) w^T)),
// the forward pass of gorgonia.Conv2d, and returns the match without its
// gradients, and the patches' node, which the filter's gradients read.
func (l *Lowering) matchConvForward(y *G.Node) (convMatch, *G.Node, bool) {
	if !isTranspose(y, 0, 3, 1, 2) {
		return convMatch{}, nil, false
	}
	r1 := l.arg(y, 0)
	if !isOp(r1, gorgoniaop.ReshapeOp) {
		return convMatch{}, nil, false
	}
	m := l.arg(r1, 0)
	if !isProduct(m, false, true) {
		return convMatch{}, nil, false
	}
	patch, w := l.arg(m, 0), l.arg(m, 1)
	if !isOp(patch, gorgoniaop.ReshapeOp) {
		return convMatch{}, nil, false
	}
	im := l.arg(patch, 0)
	if !isOp(im, gorgoniaop.Im2colOp) {
		return convMatch{}, nil, false
	}
	x := l.arg(im, 0)
	g, err := gorgoniaop.ConvGeomOf(im.Op(), x.Shape())
	if err != nil || !gorgoniaop.ColShape(g).Eq(im.Shape()) {
		return convMatch{}, nil, false
	}
	ws := w.Shape()
	if len(ws) != 2 || ws[1] != g.Patch() {
		return convMatch{}, nil, false
	}
	f := ws[0]
	oh, ow := g.Out()
	if !y.Shape().Eq(tensor.Shape{g.B, f, oh, ow}) {
		return convMatch{}, nil, false
	}
	return convMatch{g: g, f: f, x: x, w: w, y: y, inner: []*G.Node{r1, m, patch, im}}, patch, true
}

// matchConvInputGrads adds to cm the gradients of the input that dc (the
// filter's gradient dw's other factor, from dy) feeds: dc w, reshaped, then
// col2im of cm's geometry.
func (l *Lowering) matchConvInputGrads(cm *convMatch, dw, dc, dy *G.Node, users map[*G.Node][]*G.Node) {
	for _, dp := range users[dc] {
		if dp == dw || !isProduct(dp, false, false) || l.arg(dp, 1) != cm.w || len(users[dp]) != 1 {
			continue
		}
		r2 := users[dp][0]
		if !isOp(r2, gorgoniaop.ReshapeOp) || len(users[r2]) != 1 {
			continue
		}
		ci := users[r2][0]
		if !isOp(ci, gorgoniaop.Col2imOp) {
			continue
		}
		if cg, err := gorgoniaop.ConvGeomOf(ci.Op(), ci.Shape()); err != nil || cg != cm.g {
			continue
		}
		cm.input = append(cm.input, convGrad{ci, dy})
		cm.inner = append(cm.inner, dp, r2)
	}
}

// isBinary reports whether n is the elementwise op sym (gorgonia's symbol:
// "⊙", ">=") returning values of its arguments' type.
func isBinary(n *G.Node, sym gorgoniaop.BinaryFunc) bool {
	if !isOp(n, gorgoniaop.ElemBinOp) {
		return false
	}
	same, err := gorgoniaop.BoolField(n.Op(), "retSame")
	return gorgoniaop.BinaryOf(n.Op()) == sym && (err == nil && same || sym == gorgoniaop.Mul)
}

// isZero reports whether n is a constant scalar 0.
func isZero(n *G.Node) bool {
	if !isOp(n, gorgoniaop.ConstantScalar) {
		return false
	}
	v, err := HostData(n)
	if err != nil {
		return false
	}
	switch d := v.(type) {
	case []float32:
		return len(d) == 1 && d[0] == 0
	case []float64:
		return len(d) == 1 && d[0] == 0
	}
	return false
}

// rectifyPoolFusions finds max pooling after gorgonia.Rectify, which builds
// a = x ⊙ m with m = (x >= 0), and their gradients, gorgonia.Grad's
// dx = m ⊙ maxPoolDiff(a, p, dp): the pooling p and dx become one
// MaxPool and one MaxPoolGrad of x with Rectify set, the mask m and the
// rectified a never written.
func (l *Lowering) rectifyPoolFusions(needed []*G.Node, users map[*G.Node][]*G.Node) []fusion {
	var out []fusion
	for _, p := range needed {
		if !isOp(p, gorgoniaop.MaxPoolOp) {
			continue
		}
		a := l.Children(p)[0]
		if !isBinary(a, gorgoniaop.Mul) {
			continue
		}
		ach := l.Children(a)
		x, m := ach[0], ach[1]
		if isBinary(x, gorgoniaop.Gte) {
			x, m = m, x
		}
		if !isBinary(m, gorgoniaop.Gte) || l.Children(m)[0] != x || !isZero(l.Children(m)[1]) {
			continue
		}
		g, err := gorgoniaop.PoolGeomOf(p.Op(), x.Shape(), p.Shape())
		if err != nil {
			continue
		}
		f := fusion{roots: map[*G.Node]rewrite{p: {inputs: []*G.Node{x}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
			l.Emit(backend.MaxPool{Geom: g, Rectify: true, X: in[0].Operand(), Y: out.Operand()})
			return nil
		}}}, inner: []*G.Node{a, m}}
		for _, d := range users[a] {
			if !isOp(d, gorgoniaop.MaxPoolDiffOp) || len(users[d]) != 1 {
				continue
			}
			dch := l.Children(d)
			dx := users[d][0]
			if len(dch) != 3 || dch[0] != a || dch[1] != p || !isBinary(dx, gorgoniaop.Mul) || !slices.Contains(l.Children(dx), m) {
				continue
			}
			f.roots[dx] = rewrite{inputs: []*G.Node{x, p, dch[2]}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
				l.Emit(backend.MaxPoolGrad{Geom: g, Rectify: true, X: in[0].Operand(), Y: in[1].Operand(), DY: in[2].Operand(), DX: out.Operand()})
				return nil
			}}
			f.inner = append(f.inner, d)
		}
		out = append(out, f)
	}
	return out
}
