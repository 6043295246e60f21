package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/internal/gradcheck"
	"github.com/orthonet/orthonet/manifold"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 5)) }

func input(g *G.ExprGraph, name string, rng *rand.Rand, shape ...int) *G.Node {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))))
}

func scalar(n *G.Node) float64 {
	switch v := n.Value().Data().(type) {
	case float64:
		return v
	case float32:
		return float64(v)
	}
	return math.NaN()
}

// checkGrad compares Gorgonia's gradient of loss with respect to each node
// of wrt against central differences of the loss, entry by entry.
func checkGrad(t *testing.T, g *G.ExprGraph, loss *G.Node, wrt ...*G.Node) {
	t.Helper()
	if err := gradcheck.Check(g, loss, 1e-6, 1e-6, wrt...); err != nil {
		t.Fatal(err)
	}
}

func TestLinearGradient(t *testing.T) {
	for _, c := range []struct {
		ortho, bias bool
		act         fused.Activation
	}{
		{false, true, fused.Identity}, {true, true, fused.Identity}, {false, false, fused.Identity},
		{true, true, fused.ReLU}, {false, false, fused.ReLU},
		{false, true, fused.GELUTanh}, {true, false, fused.GELUTanh},
	} {
		t.Run(fmt.Sprintf("ortho=%v,bias=%v,%v", c.ortho, c.bias, c.act), func(t *testing.T) {
			g := G.NewGraph()
			rng := newRNG(1)
			x := input(g, "x", rng, 4, 6)
			var l *Linear
			var err error
			if c.ortho {
				l, err = NewOrthoLinear(g, "fc", 6, 3, tensor.Float64, c.bias, rng)
			} else {
				l, err = NewLinear(g, "fc", 6, 3, tensor.Float64, c.bias, rng)
			}
			if err != nil {
				t.Fatal(err)
			}
			wrt := G.Nodes{x, l.W.Node}
			if c.bias {
				// Give the zero-initialised orthogonal bias a value that matters.
				b := l.B.Node.Value().Data().([]float64)
				for i := range b {
					b[i] = 0.1 * float64(i+1)
				}
				wrt = append(wrt, l.B.Node)
			}
			y := G.Must(l.ForwardAct(x, c.act))
			lin := G.Must(l.Forward(x))
			loss := G.Must(G.Sum(G.Must(G.Tanh(y))))
			var yv, linv G.Value
			G.Read(y, &yv)
			G.Read(lin, &linv)
			checkGrad(t, g, loss, wrt...)
			// y is the activation of the plain layer's output.
			f := map[fused.Activation]func(float64) float64{
				fused.Identity: func(z float64) float64 { return z },
				fused.ReLU:     func(z float64) float64 { return math.Max(z, 0) },
				fused.GELUTanh: func(z float64) float64 {
					return z / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(z+0.044715*z*z*z)))
				},
			}[c.act]
			ys, zs := yv.Data().([]float64), linv.Data().([]float64)
			for i, z := range zs {
				if math.Abs(ys[i]-f(z)) > 1e-12 {
					t.Fatalf("entry %d: %g, want %v(%g) = %g", i, ys[i], c.act, z, f(z))
				}
			}
		})
	}
}

func TestOrthoLinear(t *testing.T) {
	g := G.NewGraph()
	l, err := NewOrthoLinear(g, "q", 16, 16, tensor.Float32, false, newRNG(2))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := manifold.NewStiefel[float32](16, 16)
	if f := st.Feasibility(l.W.Node.Value().Data().([]float32)); f > 1e-5 {
		t.Errorf("initial ||W^T W - I|| = %g", f)
	}
	ps := l.Params()
	if len(ps) != 1 || ps[0].Manifold != manifold.Kind(manifold.StiefelKind{}) {
		t.Errorf("orthogonal layer's params %+v, want one on the Stiefel manifold", ps)
	}
	plain, _ := NewLinear(g, "p", 4, 4, tensor.Float64, true, newRNG(2))
	for _, p := range plain.Params() {
		if p.Constrained() {
			t.Error("a plain layer's parameter is marked constrained")
		}
	}
	// A wide orthogonal layer (4 -> 8) starts with orthonormal rows.
	up, err := NewOrthoLinear(g, "up", 4, 8, tensor.Float64, false, newRNG(2))
	if err != nil {
		t.Fatal(err)
	}
	w := up.W.Node.Value().Data().([]float64)
	wt := make([]float64, 32)
	for r := 0; r < 4; r++ {
		for c := 0; c < 8; c++ {
			wt[c*4+r] = w[r*8+c]
		}
	}
	st8, _ := manifold.NewStiefel[float64](8, 4)
	if f := st8.Feasibility(wt); f > 1e-12 || up.W.Manifold != manifold.Kind(manifold.StiefelKind{}) {
		t.Errorf("wide orthogonal layer: ||W W^T - I|| = %g, manifold %v", f, up.W.Manifold)
	}
	if _, err := NewOrthoLinear(g, "zero", 0, 8, tensor.Float64, false, newRNG(2)); err == nil || !strings.Contains(err.Error(), "sizes must be positive") {
		t.Errorf("0 -> 8 orthogonal layer: error %v", err)
	}
	if _, err := NewLinear(g, "bad", 4, 4, tensor.Int, false, newRNG(2)); err == nil {
		t.Error("NewLinear accepted an int element type")
	}
}

