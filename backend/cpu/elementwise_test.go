package cpu_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// specials are inputs at the edges of the elementwise functions' domains.
var specials = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 1e-4, -1e-4, 31, 35, -35, 100, -100,
	math.NaN(), math.Inf(1), math.Inf(-1)}

// elementwiseInput returns n uniform values in [-4, 4) followed by the
// specials.
func elementwiseInput[T num](seed uint64, n int) []T {
	v := uniform[T](rng(seed), n, -4, 4)
	for _, s := range specials {
		v = append(v, T(s))
	}
	return v
}

// geluRef is GELU's tanh form as x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
func geluRef(x float64) float64 {
	return x / (1 + math.Exp(-2*math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// geluDerivRef is the derivative of geluRef.
func geluDerivRef(x float64) float64 {
	c := math.Sqrt(2 / math.Pi)
	s := 1 / (1 + math.Exp(-2*c*(x+0.044715*x*x*x)))
	return s + x*2*c*(1+3*0.044715*x*x)*s*(1-s)
}

// unaryRefs are the unary functions, written independently of the kernels.
var unaryRefs = []struct {
	op      backend.UnaryOp
	f       func(float64) float64
	skipNaN bool // the docs leave f(NaN) open
	// Functions computed with cancellation (math.Log2 near 1, GELU's
	// 1 + tanh, Sin and Cos's reference) are accurate to eps (1 + |x|),
	// not eps |f(x)|, and are not compared at the infinities.
	absolute bool
}{
	{op: backend.Neg, f: func(x float64) float64 { return -x }},
	{op: backend.Abs, f: func(x float64) float64 { return math.Sqrt(x * x) }},
	{op: backend.Sign, f: func(x float64) float64 {
		if x > 0 {
			return 1
		} else if x < 0 {
			return -1
		}
		return x
	}},
	{op: backend.Exp, f: math.Exp},
	{op: backend.Log, f: math.Log},
	{op: backend.Log1p, f: math.Log1p},
	{op: backend.Expm1, f: math.Expm1},
	{op: backend.Sqrt, f: math.Sqrt},
	{op: backend.Square, f: func(x float64) float64 { return math.Pow(x, 2) }},
	{op: backend.Cube, f: func(x float64) float64 { return math.Pow(x, 3) }},
	{op: backend.Tanh, f: math.Tanh},
	{op: backend.Sigmoid, f: func(x float64) float64 {
		if x < 0 {
			return math.Exp(x) / (1 + math.Exp(x))
		}
		return 1 / (1 + math.Exp(-x))
	}},
	{op: backend.Inverse, f: func(x float64) float64 { return 1 / x }},
	{op: backend.InverseSqrt, f: func(x float64) float64 { return 1 / math.Sqrt(x) }},
	{op: backend.Ceil, f: math.Ceil},
	{op: backend.Floor, f: math.Floor},
	{op: backend.ReLU, f: func(x float64) float64 { return math.Max(x, 0) }, skipNaN: true},
	{op: backend.Softplus, f: func(x float64) float64 {
		// log(1 + e^x) = max(x, 0) + log(1 + e^-|x|)
		return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x)))
	}},
	{op: backend.Identity, f: func(x float64) float64 { return x }},
	{op: backend.Sin, f: func(x float64) float64 { return math.Cos(x - math.Pi/2) }, absolute: true},
	{op: backend.Cos, f: func(x float64) float64 { return math.Sin(x + math.Pi/2) }, absolute: true},
	{op: backend.Log2, f: func(x float64) float64 { return math.Log(x) / math.Ln2 }, absolute: true},
	{op: backend.GELU, f: geluRef, absolute: true},
	{op: backend.SiLU, f: func(x float64) float64 {
		if math.IsInf(x, -1) {
			return 0 // the limit
		}
		if x < 0 {
			e := math.Exp(x)
			return x * e / (1 + e)
		}
		return x / (1 + math.Exp(-x))
	}},
}

// TestRefsCoverEveryFunction checks that every UnaryOp and BinaryOp has a
// reference.
func TestRefsCoverEveryFunction(t *testing.T) {
	var unary []backend.UnaryOp
	for _, u := range unaryRefs {
		unary = append(unary, u.op)
	}
	covers(t, backend.UnaryOps(), unary)
	var binary []backend.BinaryOp
	for _, b := range binaryRefs {
		binary = append(binary, b.op)
	}
	covers(t, backend.BinaryOps(), binary)
}

