package backend

import (
	"fmt"
	"math"
	"reflect"
)

// The elementwise kernels: a function of one argument (Map), of two (Zip),
// a comparison with Int32 results (Compare) and a constant (Fill).
var _ = []defined{Map{}, Zip{}, Fill{}, Compare{}}

// UnaryOp is an elementwise function of one argument. Its constants and
// CPU definitions (unary_ops.go) and the UNARY_OPS list of kernels.cu are
// generated from one table, ops in gen/table.go. To add one: its line at
// the end of the table (its CPU function, if not from package math, here
// below), go generate ./backend, and a reference for it in backend/cpu's
// elementwise tests.
type UnaryOp uint8

// definition is the CPU definition of an elementwise function: its name,
// its function in each float type (F32 and F64), and its cost relative to
// an addition (for splitting loops).
type definition[F32, F64 any] struct {
	name string
	f32  F32
	f64  F64
	cost int
}

// unary and binary are the definitions of UnaryOps and BinaryOps.
type (
	unary  = definition[func(float32) float32, func(float64) float64]
	binary = definition[func(x, y float32) float32, func(x, y float64) float64]
)

// in returns d's function in float type T, F being its type there.
func in[F any, F32, F64 any](d definition[F32, F64]) F {
	if f, ok := any(d.f32).(F); ok {
		return f
	}
	return any(d.f64).(F)
}

// opName returns the name of function i of defs, or kind(i) when there is
// none.
func opName[F32, F64 any](defs []definition[F32, F64], i int, kind string) string {
	if i > 0 && i < len(defs) {
		return defs[i].name
	}
	return fmt.Sprintf("%s(%d)", kind, i)
}

// inType defines a function computed in the element type.
func inType(name string, f32 func(float32) float32, f64 func(float64) float64) unary {
	return unary{name: name, f32: f32, f64: f64, cost: 1}
}

// viaFloat64 defines a function computed in float64 and rounded once to
// the element type: a math library call.
func viaFloat64(name string, f func(float64) float64) unary {
	return unary{name: name, f32: func(x float32) float32 { return float32(f(float64(x))) }, f64: f, cost: 8}
}

func neg[T Float](x T) T      { return -x }
func square[T Float](x T) T   { return x * x }
func cube[T Float](x T) T     { return x * x * x }
func inverse[T Float](x T) T  { return 1 / x }
func identity[T Float](x T) T { return x }

func relu[T Float](x T) T {
	if x < 0 { // NaN stays NaN, as max(x, 0) in IEEE arithmetic
		return 0
	}
	return x
}

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // 0, -0 and NaN keep themselves
}

// sigmoid is 1/(1 + e^-x).
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// inverseSqrt is 1/sqrt(x).
func inverseSqrt(x float64) float64 { return 1 / math.Sqrt(x) }

func softplus(x float64) float64 {
	if x > 36 { // exp(-x) is below half an ulp of x in float64
		return x
	}
	return math.Log1p(math.Exp(x))
}

// silu is x sigmoid(x), -0 at -Inf (its limit).
func silu(x float64) float64 {
	if x < -1e30 { // below -710, x / (1 + e^-x) is -0 already
		return math.Copysign(0, -1)
	}
	return x / (1 + math.Exp(-x))
}

// geluC is sqrt(2/pi).
var geluC = math.Sqrt(2 / math.Pi)

// gelu is the tanh form of GELU, x/2 (1 + tanh(sqrt(2/pi) (x +
// 0.044715 x^3))).
func gelu(x float64) float64 { return 0.5 * x * (1 + math.Tanh(geluC*(x+0.044715*x*x*x))) }

