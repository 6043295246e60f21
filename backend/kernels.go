package backend

import (
	"fmt"
	"reflect"
	"slices"
)

// Every kernel checks its operands the same way on every backend: Prepare
// calls Check first.
var (
	_ Kernel = Gemm{}
	_ Kernel = Map{}
	_ Kernel = Zip{}
	_ Kernel = Reduce{}
	_ Kernel = Softmax{}
	_ Kernel = SoftmaxGrad{}
	_ Kernel = Copy{}
	_ Kernel = Fill{}
	_ Kernel = CheckFinite{}
	_ Kernel = CheckProduct{}
	_ Kernel = GatherRows{}
	_ Kernel = ScatterRows{}
	_ Kernel = QF{}
)

// Checker is a kernel that can validate its own operands.
type Checker interface {
	Kernel
	// Check reports an error naming the first operand whose buffer is too
	// short or of another element type than the kernel's.
	Check() error
}

// Gemm is C = Alpha op(A) op(B) + Beta C for Batch matrices, op(A) M x K
// and op(B) K x N (op transposes when TransA / TransB is set), all
// row-major with leading dimensions LDA, LDB and LDC. Matrix i of a batch
// starts i*StrideA (StrideB, StrideC) elements after its operand. A Batch
// of 0 means 1. With Beta = 0, C is written without being read.
type Gemm struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float64
	A, B, C                   Operand
	LDA, LDB, LDC             int
	Batch                     int
	StrideA, StrideB, StrideC int
}

// Name returns "gemm".
func (Gemm) Name() string { return "gemm" }

// Batches returns Batch, or 1 when it is 0.
func (k Gemm) Batches() int { return max(k.Batch, 1) }

// Check checks the operands' types and extents.
func (k Gemm) Check() error {
	if k.M < 0 || k.N < 0 || k.K < 0 || k.Batch < 0 {
		return fmt.Errorf("backend: gemm: negative size %d x %d x %d, batch %d", k.M, k.N, k.K, k.Batch)
	}
	ra, ca := k.M, k.K
	if k.TransA {
		ra, ca = k.K, k.M
	}
	rb, cb := k.K, k.N
	if k.TransB {
		rb, cb = k.N, k.K
	}
	dt := DTypeOf(k.C)
	b := k.Batches()
	for _, m := range []struct {
		name         string
		op           Operand
		rows, cols   int
		ld, stride   int
		writtenByOut bool
	}{{"A", k.A, ra, ca, k.LDA, k.StrideA, false}, {"B", k.B, rb, cb, k.LDB, k.StrideB, false}, {"C", k.C, k.M, k.N, k.LDC, k.StrideC, true}} {
		if m.rows == 0 || m.cols == 0 {
			if err := CheckOperand("gemm "+m.name, m.op, dt, 0); err != nil {
				return err
			}
			continue
		}
		if m.ld < m.cols {
			return fmt.Errorf("backend: gemm: leading dimension of %s is %d, less than its %d columns", m.name, m.ld, m.cols)
		}
		span := (b-1)*m.stride + (m.rows-1)*m.ld + m.cols
		if err := CheckOperand("gemm "+m.name, m.op, dt, span); err != nil {
			return err
		}
	}
	return nil
}

// UnaryOp is an elementwise function of one argument.
type UnaryOp uint8

// The elementwise functions of one argument.
const (
	Neg UnaryOp = iota + 1
	Abs
	Sign
	Exp
	Log
	Log1p
	Expm1
	Sqrt
	Square
	Cube
	Tanh
	Sigmoid
	Inverse // 1/x
	InverseSqrt
	Ceil
	Floor
	ReLU     // max(x, 0)
	Softplus // log(1 + exp(x))
	Identity
	Sin
	Cos
	Log2
	GELU // the tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
)

var unaryNames = [...]string{Neg: "neg", Abs: "abs", Sign: "sign", Exp: "exp", Log: "log", Log1p: "log1p", Expm1: "expm1",
	Sqrt: "sqrt", Square: "square", Cube: "cube", Tanh: "tanh", Sigmoid: "sigmoid", Inverse: "inverse",
	InverseSqrt: "inversesqrt", Ceil: "ceil", Floor: "floor", ReLU: "relu", Softplus: "softplus", Identity: "identity",
	Sin: "sin", Cos: "cos", Log2: "log2", GELU: "gelu"}

// String returns the function's name.
func (o UnaryOp) String() string {
	if int(o) < len(unaryNames) && unaryNames[o] != "" {
		return unaryNames[o]
	}
	return fmt.Sprintf("UnaryOp(%d)", int(o))
}

