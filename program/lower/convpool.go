package lower

import (
	"fmt"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/gorgoniaop"
)

// The fusion of a convolution block: gorgonia.Conv2d, a channel bias added
// by gorgonia.BroadcastAdd (as nn.Conv2d adds it), gorgonia.Rectify,
// MaxPool2D and gorgonia.Dropout (the bias and the dropout optional), and
// their gradients, into backend.ConvPool and its gradient kernels.

// convPoolFusions finds the convolution blocks. Over gorgonia.Conv2d's
// output y (convMatch) they build
//
//	z = y + repeat(b)   (the bias b, shaped (1, F, 1, 1), repeated along axes 0, 2, 3; or z = y)
//	a = z ⊙ (z >= 0)    (gorgonia.Rectify)
//	p = maxPool(a)
//	l = dropout(p)      (or of reshape(p); or none)
//
// and gorgonia.Grad, from the gradient dl of l (or dp of p),
//
//	dp = dropoutDiff(p, l, dl)   (or reshape(dropoutDiff(reshape(p), l, dl)))
//	dz = (z >= 0) ⊙ maxPoolDiff(a, p, dp)
//	db = reshape(Σ over axes 0, 2, 3 of dz)
//
// with dz the output gradient of the convolution's gradients. They become
// one ConvPool (inputs x, W, b) whose Arg records the windows' elements,
// and one ConvPoolGradFilter, ConvPoolGradInput and ConvPoolGradBias each
// (from dl and Arg): the convolution's output, its rectified and pooled
// values and their gradients are never written whole. Each block is
// offered with its dropout and, should that not be taken (p has another
// user), without.
func (l *Lowering) convPoolFusions(needed []*G.Node, users map[*G.Node][]*G.Node) []fusion {
	var out []fusion
	for _, p := range needed {
		if !isOp(p, gorgoniaop.MaxPoolOp) {
			continue
		}
		for _, u := range users[p] {
			// The dropout, or a reshape and the dropout (a flattened
			// block's).
			if isOp(u, gorgoniaop.DropoutOp) {
				if f, ok := l.convPoolFusion(p, nil, u, users); ok {
					out = append(out, f)
				}
			}
			if isOp(u, gorgoniaop.ReshapeOp) {
				for _, drop := range users[u] {
					if !isOp(drop, gorgoniaop.DropoutOp) {
						continue
					}
					if f, ok := l.convPoolFusion(p, u, drop, users); ok {
						out = append(out, f)
					}
				}
			}
		}
		if f, ok := l.convPoolFusion(p, nil, nil, users); ok {
			out = append(out, f)
		}
	}
	return out
}

// rectified matches a = x ⊙ (x >= 0), gorgonia.Rectify, returning x and
// the mask.
func (l *Lowering) rectified(a *G.Node) (x, mask *G.Node, ok bool) {
	if !isBinary(a, gorgoniaop.Mul) {
		return nil, nil, false
	}
	ch := l.Children(a)
	x, mask = ch[0], ch[1]
	if isBinary(x, gorgoniaop.Gte) {
		x, mask = mask, x
	}
	if !isBinary(mask, gorgoniaop.Gte) || l.Children(mask)[0] != x || !isZero(l.Children(mask)[1]) {
		return nil, nil, false
	}
	return x, mask, true
}

// channelBias matches z = y + repeat(b) (either order), b of shape
// (1, F, 1, 1) for y of shape (B, F, H, W), repeated by repeatOps whose
// counts are sizeOps. It returns y, b and the nodes in between.
func (l *Lowering) channelBias(z *G.Node) (y, b *G.Node, inner []*G.Node, ok bool) {
	if !isOp(z, gorgoniaop.ElemBinOp) || !strings.HasPrefix(fmt.Sprint(z.Op()), "+ ") {
		return nil, nil, nil, false
	}
	ch := l.Children(z)
	for i := range 2 {
		y, r := ch[i], ch[1-i]
		s := y.Shape()
		if len(s) != 4 || !r.Shape().Eq(s) || !isOp(r, gorgoniaop.RepeatOp) {
			continue
		}
		var in []*G.Node
		for isOp(r, gorgoniaop.RepeatOp) {
			rc := l.Children(r)
			for _, n := range rc[1:] {
				if !isOp(n, gorgoniaop.SizeOp) {
					return nil, nil, nil, false
				}
			}
			in = append(in, r)
			in = append(in, rc[1:]...)
			r = rc[0]
		}
		if bs := r.Shape(); len(bs) == 4 && bs[0] == 1 && bs[1] == s[1] && bs[2] == 1 && bs[3] == 1 {
			return y, r, in, true
		}
	}
	return nil, nil, nil, false
}