// covers fails t where a function of all (every UnaryOp or BinaryOp) has
// no reference in refs.
func covers[O backend.UnaryOp | backend.BinaryOp](t *testing.T, all, refs []O) {
	t.Helper()
	for _, op := range all {
		if !slices.Contains(refs, op) {
			t.Errorf("no reference for %v", op)
		}
	}
}

func TestMap(t *testing.T) {
	floats(t, testMap[float32], testMap[float64])
}

func testMap[T num](t *testing.T) {
	for ui, u := range unaryRefs {
		for _, c := range []struct {
			n, off  int
			inPlace bool
		}{{257, 3, false}, {1, 0, false}, {7, 1, true}, {65, 0, true}} {
			t.Run(fmt.Sprintf("%v_%d_off%d_inplace%v", u.op, c.n, c.off, c.inPlace), func(t *testing.T) {
				src := elementwiseInput[T](uint64(ui), c.n)
				if c.n < len(specials) {
					src = src[len(src)-c.n:] // specials first
				}
				n := len(src)
				buf := append(make([]T, c.off), src...)
				buf = append(buf, 7)              // one element past the end must stay
				want := make([]float64, len(buf)) // Dst before the map
				if c.inPlace {
					want = wide(buf)
				}
				for i := c.off; i < c.off+n; i++ {
					want[i] = round[T](u.f(float64(buf[i])))
					if u.skipNaN && math.IsNaN(float64(buf[i])) || u.absolute && math.IsInf(float64(buf[i]), 0) {
						want[i] = math.NaN()
					}
				}
				// Square and Cube round after each product in T.
				tol := relTol[T](want, 2)
				if u.absolute {
					for i := c.off; i < c.off+n; i++ {
						tol[i] += 4 * eps[T]() * (1 + math.Abs(float64(buf[i])))
					}
				}
				onEach(t, func(t *testing.T, b *cpu.Backend) []T {
					sb := load(t, b, buf)
					db := sb
					if !c.inPlace {
						db = load(t, b, make([]T, len(buf)))
					}
					run(t, b, backend.Map{Op: u.op, N: n, Src: backend.At(sb, c.off), Dst: backend.At(db, c.off)})
					got := read[T](t, b, db)
					if u.skipNaN || u.absolute {
						for i := c.off; i < c.off+n; i++ {
							if math.IsNaN(want[i]) {
								got[i] = T(math.NaN())
							}
						}
					}
					near(t, "Dst", got, want, tol)
					return got
				})
			})
		}
	}
}