// Map is Dst[i] = Op(Src[i]) for N elements; Dst may be Src.
type Map struct {
	Op       UnaryOp
	N        int
	Src, Dst Operand
}

// Name returns "map".
func (Map) Name() string { return "map" }

// Check checks the operands.
func (k Map) Check() error {
	if k.Op == 0 || int(k.Op) >= len(unaryNames) {
		return fmt.Errorf("backend: map: unknown function %v", k.Op)
	}
	dt := DTypeOf(k.Dst)
	if err := CheckOperand("map source", k.Src, dt, k.N); err != nil {
		return err
	}
	return CheckOperand("map destination", k.Dst, dt, k.N)
}

// BinaryOp is an elementwise function of two arguments. Comparisons give 1
// where they hold and 0 elsewhere, in the operands' type.
type BinaryOp uint8

// The elementwise functions of two arguments.
const (
	Add BinaryOp = iota + 1
	Sub
	Mul
	Div
	Pow
	Lt
	Gt
	Le
	Ge
	Eq
	Ne
	Max2     // max(a, b)
	Min2     // min(a, b)
	GELUGrad // b GELU'(a): the gradient of GELU at a times b
)

var binaryNames = [...]string{Add: "add", Sub: "sub", Mul: "mul", Div: "div", Pow: "pow", Lt: "lt", Gt: "gt",
	Le: "le", Ge: "ge", Eq: "eq", Ne: "ne", Max2: "max", Min2: "min", GELUGrad: "gelu-grad"}

// String returns the function's name.
func (o BinaryOp) String() string {
	if int(o) < len(binaryNames) && binaryNames[o] != "" {
		return binaryNames[o]
	}
	return fmt.Sprintf("BinaryOp(%d)", int(o))
}

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

// Name returns "zip".
func (Zip) Name() string { return "zip" }