// geluDeriv is its derivative.
func geluDeriv(x float64) float64 {
	t := math.Tanh(geluC * (x + 0.044715*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t*t)*geluC*(1+3*0.044715*x*x)
}

// String returns the function's name.
func (o UnaryOp) String() string { return opName(unaries[:], int(o), "UnaryOp") }

func (o UnaryOp) valid() bool { return o > 0 && int(o) < len(unaries) }

// Map is Dst[i] = Op(Src[i]) for N elements; Dst may be Src.
type Map struct {
	Op       UnaryOp
	N        int
	Src, Dst Operand
}

// Check checks the operands.
func (k Map) Check() error {
	if !k.Op.valid() {
		return fmt.Errorf("backend: map: unknown function %v", k.Op)
	}
	return checkAll(k, DTypeOf(k.Dst), "source", k.Src, k.N, "destination", k.Dst, k.N)
}

// Host runs the function's CPU definition.
func (k Map) Host(p *Pool) (Func, error) { return onFloats(p, k, mapHost[float32], mapHost[float64]) }

// Device launches on_map, whose function is unary() in kernels.cu.
func (k Map) Device(p Planner) {
	elementwise(p, "on_map", k.N, mapArgs{Op: int(k.Op), N: k.N, Src: k.Src, Dst: k.Dst})
}

func mapHost[T Float](p *Pool, k Map) Func {
	f := in[func(T) T](unaries[k.Op])
	src, dst := hostData[T](k.Src)[:k.N], hostData[T](k.Dst)[:k.N]
	return p.split(k.N, unaries[k.Op].cost, func(lo, hi int) {
		d := dst[lo:hi]
		for i, x := range src[lo:hi] {
			d[i] = f(x)
		}
	}).loop()
}

// BinaryOp is an elementwise function of two arguments. Comparisons give 1
// where they hold and 0 elsewhere, in the operands' type. Its constants and
// CPU definitions (binary_ops.go) and the BINARY_OPS list of kernels.cu are
// generated from one table, gen/table.go, as UnaryOp's are: its
// line at the end of binaryOps, its generic CPU function here below, go
// generate ./backend, and a reference in backend/cpu's elementwise tests.
type BinaryOp uint8

func add[T Float](x, y T) T { return x + y }
func sub[T Float](x, y T) T { return x - y }
func mul[T Float](x, y T) T { return x * y }
func div[T Float](x, y T) T { return x / y }
func pow[T Float](x, y T) T { return T(math.Pow(float64(x), float64(y))) }
func lt[T Float](x, y T) T  { return one[T](x < y) }
func gt[T Float](x, y T) T  { return one[T](x > y) }
func le[T Float](x, y T) T  { return one[T](x <= y) }
func ge[T Float](x, y T) T  { return one[T](x >= y) }
func eq[T Float](x, y T) T  { return one[T](x == y) }
func ne[T Float](x, y T) T  { return one[T](x != y) }

// geluGrad is y GELU'(x).
func geluGrad[T Float](x, y T) T { return T(float64(y) * geluDeriv(float64(x))) }

// one returns 1 where c holds, else 0.
func one[T Float](c bool) T {
	if c {
		return 1
	}
	return 0
}

// max2 and min2 return NaN where either argument is NaN.
func max2[T Float](x, y T) T {
	if x > y || x != x {
		return x
	}
	return y
}

func min2[T Float](x, y T) T {
	if x < y || x != x {
		return x
	}
	return y
}

// String returns the function's name.
func (o BinaryOp) String() string { return opName(binaries[:], int(o), "BinaryOp") }

func (o BinaryOp) valid() bool { return o > 0 && int(o) < len(binaries) }

// Zip is Dst[i] = A[i] Op B[i] for N elements. An operand whose Scalar flag
// is set is one element, used for every i. Dst may be A or B, unless that
// operand is a scalar (Check refuses a destination that holds a scalar
// operand, for N > 1).
type Zip struct {
	Op               BinaryOp
	N                int
	A, B, Dst        Operand
	AScalar, BScalar bool
}

// Check checks the operands.
func (k Zip) Check() error {
	if !k.Op.valid() {
		return fmt.Errorf("backend: zip: unknown function %v", k.Op)
	}
	na, nb := operandLens(k.N, k.AScalar, k.BScalar)
	if err := checkAll(k, DTypeOf(k.Dst), "A", k.A, na, "B", k.B, nb, "destination", k.Dst, k.N); err != nil {
		return err
	}
	// A scalar operand inside the destination is read by every thread of a
	// device while one of them overwrites it. With N = 1 the scalar is the
	// whole operand, read and written by one thread: that is in place.
	for _, s := range []struct {
		name   string
		op     Operand
		scalar bool
	}{{"A", k.A, k.AScalar}, {"B", k.B, k.BScalar}} {
		if s.scalar && k.N > 1 && sameBuffer(s.op.Buf, k.Dst.Buf) && s.op.Off >= k.Dst.Off && s.op.Off < k.Dst.Off+k.N {
			return fmt.Errorf("backend: zip: destination holds the scalar operand %s (element %d of %d): writing it races with reading it", s.name, s.op.Off-k.Dst.Off, k.N)
		}
	}
	return nil
}

// sameBuffer reports whether a and b are one buffer (false where the
// buffer type cannot be compared).
func sameBuffer(a, b Buffer) bool {
	if a == nil || b == nil {
		return false
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// operandLens returns the lengths of a Zip's or a Compare's operands A and
// B: n, or 1 for a scalar.
func operandLens(n int, aScalar, bScalar bool) (na, nb int) {
	na, nb = n, n
	if aScalar {
		na = 1
	}
	if bScalar {
		nb = 1
	}
	return na, nb
}

// Host runs the function on the CPU.
func (k Zip) Host(p *Pool) (Func, error) { return onFloats(p, k, zipHost[float32], zipHost[float64]) }

// Device launches on_zip, whose function is binary() in kernels.cu.
func (k Zip) Device(p Planner) {
	elementwise(p, "on_zip", k.N, zipArgs{Op: int(k.Op), N: k.N, Ascalar: k.AScalar, Bscalar: k.BScalar, A: k.A, B: k.B, Dst: k.Dst})
}

func zipHost[T Float](p *Pool, k Zip) Func {
	fn := in[func(x, y T) T](binaries[k.Op])
	av, bv, dst := hostData[T](k.A), hostData[T](k.B), hostData[T](k.Dst)[:k.N]
	s := p.split(k.N, binaries[k.Op].cost, func(lo, hi int) {
		a, b := av, bv
		if !k.AScalar {
			a = av[lo:hi]
		}
		if !k.BScalar {
			b = bv[lo:hi]
		}
		zipRange(k.Op, fn, dst[lo:hi], a, b, k.AScalar, k.BScalar)
	})
	return s.loop()
}

// zipRange is d[i] = fn(a[i], b[i]) (op's function), a scalar operand's
// first element taken for every i: the arithmetic of Zip, and of a
// Chain's binary steps.
func zipRange[T Float](op BinaryOp, fn func(x, y T) T, d, a, b []T, aScalar, bScalar bool) {
	switch {
	case aScalar && bScalar:
		v := fn(a[0], b[0])
		for i := range d {
			d[i] = v
		}
		return
	case aScalar:
		x := a[0]
		for i, y := range b[:len(d)] {
			d[i] = fn(x, y)
		}
		return
	case bScalar:
		y := b[0]
		for i, x := range a[:len(d)] {
			d[i] = fn(x, y)
		}
		return
	}
	// The common arithmetic inline, without a call per element.
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case Add:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case Sub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case Mul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case Div:
		for i := range d {
			d[i] = a[i] / b[i]
		}
	default:
		for i, x := range a {
			d[i] = fn(x, b[i])
		}
	}
}

// Fill sets N elements of Dst to Value.
type Fill struct {
	N     int
	Dst   Operand
	Value float64
}

// Check checks the operand.
func (k Fill) Check() error { return CheckOperand("fill", k.Dst, 0, k.N) }

// Host fills the buffer, of any element type.
func (k Fill) Host(*Pool) (Func, error) {
	switch d := k.Dst.Buf.(HostBuffer).Host().(type) {
	case []float32:
		return fillHost(d[k.Dst.Off:k.Dst.Off+k.N], float32(k.Value)), nil
	case []float64:
		return fillHost(d[k.Dst.Off:k.Dst.Off+k.N], k.Value), nil
	case []int32:
		return fillHost(d[k.Dst.Off:k.Dst.Off+k.N], int32(k.Value)), nil
	}
	return nil, fmt.Errorf("%w: fill of %v", ErrUnsupported, DTypeOf(k.Dst))
}

// Device launches on_fill in the destination's type.
func (k Fill) Device(p Planner) {
	p.SetType(DTypeOf(k.Dst))
	elementwise(p, "on_fill", k.N, fillArgs{N: k.N, V: k.Value, Dst: k.Dst})
}

func fillHost[E Float | int32](d []E, v E) Func {
	return func() error {
		for i := range d {
			d[i] = v
		}
		return nil
	}
}

// Compare is Dst[i] = 1 where A[i] Op B[i] holds and 0 elsewhere, for N
// elements, Op a comparison (Lt, Gt, Le, Ge, Eq or Ne), A and B floats and
// Dst Int32: a comparison whose result is booleans. An operand whose
// Scalar flag is set is one element, used for every i.
type Compare struct {
	Op               BinaryOp
	N                int
	A, B, Dst        Operand
	AScalar, BScalar bool
}

// Check checks the operands.
func (k Compare) Check() error {
	if k.Op < Lt || k.Op > Ne {
		return fmt.Errorf("backend: compare: %v is not a comparison", k.Op)
	}
	if k.N < 0 {
		return fmt.Errorf("backend: compare: %d elements", k.N)
	}
	na, nb := operandLens(k.N, k.AScalar, k.BScalar)
	if err := CheckOperand("compare A", k.A, 0, na); err != nil {
		return err
	}
	dt := DTypeOf(k.A)
	if dt != Float32 && dt != Float64 {
		return fmt.Errorf("backend: compare A: buffer of %v, want float32 or float64", dt)
	}
	return checkAll(k, dt, "B", k.B, nb, Int32, "destination", k.Dst, k.N)
}

// Host compares on the CPU.
func (k Compare) Host(p *Pool) (Func, error) {
	return onFloats(p, k, compareHost[float32], compareHost[float64])
}

// Device launches on_compare, whose comparison is binary() in kernels.cu.
func (k Compare) Device(p Planner) {
	elementwise(p, "on_compare", k.N, compareArgs{Op: int(k.Op), N: k.N, Ascalar: k.AScalar, Bscalar: k.BScalar, A: k.A, B: k.B, Dst: k.Dst})
}

func compareHost[T Float](p *Pool, k Compare) Func {
	fn := in[func(x, y T) T](binaries[k.Op])
	a, b, dst := hostData[T](k.A), hostData[T](k.B), hostData[int32](k.Dst)[:k.N]
	return p.split(k.N, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x, y := a[0], b[0]
			if !k.AScalar {
				x = a[i]
			}
			if !k.BScalar {
				y = b[i]
			}
			dst[i] = int32(fn(x, y))
		}
	}).loop()
}