func TestGELU(t *testing.T) {
	g := G.NewGraph()
	rng := newRNG(3)
	x := input(g, "x", rng, 3, 5)
	c := input(g, "c", rng, 3, 5)
	y := G.Must(GELU(x))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, c))))
	checkGrad(t, g, loss, x)
	// The tanh form stays within 1e-3 of the exact x Phi(x).
	xs := x.Value().Data().([]float64)
	ys := y.Value().Data().([]float64)
	for i, v := range xs {
		exact := v * 0.5 * (1 + math.Erf(v/math.Sqrt2))
		if math.Abs(ys[i]-exact) > 1e-3 {
			t.Errorf("GELU(%g) = %g, exact %g", v, ys[i], exact)
		}
	}
}

func TestCrossEntropy(t *testing.T) {
	g := G.NewGraph()
	rng := newRNG(4)
	logits := input(g, "logits", rng, 4, 3)
	labels := []int{2, 0, 1, 2}
	oh := make([]float64, 12)
	if err := OneHot(oh, labels, 3); err != nil {
		t.Fatal(err)
	}
	onehot := G.NewTensor(g, tensor.Float64, 2, G.WithShape(4, 3), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(4, 3), tensor.WithBacking(oh))))
	loss := G.Must(CrossEntropy(logits, onehot))
	checkGrad(t, g, loss, logits)
	// The value is the mean of log-sum-exp minus the labelled logit.
	z := logits.Value().Data().([]float64)
	var want float64
	for i, y := range labels {
		row := z[i*3 : i*3+3]
		m := math.Max(row[0], math.Max(row[1], row[2]))
		lse := m + math.Log(math.Exp(row[0]-m)+math.Exp(row[1]-m)+math.Exp(row[2]-m))
		want += (lse - row[y]) / 4
	}
	if got := scalar(loss); math.Abs(got-want) > 1e-12 {
		t.Errorf("cross-entropy %g, want %g", got, want)
	}
	// Large logits whose row maximum is in column 0 of a later row: the
	// result must stay finite (tensor v0.9.23's softmax takes the first
	// element of the whole array, not of the row, as the shift).
	g2 := G.NewGraph()
	big := []float64{0, 1, 2, 900, -5, 3}
	bl := G.NewMatrix(g2, tensor.Float64, G.WithShape(2, 3), G.WithName("big"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(big))))
	by := G.NewMatrix(g2, tensor.Float64, G.WithShape(2, 3), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0, 0, 1, 1, 0, 0}))))
	bloss := G.Must(CrossEntropy(bl, by))
	vm := G.NewTapeMachine(g2)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	wantBig := ((math.Log(math.Exp(0)+math.Exp(1)+math.Exp(2)) - 2) + 0) / 2 // second row: log-sum-exp = 900
	if got := scalar(bloss); math.IsNaN(got) || math.IsInf(got, 0) || math.Abs(got-wantBig) > 1e-9 {
		t.Errorf("cross-entropy of large logits = %g, want %g", got, wantBig)
	}
	vm.Close()

	bad := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 2), G.WithName("bad"))
	if _, err := CrossEntropy(logits, bad); err == nil || !strings.Contains(err.Error(), "logits (4, 3) but one-hot labels (4, 2)") {
		t.Errorf("shape mismatch: error %v", err)
	}
}

func TestAccuracyAndOneHot(t *testing.T) {
	// The last row ties its first two entries: the first counts.
	logits := []float32{0.1, 0.9, 0.0, 2, 1, 0, 0, 0, 5, 4, 4, 1}
	for _, tc := range []struct {
		labels  []int
		correct int
	}{{[]int{1, 0, 2, 0}, 4}, {[]int{0, 0, 2, 1}, 2}, {[]int{2, 1, 0, 2}, 0}} {
		c, err := Correct(logits, tc.labels, 3)
		if err != nil || c != tc.correct {
			t.Errorf("Correct(%v) = %d, %v; want %d", tc.labels, c, err, tc.correct)
		}
		want := float64(tc.correct) / 4
		if got, err := Accuracy(logits, tc.labels, 3); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("Accuracy(%v) = %g, %v; want %g", tc.labels, got, err, want)
		}
	}
	if _, err := Accuracy(logits, []int{1, 2}, 3); err == nil {
		t.Error("Accuracy accepted mismatched lengths")
	}
	if _, err := Correct(logits, nil, 3); err == nil {
		t.Error("Correct accepted no labels")
	}
	dst := make([]float32, 6)
	if err := OneHot(dst, []int{1, 3}, 3); err == nil || !strings.Contains(err.Error(), "label 3 of example 1") {
		t.Errorf("OneHot out of range: error %v", err)
	}
}