// Check checks the operands.
func (k Zip) Check() error {
	if k.Op == 0 || int(k.Op) >= len(binaryNames) {
		return fmt.Errorf("backend: zip: unknown function %v", k.Op)
	}
	dt := DTypeOf(k.Dst)
	na, nb := k.N, k.N
	if k.AScalar {
		na = 1
	}
	if k.BScalar {
		nb = 1
	}
	if err := CheckOperand("zip A", k.A, dt, na); err != nil {
		return err
	}
	if err := CheckOperand("zip B", k.B, dt, nb); err != nil {
		return err
	}
	if err := CheckOperand("zip destination", k.Dst, dt, k.N); err != nil {
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

// ReduceOp is how Reduce combines elements.
type ReduceOp uint8

// The reductions.
const (
	Sum ReduceOp = iota + 1
	Max
)

// Reduce reduces Src, a row-major (Outer, Mid, Inner) array, over its
// middle axis into Dst, an (Outer, Inner) array.
type Reduce struct {
	Op                ReduceOp
	Outer, Mid, Inner int
	Src, Dst          Operand
}

// Name returns "reduce".
func (Reduce) Name() string { return "reduce" }

// Check checks the operands.
func (k Reduce) Check() error {
	if k.Op != Sum && k.Op != Max {
		return fmt.Errorf("backend: reduce: unknown reduction %d", k.Op)
	}
	if k.Outer < 1 || k.Mid < 1 || k.Inner < 1 {
		return fmt.Errorf("backend: reduce: shape (%d, %d, %d), want positive sizes", k.Outer, k.Mid, k.Inner)
	}
	dt := DTypeOf(k.Dst)
	if err := CheckOperand("reduce source", k.Src, dt, k.Outer*k.Mid*k.Inner); err != nil {
		return err
	}
	return CheckOperand("reduce destination", k.Dst, dt, k.Outer*k.Inner)
}

// Softmax writes into Dst the softmax (or with Log its logarithm) of Src, a
// row-major (Outer, Axis, Inner) array, along its middle axis. It is
// computed stably (shifted by the maximum along the axis).
type Softmax struct {
	Log                bool
	Outer, Axis, Inner int
	Src, Dst           Operand
}

// Name returns "softmax".
func (Softmax) Name() string { return "softmax" }

// Check checks the operands.
func (k Softmax) Check() error {
	if k.Outer < 1 || k.Axis < 1 || k.Inner < 1 {
		return fmt.Errorf("backend: softmax: shape (%d, %d, %d), want positive sizes", k.Outer, k.Axis, k.Inner)
	}
	dt := DTypeOf(k.Dst)
	n := k.Outer * k.Axis * k.Inner
	if err := CheckOperand("softmax source", k.Src, dt, n); err != nil {
		return err
	}
	return CheckOperand("softmax destination", k.Dst, dt, n)
}

// SoftmaxGrad writes into DX the gradient of a softmax along the middle
// axis of (Outer, Axis, Inner) arrays, from the softmax's output Y and the
// gradient DY of the loss with respect to Y: DX = Y (DY - sum(DY Y)), or
// with Log (Y the log-softmax) DX = DY - exp(Y) sum(DY).
type SoftmaxGrad struct {
	Log                bool
	Outer, Axis, Inner int
	Y, DY, DX          Operand
}

// Name returns "softmax-grad".
func (SoftmaxGrad) Name() string { return "softmax-grad" }

// Check checks the operands.
func (k SoftmaxGrad) Check() error {
	if k.Outer < 1 || k.Axis < 1 || k.Inner < 1 {
		return fmt.Errorf("backend: softmax-grad: shape (%d, %d, %d), want positive sizes", k.Outer, k.Axis, k.Inner)
	}
	dt := DTypeOf(k.DX)
	n := k.Outer * k.Axis * k.Inner
	for _, o := range []struct {
		name string
		op   Operand
	}{{"Y", k.Y}, {"DY", k.DY}, {"DX", k.DX}} {
		if err := CheckOperand("softmax-grad "+o.name, o.op, dt, n); err != nil {
			return err
		}
	}
	return nil
}

// MaxDims bounds the axes of a Copy.
const MaxDims = 8

// Copy copies a strided view of Src into a strided view of Dst, both of
// Shape, element (i0, i1, ...) from Src.Off + sum i_k SrcStrides[k] to
// Dst.Off + sum i_k DstStrides[k]; with Add it adds to Dst instead. A
// stride of 0 repeats an element (broadcasting). Transposes, slices,
// concatenation and repeats are all Copies. Dst's view must not overlap
// itself (no two index tuples may reach one destination element: no zero
// destination stride on an axis longer than 1, no strides that collide),
// which Check refuses, nor Src.
type Copy struct {
	Shape                  []int
	Src, Dst               Operand
	SrcStrides, DstStrides []int
	Add                    bool
}

// Name returns "copy".
func (Copy) Name() string { return "copy" }

// Check checks the operands.
func (k Copy) Check() error {
	d := len(k.Shape)
	if d > MaxDims || len(k.SrcStrides) != d || len(k.DstStrides) != d {
		return fmt.Errorf("backend: copy: shape %v with strides %v and %v (at most %d axes)", k.Shape, k.SrcStrides, k.DstStrides, MaxDims)
	}
	dt := DTypeOf(k.Dst)
views:
	for _, v := range []struct {
		name    string
		op      Operand
		strides []int
	}{{"source", k.Src, k.SrcStrides}, {"destination", k.Dst, k.DstStrides}} {
		lo, hi := 0, 0
		for i, n := range k.Shape {
			if n < 0 {
				return fmt.Errorf("backend: copy: shape %v has a negative axis", k.Shape)
			}
			if n == 0 {
				if err := CheckOperand("copy "+v.name, v.op, dt, 0); err != nil {
					return err
				}
				continue views
			}
			s := v.strides[i] * (n - 1)
			if s < 0 {
				lo += s
			} else {
				hi += s
			}
		}
		if err := CheckOperand("copy "+v.name, Operand{v.op.Buf, v.op.Off + lo}, dt, hi-lo+1); err != nil {
			return err
		}
	}
	return k.checkDestination()
}

// checkDestination refuses a destination view that reaches one element
// from two index tuples. With Add that is a lost update on a device (two
// threads read the element, each adds its own source element and writes
// back); without Add it is a race too: which write lands depends on the
// order the threads run in, where the CPU backend's is the last in
// row-major order. So both are refused, as a zero destination stride
// always was. (A repeated source element, a zero source stride, is
// legal: reading an element twice races with nothing.)
func (k Copy) checkDestination() error {
	var shape, strides []int
	for i, n := range k.Shape {
		if n == 0 {
			return nil // nothing is written
		}
		if n == 1 {
			continue // a zero stride on one element repeats nothing
		}
		if k.DstStrides[i] == 0 {
			return fmt.Errorf("backend: copy: destination stride 0 on axis %d of %d elements: the destination view overlaps itself%s", i, n, k.race())
		}
		// A negative stride reflects its axis, which leaves which tuples
		// collide as they were.
		shape, strides = append(shape, n), append(strides, abs(k.DstStrides[i]))
	}
	// Sorted by stride, a view whose every stride passes the reach of the
	// smaller ones is one-to-one: every contiguous, transposed, sliced or
	// concatenated view.
	axes := make([]int, len(shape))
	for i := range axes {
		axes[i] = i
	}
	slices.SortStableFunc(axes, func(a, b int) int { return strides[a] - strides[b] })
	reach, ok := 0, true
	for _, a := range axes {
		if strides[a] <= reach {
			ok = false
			break
		}
		reach += strides[a] * (shape[a] - 1)
	}
	if ok {
		return nil
	}
	// Otherwise visit every element, marking what it reaches: the marks
	// cover the view's span, which fits in the buffer (checked above), at
	// one bit an element.
	span := 0
	for i, n := range shape {
		span += strides[i] * (n - 1)
	}
	seen := make([]uint64, span/64+1)
	idx := make([]int, len(shape))
	first := func(at int) []int { // the first tuple that reaches at
		t := make([]int, len(shape))
		for {
			o := 0
			for i, c := range t {
				o += c * strides[i]
			}
			if o == at {
				return t
			}
			next(t, shape)
		}
	}
	for {
		o := 0
		for i, c := range idx {
			o += c * strides[i]
		}
		if seen[o/64]&(1<<(o%64)) != 0 {
			return fmt.Errorf("backend: copy: destination view overlaps itself: indices %v and %v (of shape %v, strides %v without axes of length 1) reach one element%s",
				first(o), idx, shape, strides, k.race())
		}
		seen[o/64] |= 1 << (o % 64)
		if !next(idx, shape) {
			return nil
		}
	}
}

// race says what overlapping destination elements do on a device.
func (k Copy) race() string {
	if k.Add {
		return " (with Add, threads adding into one element lose updates)"
	}
	return " (threads writing one element race)"
}

// next steps idx to the next tuple of shape in row-major order; false
// after the last.
func next(idx, shape []int) bool {
	for ax := len(idx) - 1; ax >= 0; ax-- {
		if idx[ax]++; idx[ax] < shape[ax] {
			return true
		}
		idx[ax] = 0
	}
	return false
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Simplified returns the copy's shape and strides without its axes of
// length 1 and with neighbours that are contiguous in both views merged:
// the same copy over fewer, longer axes.
func (k Copy) Simplified() (shape, src, dst []int) {
	for i, n := range k.Shape {
		if n == 1 {
			continue
		}
		if l := len(shape) - 1; l >= 0 && src[l] == k.SrcStrides[i]*n && dst[l] == k.DstStrides[i]*n {
			shape[l] *= n
			src[l], dst[l] = k.SrcStrides[i], k.DstStrides[i]
			continue
		}
		shape, src, dst = append(shape, n), append(src, k.SrcStrides[i]), append(dst, k.DstStrides[i])
	}
	return shape, src, dst
}

// Fill sets N elements of Dst to Value.
type Fill struct {
	N     int
	Dst   Operand
	Value float64
}

// Name returns "fill".
func (Fill) Name() string { return "fill" }

// Check checks the operand.
func (k Fill) Check() error { return CheckOperand("fill", k.Dst, 0, k.N) }

// CheckFinite sets Flag, one element of an Int32 buffer, to 1 when any of
// the N elements of Src is NaN or infinite. It never clears the flag.
type CheckFinite struct {
	N         int
	Src, Flag Operand
}

// Name returns "check-finite".
func (CheckFinite) Name() string { return "check-finite" }

// Check checks the operands.
func (k CheckFinite) Check() error {
	if err := CheckOperand("check-finite source", k.Src, 0, k.N); err != nil {
		return err
	}
	return CheckOperand("check-finite flag", k.Flag, Int32, 1)
}

// CheckProduct sets Flag like CheckFinite would for the product C = A^T B
// of an RA x CA matrix A and an RA x CB matrix B (the gradient of a linear
// layer's weight), without reading C: it checks that every entry of A and
// B is finite and that RA max|A| max|B| is below half the largest finite
// value of the type, which bounds every entry (and partial sum) of C.
// When that bound fails it sets the flag, and the caller checks C itself.
type CheckProduct struct {
	RA, CA, CB int
	A, B, Flag Operand
}

// Name returns "check-product".
func (CheckProduct) Name() string { return "check-product" }

// Check checks the operands.
func (k CheckProduct) Check() error {
	if k.RA < 0 || k.CA < 0 || k.CB < 0 {
		return fmt.Errorf("backend: check-product: negative size %d x %d, %d x %d", k.RA, k.CA, k.RA, k.CB)
	}
	dt := DTypeOf(k.A)
	if err := CheckOperand("check-product A", k.A, dt, k.RA*k.CA); err != nil {
		return err
	}
	if err := CheckOperand("check-product B", k.B, dt, k.RA*k.CB); err != nil {
		return err
	}
	return CheckOperand("check-product flag", k.Flag, Int32, 1)
}

// GatherRows copies row Rows[i] of Src, a matrix of Width columns, into row
// i of Dst, for i < N. Rows is an Int32 operand of N entries.
type GatherRows struct {
	N, Width       int
	Rows, Src, Dst Operand
}

// Name returns "gather-rows".
func (GatherRows) Name() string { return "gather-rows" }

// Check checks the operands; the row indices are checked when the kernel
// runs.
func (k GatherRows) Check() error {
	if err := CheckOperand("gather-rows indices", k.Rows, Int32, k.N); err != nil {
		return err
	}
	dt := DTypeOf(k.Dst)
	if err := CheckOperand("gather-rows source", k.Src, dt, k.Width); err != nil {
		return err
	}
	return CheckOperand("gather-rows destination", k.Dst, dt, k.N*k.Width)
}

// ScatterRows copies row i of Src into row Rows[i] of Dst, a matrix of
// Width columns, for i < N. The rows must be distinct: where one repeats,
// which copy lands depends on the backend.
type ScatterRows struct {
	N, Width       int
	Rows, Src, Dst Operand
}

// Name returns "scatter-rows".
func (ScatterRows) Name() string { return "scatter-rows" }

// Check checks the operands; the row indices are checked when the kernel
// runs.
func (k ScatterRows) Check() error {
	if err := CheckOperand("scatter-rows indices", k.Rows, Int32, k.N); err != nil {
		return err
	}
	dt := DTypeOf(k.Src)
	if err := CheckOperand("scatter-rows source", k.Src, dt, k.N*k.Width); err != nil {
		return err
	}
	return CheckOperand("scatter-rows destination", k.Dst, dt, k.Width)
}

// QF replaces A, an M x N matrix with M >= N, by the Q factor of its QR
// decomposition with the signs chosen so that diag(R) > 0: the QR
// retraction of the Stiefel manifold, and RSDM's inner retraction on O(r).
// GramBound, when above 0, bounds the condition number of A^T A: a backend
// may then use Cholesky QR where that is as accurate as Householder.
type QF struct {
	M, N      int
	A         Operand
	GramBound float64
}

// Name returns "qf".
func (QF) Name() string { return "qf" }

// Check checks the operand.
func (k QF) Check() error {
	if k.M < k.N || k.N < 1 {
		return fmt.Errorf("backend: qf: %d x %d, want M >= N >= 1", k.M, k.N)
	}
	return CheckOperand("qf", k.A, 0, k.M*k.N)
}

// Operands returns A, B and C.
func (k Gemm) Operands() []Operand { return []Operand{k.A, k.B, k.C} }

// Operands returns Src and Dst.
func (k Map) Operands() []Operand { return []Operand{k.Src, k.Dst} }

// Operands returns A, B and Dst.
func (k Zip) Operands() []Operand { return []Operand{k.A, k.B, k.Dst} }

// Operands returns Src and Dst.
func (k Reduce) Operands() []Operand { return []Operand{k.Src, k.Dst} }

// Operands returns Src and Dst.
func (k Softmax) Operands() []Operand { return []Operand{k.Src, k.Dst} }

// Operands returns Y, DY and DX.
func (k SoftmaxGrad) Operands() []Operand { return []Operand{k.Y, k.DY, k.DX} }

// Operands returns Src and Dst.
func (k Copy) Operands() []Operand { return []Operand{k.Src, k.Dst} }

// Operands returns Dst.
func (k Fill) Operands() []Operand { return []Operand{k.Dst} }

// Operands returns Src and Flag.
func (k CheckFinite) Operands() []Operand { return []Operand{k.Src, k.Flag} }

// Operands returns A, B and Flag.
func (k CheckProduct) Operands() []Operand { return []Operand{k.A, k.B, k.Flag} }

// Operands returns Src, Dst and Rows.
func (k GatherRows) Operands() []Operand { return []Operand{k.Src, k.Dst, k.Rows} }

// Operands returns Src, Dst and Rows.
func (k ScatterRows) Operands() []Operand { return []Operand{k.Src, k.Dst, k.Rows} }

// Operands returns A.
func (k QF) Operands() []Operand { return []Operand{k.A} }