// binaryRefs are the binary functions, written independently of the
// kernels.
var binaryRefs = []struct {
	op backend.BinaryOp
	f  func(x, y float64) float64
	// scale, where set, makes the tolerance 8 eps scale(x, y), for
	// functions computed with cancellation; they are not compared at
	// infinite x.
	scale func(x, y float64) float64
}{
	{backend.Add, func(x, y float64) float64 { return x + y }, nil},
	{backend.Sub, func(x, y float64) float64 { return x + -y }, nil},
	{backend.Mul, func(x, y float64) float64 { return x * y }, nil},
	{backend.Div, func(x, y float64) float64 { return x / y }, nil},
	{backend.Pow, math.Pow, nil},
	{backend.Lt, func(x, y float64) float64 { return b2f(x < y) }, nil},
	{backend.Gt, func(x, y float64) float64 { return b2f(y < x) }, nil},
	{backend.Le, func(x, y float64) float64 { return b2f(x < y || x == y) }, nil},
	{backend.Ge, func(x, y float64) float64 { return b2f(x > y || x == y) }, nil},
	{backend.Eq, func(x, y float64) float64 { return b2f(x == y) }, nil},
	{backend.Ne, func(x, y float64) float64 { return b2f(!(x == y)) }, nil},
	{backend.Max2, func(x, y float64) float64 { return max(x, y) }, nil},
	{backend.Min2, func(x, y float64) float64 { return min(x, y) }, nil},
	{backend.GELUGrad, func(x, y float64) float64 { return y * geluDerivRef(x) },
		func(x, y float64) float64 { return math.Abs(y) * (1 + x*x) }},
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestZip(t *testing.T) {
	floats(t, testZip[float32], testZip[float64])
}

func testZip[T num](t *testing.T) {
	for bi, f := range binaryRefs {
		for _, c := range []struct {
			n                int
			aScalar, bScalar bool
			dst              string // "new", "A" or "B"
		}{
			{257, false, false, "new"}, {257, true, false, "new"}, {257, false, true, "new"},
			{65, false, false, "A"}, {65, false, false, "B"}, {7, true, false, "B"}, {7, false, true, "A"},
			{1, false, false, "new"}, {3, true, true, "new"}, {0, false, false, "new"},
		} {
			name := fmt.Sprintf("%v_%d_scalar%v%v_dst%s", f.op, c.n, c.aScalar, c.bScalar, c.dst)
			t.Run(name, func(t *testing.T) {
				r := rng(uint64(bi))
				// A and B: random values, the specials against each
				// other, and equal pairs for the comparisons.
				a, b := uniform[T](r, c.n, -3, 3), uniform[T](r, c.n, -3, 3)
				for i := 0; i < c.n; i += 5 {
					b[i] = a[i]
				}
				for i, s := range specials {
					if i+1 < c.n {
						a[i+1], b[len(b)-1-i] = T(s), T(s)
					}
				}
				if c.aScalar {
					a = []T{a[1]} // 0: equals some of B
					if c.n > 0 {
						b[c.n/2] = a[0]
					}
				}
				if c.bScalar {
					b = []T{T(math.NaN())}
					if c.n > 7 {
						b = []T{1.5}
					}
				}
				at := func(i int) float64 {
					if c.aScalar {
						return float64(a[0])
					}
					return float64(a[i])
				}
				bt := func(i int) float64 {
					if c.bScalar {
						return float64(b[0])
					}
					return float64(b[i])
				}
				const off = 2
				want := make([]float64, off+c.n+1)
				for i := 0; i < c.n; i++ {
					want[off+i] = round[T](f.f(at(i), bt(i)))
					if f.scale != nil && math.IsInf(at(i), 0) {
						want[off+i] = math.NaN()
					}
				}
				pad := func(v []T) []T { return append(append(make([]T, off), v...), 0) }
				tol := relTol[T](want, 1)
				if f.scale != nil {
					for i := 0; i < c.n; i++ {
						tol[off+i] += 8 * eps[T]() * f.scale(at(i), bt(i))
					}
				}
				onEach(t, func(t *testing.T, be *cpu.Backend) []T {
					ab, bb := load(t, be, pad(a)), load(t, be, pad(b))
					var db backend.Buffer
					switch c.dst {
					case "A":
						db = ab
					case "B":
						db = bb
					default:
						db = load(t, be, make([]T, off+c.n+1))
					}
					run(t, be, backend.Zip{Op: f.op, N: c.n, A: backend.At(ab, off), B: backend.At(bb, off), Dst: backend.At(db, off),
						AScalar: c.aScalar, BScalar: c.bScalar})
					got := read[T](t, be, db)
					if f.scale != nil {
						for i := 0; i < c.n; i++ {
							if math.IsInf(at(i), 0) {
								got[off+i] = T(math.NaN())
							}
						}
					}
					near(t, "Dst", got, want, tol)
					return got
				})
			})
		}
	}
}

func TestReduce(t *testing.T) {
	floats(t, testReduce[float32], testReduce[float64])
}

func testReduce[T num](t *testing.T) {
	shapes := [][3]int{{1, 1, 1}, {3, 7, 1}, {2, 65, 1}, {7, 3, 5}, {3, 257, 2}, {1, 1, 7}, {5, 1, 3}, {2, 4, 65}}
	for si, s := range shapes {
		for _, op := range []backend.ReduceOp{backend.Sum, backend.Max} {
			outer, mid, inner := s[0], s[1], s[2]
			t.Run(fmt.Sprintf("op%d_%dx%dx%d", op, outer, mid, inner), func(t *testing.T) {
				// All negative for Max, so that a kernel starting from 0
				// fails; mixed signs for Sum.
				lo, hi := -2.0, 2.0
				if op == backend.Max {
					lo, hi = -9, -1
				}
				const off = 3
				src := uniform[T](rng(uint64(si)), off+outer*mid*inner, lo, hi)
				want, tol := make([]float64, outer*inner+off+1), make([]float64, outer*inner+off+1)
				want[0], want[off+outer*inner] = 5, 5 // outside the output
				for o := 0; o < outer; o++ {
					for i := 0; i < inner; i++ {
						acc, mag := math.Inf(-1), 0.0
						if op == backend.Sum {
							acc = 0
						}
						for m := 0; m < mid; m++ {
							v := float64(src[off+(o*mid+m)*inner+i])
							if op == backend.Sum {
								acc += v
							} else {
								acc = math.Max(acc, v)
							}
							mag += math.Abs(v)
						}
						want[off+o*inner+i] = round[T](acc)
						if op == backend.Sum {
							tol[off+o*inner+i] = float64(mid+1) * eps[T]() * mag
						}
					}
				}
				onEach(t, func(t *testing.T, b *cpu.Backend) []T {
					dst := make([]T, len(want))
					dst[0], dst[len(dst)-1] = 5, 5
					db := load(t, b, dst)
					run(t, b, backend.Reduce{Op: op, Outer: outer, Mid: mid, Inner: inner,
						Src: backend.At(load(t, b, src), off), Dst: backend.At(db, off)})
					got := read[T](t, b, db)
					near(t, "Dst", got, want, tol)
					return got
				})
			})
		}
	}
}

// softmaxRef returns the softmax (or log-softmax) of x along the middle
// axis of an (outer, axis, inner) array, in float64.
func softmaxRef(x []float64, outer, axis, inner int, log bool) []float64 {
	y := make([]float64, len(x))
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			at := func(j int) int { return (o*axis+j)*inner + i }
			m := math.Inf(-1)
			for j := 0; j < axis; j++ {
				m = math.Max(m, x[at(j)])
			}
			var z float64
			for j := 0; j < axis; j++ {
				z += math.Exp(x[at(j)] - m)
			}
			for j := 0; j < axis; j++ {
				if log {
					y[at(j)] = x[at(j)] - m - math.Log(z)
				} else {
					y[at(j)] = math.Exp(x[at(j)]-m) / z
				}
			}
		}
	}
	return y
}