// channelSums returns, for the gradient dz of a biased convolution output
// (B, F, H, W), the chain of sumOps from dz that leaves its axis 1 alone,
// with the reshapes after it: the chain's last node (the bias's gradient)
// and the nodes before it.
func (l *Lowering) channelSums(dz *G.Node, users map[*G.Node][]*G.Node) (root *G.Node, inner []*G.Node, ok bool) {
	for _, s := range users[dz] {
		if !isOp(s, gorgoniaop.SumOp) {
			continue
		}
		axes := []int{0, 1, 2, 3} // dz's axes that the node still has
		n := s
		var chain []*G.Node
		for isOp(n, gorgoniaop.SumOp) {
			along, err := gorgoniaop.IntsField(n.Op(), "along")
			if err != nil {
				return nil, nil, false
			}
			for _, a := range slices.Backward(slices.Sorted(slices.Values(along))) {
				if a < 0 || a >= len(axes) {
					return nil, nil, false
				}
				axes = slices.Delete(axes, a, a+1)
			}
			chain = append(chain, n)
			if len(axes) == 1 || len(users[n]) != 1 {
				break
			}
			n = users[n][0]
		}
		if !slices.Equal(axes, []int{1}) {
			continue
		}
		last := chain[len(chain)-1]
		for len(users[last]) == 1 && isOp(users[last][0], gorgoniaop.ReshapeOp) {
			chain = append(chain, users[last][0])
			last = users[last][0]
		}
		return last, chain[:len(chain)-1], true
	}
	return nil, nil, false
}

// convPoolMatch is a convolution block that convPoolFusion matched: its
// convolution, bias, ReLU, pooling and dropout, and the nodes the fused
// kernels replace.
type convPoolMatch struct {
	cm     convMatch
	bias   *G.Node // nil: none
	pg     backend.PoolGeom
	dropP  float64
	l      *G.Node // the dropout, nil: none
	fwd    *G.Node // the block's output
	inner  []*G.Node
	dout   *G.Node // the gradient of the block's output, nil: none
	biasDB *G.Node // the bias's gradient, nil: none
}

// convPoolFusion matches the block whose max pooling is p, with the
// dropout drop after it (nil: none), of p or of r, a reshape of p (nil:
// none).
func (l *Lowering) convPoolFusion(p, r, drop *G.Node, users map[*G.Node][]*G.Node) (fusion, bool) {
	m, a, mask, ok := l.convPoolForward(p, r, drop, users)
	if !ok {
		return fusion{}, false
	}
	dz := l.convPoolOutGrad(&m, a, mask, p, r, users)
	for _, d := range append(slices.Clone(m.cm.filter), m.cm.input...) {
		if d.dy != dz {
			return fusion{}, false // a gradient of the convolution's output from elsewhere
		}
	}
	if m.bias != nil && dz != nil {
		if root, sums, ok := l.channelSums(dz, users); ok { // none where b is not a parameter
			m.biasDB = root
			m.inner = append(m.inner, sums...)
		}
	}
	return m.fusion(), true
}

// convPoolForward matches the forward pass of the block whose pooling is
// p, of a, the ReLU of the convolution (plus a bias) by mask.
func (l *Lowering) convPoolForward(p, r, drop *G.Node, users map[*G.Node][]*G.Node) (m convPoolMatch, a, mask *G.Node, ok bool) {
	a = l.Children(p)[0]
	z, mask, ok := l.rectified(a)
	if !ok {
		return m, nil, nil, false
	}
	y, bias, biasInner, biased := l.channelBias(z)
	if !biased {
		y = z
	}
	cm, ok := l.matchConv(y, users)
	if !ok {
		return m, nil, nil, false
	}
	pg, err := gorgoniaop.PoolGeomOf(p.Op(), z.Shape(), p.Shape())
	if err != nil || pg.H*pg.W > 1<<28 {
		return m, nil, nil, false
	}
	m = convPoolMatch{cm: cm, pg: pg, l: drop, fwd: p}
	if biased {
		m.bias = bias
	}
	if drop != nil {
		if m.dropP, err = gorgoniaop.FloatField(drop.Op(), "probability"); err != nil || !(m.dropP >= 0 && m.dropP < 1) {
			return m, nil, nil, false
		}
		if l.cfg.EvalMode {
			m.dropP = 0
		}
		m.fwd = drop
	}
	m.inner = append(slices.Clone(cm.inner), y, a, mask)
	m.inner = append(m.inner, biasInner...)
	if biased {
		m.inner = append(m.inner, z)
	}
	if drop != nil {
		m.inner = append(m.inner, p)
	}
	if r != nil {
		m.inner = append(m.inner, r)
	}
	return m, a, mask, true
}