func TestCrossEntropyLoss(t *testing.T) {
	rng := newRNG(3)
	const batch, classes = 7, 5
	z := make([]float64, batch*classes)
	for i := range z {
		z[i] = 4 * rng.NormFloat64()
	}
	labels := make([]int, batch)
	for i := range labels {
		labels[i] = rng.IntN(classes)
	}
	var want float64 // the unshifted formula, fine at these magnitudes
	for i, y := range labels {
		var se float64
		for _, v := range z[i*classes : (i+1)*classes] {
			se += math.Exp(v)
		}
		want += (math.Log(se) - z[i*classes+y]) / batch
	}
	z32 := make([]float32, len(z))
	for i, v := range z {
		z32[i] = float32(v)
	}
	if got, err := CrossEntropyLoss(z, labels, classes); err != nil || math.Abs(got-want) > 1e-12 {
		t.Errorf("float64: %v, %v; want %v", got, err, want)
	}
	if got, err := CrossEntropyLoss(z32, labels, classes); err != nil || math.Abs(got-want) > 1e-5 {
		t.Errorf("float32: %v, %v; want %v", got, err, want)
	}
	if got, err := CrossEntropyLoss(make([]float32, batch*classes), labels, classes); err != nil || math.Abs(got-math.Log(classes)) > 1e-12 {
		t.Errorf("equal logits: %v, %v; want log %d = %v", got, err, classes, math.Log(classes))
	}
	// Offsets of 1e4 overflow exp in float64 without the shift; quarters keep
	// the shifted float32 values exact.
	small := []float32{0.25, -1.5, 2, 0.75, -0.5, 1.25}
	huge := make([]float32, len(small))
	for i, v := range small {
		huge[i] = v + 1e4
	}
	a, errA := CrossEntropyLoss(small, []int{2, 0}, 3)
	b, errB := CrossEntropyLoss(huge, []int{2, 0}, 3)
	if errA != nil || errB != nil || math.IsInf(b, 0) || math.IsNaN(b) || math.Abs(a-b) > 1e-12 {
		t.Errorf("shifted by 1e4: %v (%v), want %v (%v)", b, errB, a, errA)
	}
	for _, tc := range []struct {
		name    string
		logits  []float64
		labels  []int
		classes int
		want    string
	}{
		{"lengths", make([]float64, 5), []int{0, 1}, 3, "5 logits for 2 labels of 3 classes"},
		{"no labels", nil, nil, 3, "0 logits for 0 labels"},
		{"no classes", nil, []int{0}, 0, "0 logits for 1 labels of 0 classes"},
		{"label too large", make([]float64, 6), []int{0, 3}, 3, "label 3 of example 1 is not in [0, 3)"},
		{"negative label", make([]float64, 6), []int{-1, 0}, 3, "label -1 of example 0"},
	} {
		if _, err := CrossEntropyLoss(tc.logits, tc.labels, tc.classes); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestLayerNorm(t *testing.T) {
	g := G.NewGraph()
	rng := newRNG(6)
	x := input(g, "x", rng, 3, 5)
	ln, err := NewLayerNorm(g, "ln", 5, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	gm := ln.Gamma.Node.Value().Data().([]float64)
	bt := ln.Beta.Node.Value().Data().([]float64)
	for i := range gm {
		gm[i], bt[i] = 1+0.1*float64(i), 0.05*float64(i)
	}
	y := G.Must(ln.Forward(x))
	c := input(g, "c", rng, 3, 5)
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Tanh(y)), c))))
	var yv G.Value
	G.Read(y, &yv) // a copy: a GPU run reuses y's own buffer in the backward pass
	checkGrad(t, g, loss, x, ln.Gamma.Node, ln.Beta.Node)
	// Each row of (y - beta) / gamma has mean 0 and variance 1 - eps/(var+eps).
	ys := yv.Data().([]float64)
	for r := 0; r < 3; r++ {
		var m, v float64
		for j := 0; j < 5; j++ {
			m += (ys[r*5+j] - bt[j]) / gm[j] / 5
		}
		for j := 0; j < 5; j++ {
			d := (ys[r*5+j]-bt[j])/gm[j] - m
			v += d * d / 5
		}
		if math.Abs(m) > 1e-12 || math.Abs(v-1) > 1e-4 {
			t.Errorf("row %d: mean %g, variance %g", r, m, v)
		}
	}
	if _, err := ln.Forward(input(g, "wide", rng, 3, 6)); err == nil {
		t.Error("LayerNorm(5) accepted 6 features")
	}
}