var softmaxShapes = [][3]int{{1, 1, 1}, {3, 7, 1}, {2, 5, 3}, {7, 65, 2}, {1, 257, 1}, {5, 3, 7}}

// eachSoftmaxCase runs f in a subtest for every shape of softmaxShapes
// (si its index), plain and log, on inputs up to 3 and up to 1e4.
func eachSoftmaxCase(t *testing.T, f func(t *testing.T, si, outer, axis, inner int, log bool, scale float64)) {
	for si, s := range softmaxShapes {
		for _, log := range []bool{false, true} {
			for _, scale := range []float64{3, 1e4} {
				t.Run(fmt.Sprintf("%dx%dx%d_log%v_scale%g", s[0], s[1], s[2], log, scale), func(t *testing.T) {
					f(t, si, s[0], s[1], s[2], log, scale)
				})
			}
		}
	}
}

func TestSoftmax(t *testing.T) {
	floats(t, testSoftmax[float32], testSoftmax[float64])
}

func testSoftmax[T num](t *testing.T) {
	eachSoftmaxCase(t, func(t *testing.T, si, outer, axis, inner int, log bool, scale float64) {
		n := outer * axis * inner
		x := uniform[T](rng(uint64(si)), n, -scale, scale)
		want := softmaxRef(wide(x), outer, axis, inner, log)
		tol := make([]float64, n)
		for i, w := range want {
			want[i] = round[T](w)
			tol[i] = 8 * eps[T]()
			if log {
				tol[i] *= 1 + math.Abs(w)
			}
		}
		onEach(t, func(t *testing.T, b *cpu.Backend) []T {
			db := load(t, b, make([]T, n))
			run(t, b, backend.Softmax{Log: log, Outer: outer, Axis: axis, Inner: inner,
				Src: backend.At(load(t, b, x), 0), Dst: backend.At(db, 0)})
			got := read[T](t, b, db)
			for i, v := range got {
				if math.IsNaN(float64(v)) || !log && math.IsInf(float64(v), 0) {
					t.Fatalf("softmax element %d is %v", i, v)
				}
			}
			near(t, "Dst", got, want, tol)
			return got
		})
	})
}

func TestSoftmaxGrad(t *testing.T) {
	floats(t, testSoftmaxGrad[float32], testSoftmaxGrad[float64])
}