// convPoolOutGrad finds the pooling's gradient (the gradient of the
// block's output, through the dropout and the reshape r, times the ReLU's
// mask), sets m.dout and returns dz, the gradient of the convolution's
// output (nil: none).
func (l *Lowering) convPoolOutGrad(m *convPoolMatch, a, mask, p, r *G.Node, users map[*G.Node][]*G.Node) *G.Node {
	for _, d := range users[a] {
		if !isOp(d, gorgoniaop.MaxPoolDiffOp) || len(users[d]) != 1 {
			continue
		}
		dch, dx := l.Children(d), users[d][0]
		if len(dch) != 3 || dch[0] != a || dch[1] != p || !isBinary(dx, gorgoniaop.Mul) || !slices.Contains(l.Children(dx), mask) {
			continue
		}
		dp := dch[2]
		var extra []*G.Node
		if r != nil { // reshape(dropoutDiff(r, l, dl))
			if !isOp(dp, gorgoniaop.ReshapeOp) {
				continue
			}
			extra = append(extra, dp)
			dp = l.Children(dp)[0]
		}
		dout := dp
		if m.l != nil {
			// dropoutDiff(p, l, dl), or of r
			pch := l.Children(dp)
			if !isOp(dp, gorgoniaop.DropoutDiffOp) || len(pch) != 3 || pch[0] != p && pch[0] != r || pch[1] != m.l {
				continue
			}
			dout = pch[2]
			extra = append(extra, dp)
		}
		m.dout = dout
		m.inner = append(append(m.inner, extra...), d, dx)
		return dx
	}
	return nil
}

// fusion returns the rewrites of the matched block: ConvPool for its
// output, and a kernel for each gradient, each of which takes the block's
// output as an argument too, so that ConvPool is lowered first.
func (m convPoolMatch) fusion() fusion {
	g, f, pg, dropP, drop := m.cm.g, m.cm.f, m.pg, m.dropP, m.l
	grads := len(m.cm.filter) > 0 || len(m.cm.input) > 0 || m.biasDB != nil
	var arg *Buffer // what ConvPool records for the gradients, lowered first
	argOp := func() backend.Operand { return backend.At(arg, 0) }
	inputs := []*G.Node{m.cm.x, m.cm.w}
	if m.bias != nil {
		inputs = append(inputs, m.bias)
	}
	fu := fusion{roots: map[*G.Node]rewrite{m.fwd: {inputs: inputs, lower: func(l *Lowering, n *G.Node, in []*Value, out *Value) error {
		k := backend.ConvPool{Geom: g, F: f, Pool: pg, X: in[0].Operand(), W: in[1].Operand(), Y: out.Operand()}
		if m.bias != nil {
			k.Bias = in[2].Operand()
		}
		if dropP > 0 {
			k.DropP, k.Seed, k.Stream, k.Step = dropP, l.cfg.DropoutSeed, StreamOf(drop), l.StepOperand()
		}
		if grads {
			arg = l.NewBuffer(backend.Int32, out.Size, false, n.Name()+" arg")
			k.Arg = argOp()
		}
		l.Emit(k)
		return nil
	}}}, inner: m.inner}
	for _, d := range m.cm.filter {
		fu.roots[d.node] = rewrite{inputs: []*G.Node{m.cm.x, m.dout, m.fwd}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
			l.Emit(backend.ConvPoolGradFilter{Geom: g, F: f, Pool: pg, DropP: dropP, X: in[0].Operand(), DY: in[1].Operand(), Arg: argOp(), DW: out.Operand()})
			return nil
		}}
	}
	for _, d := range m.cm.input {
		fu.roots[d.node] = rewrite{inputs: []*G.Node{m.dout, m.cm.w, m.fwd}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
			l.Emit(backend.ConvPoolGradInput{Geom: g, F: f, Pool: pg, DropP: dropP, DY: in[0].Operand(), Arg: argOp(), W: in[1].Operand(), DX: out.Operand()})
			return nil
		}}
	}
	if m.biasDB != nil {
		fu.roots[m.biasDB] = rewrite{inputs: []*G.Node{m.dout, m.fwd}, lower: func(l *Lowering, _ *G.Node, in []*Value, out *Value) error {
			l.Emit(backend.ConvPoolGradBias{Pool: pg, DropP: dropP, DY: in[0].Operand(), Arg: argOp(), DB: out.Operand()})
			return nil
		}}
	}
	return fu
}