func TestAttentionGradient(t *testing.T) {
	g := G.NewGraph()
	rng := newRNG(7)
	x := input(g, "x", rng, 6, 4) // 2 sequences of 3 tokens
	a, err := NewAttention(g, "attn", 4, 2, tensor.Float64, rng)
	if err != nil {
		t.Fatal(err)
	}
	y := G.Must(a.Forward(x, 3))
	if !y.Shape().Eq(tensor.Shape{6, 4}) {
		t.Fatalf("output shape %v", y.Shape())
	}
	c := input(g, "c", rng, 6, 4)
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, c))))
	checkGrad(t, g, loss, x, a.Wq.Node, a.Wk.Node, a.Wv.Node, a.Out.W.Node, a.Out.B.Node)

	// The value against plain loops: head j uses features j*dh .. j*dh+dh-1.
	xs := x.Value().Data().([]float64)
	mat := func(n *G.Node) []float64 { return n.Value().Data().([]float64) }
	proj := func(w []float64) []float64 { // (6, 4) = x (6, 4) times w (4, 4)
		o := make([]float64, 24)
		for r := 0; r < 6; r++ {
			for c := 0; c < 4; c++ {
				for k := 0; k < 4; k++ {
					o[r*4+c] += xs[r*4+k] * w[k*4+c]
				}
			}
		}
		return o
	}
	q, k, v := proj(mat(a.Wq.Node)), proj(mat(a.Wk.Node)), proj(mat(a.Wv.Node))
	ctx := make([]float64, 24)
	for b := 0; b < 2; b++ {
		for hd := 0; hd < 2; hd++ {
			for i := 0; i < 3; i++ {
				var sc [3]float64
				var z float64
				for j := 0; j < 3; j++ {
					for f := 0; f < 2; f++ {
						sc[j] += q[(b*3+i)*4+hd*2+f] * k[(b*3+j)*4+hd*2+f] / math.Sqrt2
					}
					sc[j] = math.Exp(sc[j])
					z += sc[j]
				}
				for j := 0; j < 3; j++ {
					for f := 0; f < 2; f++ {
						ctx[(b*3+i)*4+hd*2+f] += sc[j] / z * v[(b*3+j)*4+hd*2+f]
					}
				}
			}
		}
	}
	wo, bo, ys := mat(a.Out.W.Node), mat(a.Out.B.Node), y.Value().Data().([]float64)
	for r := 0; r < 6; r++ {
		for c := 0; c < 4; c++ {
			want := bo[c]
			for kk := 0; kk < 4; kk++ {
				want += ctx[r*4+kk] * wo[kk*4+c]
			}
			if math.Abs(ys[r*4+c]-want) > 1e-12 {
				t.Fatalf("output [%d,%d] = %g, loops give %g", r, c, ys[r*4+c], want)
			}
		}
	}
	marked := 0
	for _, p := range a.Params() {
		if p.Constrained() {
			marked++
		}
	}
	if marked != 3 {
		t.Errorf("%d marked weights, want Wq, Wk, Wv", marked)
	}
	if _, err := NewAttention(g, "bad", 6, 4, tensor.Float64, rng); err == nil {
		t.Error("4 heads over 6 features accepted")
	}
	if _, err := a.Forward(x, 4); err == nil || !strings.Contains(err.Error(), "for 4 tokens") {
		t.Errorf("6 rows as sequences of 4 tokens: error %v", err)
	}
}

func TestDropout(t *testing.T) {
	g := G.NewGraph()
	rng := newRNG(8)
	x := input(g, "x", rng, 40, 50)
	d, err := NewDropout(0.25)
	if err != nil {
		t.Fatal(err)
	}
	y := G.Must(d.Apply(x))
	d.Fill(newRNG(9))
	c := input(g, "c", rng, 40, 50)
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, c))))
	checkGrad(t, g, loss, x)
	// About a quarter of the mask is zero, the rest 4/3; the same seed
	// draws the same mask.
	m := d.Masks()[0].Value().Data().([]float64)
	zeros := 0
	for _, v := range m {
		switch v {
		case 0:
			zeros++
		case 4.0 / 3:
		default:
			t.Fatalf("mask entry %g", v)
		}
	}
	if f := float64(zeros) / float64(len(m)); math.Abs(f-0.25) > 0.04 {
		t.Errorf("dropped fraction %.3f, want 0.25", f)
	}
	first := append([]float64(nil), m...)
	d.Fill(newRNG(9))
	for i := range m {
		if m[i] != first[i] {
			t.Fatal("the same seed drew another mask")
		}
	}
	if _, err := NewDropout(1); err == nil {
		t.Error("dropout 1 accepted")
	}
}