// testSoftmaxGrad checks SoftmaxGrad against its formula, with Y the
// softmax of inputs up to 1e4.
func testSoftmaxGrad[T num](t *testing.T) {
	eachSoftmaxCase(t, func(t *testing.T, si, outer, axis, inner int, log bool, scale float64) {
		n := outer * axis * inner
		r := rng(uint64(si))
		y := make([]T, n)
		for i, v := range softmaxRef(wide(uniform[T](r, n, -scale, scale)), outer, axis, inner, log) {
			y[i] = T(v)
		}
		dy := uniform[T](r, n, -1, 1)
		want, tol := make([]float64, n), make([]float64, n)
		for o := 0; o < outer; o++ {
			for i := 0; i < inner; i++ {
				at := func(j int) int { return (o*axis+j)*inner + i }
				var dot, mag float64
				for j := 0; j < axis; j++ {
					if log {
						dot += float64(dy[at(j)])
						mag += math.Abs(float64(dy[at(j)]))
					} else {
						dot += float64(dy[at(j)]) * float64(y[at(j)])
						mag += math.Abs(float64(dy[at(j)]) * float64(y[at(j)]))
					}
				}
				for j := 0; j < axis; j++ {
					yj, dyj := float64(y[at(j)]), float64(dy[at(j)])
					if log {
						want[at(j)] = dyj - math.Exp(yj)*dot
						tol[at(j)] = 4 * eps[T]() * (math.Abs(dyj) + math.Exp(yj)*mag)
					} else {
						want[at(j)] = yj * (dyj - dot)
						tol[at(j)] = 4 * eps[T]() * yj * (math.Abs(dyj) + mag)
					}
					want[at(j)] = round[T](want[at(j)])
				}
			}
		}
		onEach(t, func(t *testing.T, b *cpu.Backend) []T {
			db := load(t, b, make([]T, n))
			run(t, b, backend.SoftmaxGrad{Log: log, Outer: outer, Axis: axis, Inner: inner,
				Y: backend.At(load(t, b, y), 0), DY: backend.At(load(t, b, dy), 0), DX: backend.At(db, 0)})
			got := read[T](t, b, db)
			for i, v := range got {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("gradient element %d is %v", i, v)
				}
			}
			near(t, "DX", got, want, tol)
			return got
		})
	})
}

// TestSoftmaxGradFiniteDifferences checks that SoftmaxGrad is the
// gradient of the loss sum(DY * Softmax(X)), differentiating the backend's
// own Softmax by central differences.
func TestSoftmaxGradFiniteDifferences(t *testing.T) {
	b := cpu.New(cpu.Options{})
	defer b.Close()
	const outer, axis, inner = 2, 5, 3
	const n = outer * axis * inner
	for _, log := range []bool{false, true} {
		r := rng(7)
		x, u := uniform[float64](r, n, -2, 2), uniform[float64](r, n, -1, 1)
		xb, yb, ub, gb := load(t, b, x), load(t, b, make([]float64, n)), load(t, b, u), load(t, b, make([]float64, n))
		sm, err := b.Prepare(backend.Softmax{Log: log, Outer: outer, Axis: axis, Inner: inner, Src: backend.At(xb, 0), Dst: backend.At(yb, 0)})
		if err != nil {
			t.Fatal(err)
		}
		loss := func(x []float64) float64 {
			if err := b.CopyIn(xb, 0, x); err != nil {
				t.Fatal(err)
			}
			if err := sm(); err != nil {
				t.Fatal(err)
			}
			var l float64
			for i, y := range read[float64](t, b, yb) {
				l += u[i] * y
			}
			return l
		}
		loss(x)
		run(t, b, backend.SoftmaxGrad{Log: log, Outer: outer, Axis: axis, Inner: inner, Y: backend.At(yb, 0), DY: backend.At(ub, 0), DX: backend.At(gb, 0)})
		grad := read[float64](t, b, gb)
		const h = 1e-5
		for i := range x {
			xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
			xp[i] += h
			xm[i] -= h
			fd := (loss(xp) - loss(xm)) / (2 * h)
			if math.Abs(fd-grad[i]) > 1e-8 {
				t.Errorf("log %v: dL/dx[%d] = %.10g, finite difference %.10g", log, i, grad[i], fd)
			}
		}
	}
}

// TestGELUGradFiniteDifferences checks that Zip's GELUGrad is the
// derivative of Map's GELU, by central differences of the backend's GELU.
func TestGELUGradFiniteDifferences(t *testing.T) {
	b := cpu.New(cpu.Options{})
	defer b.Close()
	const n, h = 81, 1e-5
	x := make([]float64, 3*n)
	for i := 0; i < n; i++ {
		v := -8 + 16*float64(i)/(n-1)
		x[i], x[n+i], x[2*n+i] = v, v+h, v-h
	}
	xb, yb := load(t, b, x), load(t, b, make([]float64, 3*n))
	run(t, b, backend.Map{Op: backend.GELU, N: 3 * n, Src: backend.At(xb, 0), Dst: backend.At(yb, 0)})
	y := read[float64](t, b, yb)
	ones, gb := load(t, b, []float64{1}), load(t, b, make([]float64, n))
	run(t, b, backend.Zip{Op: backend.GELUGrad, N: n, A: backend.At(xb, 0), B: backend.At(ones, 0), Dst: backend.At(gb, 0), BScalar: true})
	for i, g := range read[float64](t, b, gb) {
		if fd := (y[n+i] - y[2*n+i]) / (2 * h); math.Abs(fd-g) > 1e-8 {
			t.Errorf("GELU'(%g) = %.10g, finite difference %.10g", x[i], g, fd)
		}
	}
}
