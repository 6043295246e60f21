package backend

import (
	"fmt"
	"math"
	"slices"
)

// Kernels of Gorgonia ops beyond the layers of orthonet's models:
// comparisons with boolean results, sparsemax and its gradient, and
// YOLOv3's decoding of a detection grid. Each has its CPU implementation
// beside its CUDA launches.
var (
	_ defined = Compare{}
	_ defined = Sparsemax{}
	_ defined = SparsemaxGrad{}
	_ defined = YOLODecode{}
)

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
	na, nb := k.N, k.N
	if k.AScalar {
		na = 1
	}
	if k.BScalar {
		nb = 1
	}
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
	elementwise(p, "on_compare", k.N, int(k.Op), k.N, k.AScalar, k.BScalar, k.A, k.B, k.Dst)
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

// Sparsemax writes into Dst the sparsemax of each of the Rows rows of Src
// (Rows x Cols): the Euclidean projection of the row onto the probability
// simplex, max(z - tau, 0) for z the row less its maximum and tau the
// threshold that makes the row sum to 1 (Martins and Astudillo 2016).
// Sums are taken in float64.
type Sparsemax struct {
	Rows, Cols int
	Src, Dst   Operand
}

// Check checks the operands.
func (k Sparsemax) Check() error {
	n := k.Rows * k.Cols
	return checkSized(k, []int{k.Rows, k.Cols}, DTypeOf(k.Dst), "source", k.Src, n, "destination", k.Dst, n)
}

// Host sorts each row (a copy) to find its threshold.
func (k Sparsemax) Host(p *Pool) (Func, error) {
	return onFloats(p, k, sparsemaxHost[float32], sparsemaxHost[float64])
}

// Device takes a block per row (on_sparsemax): the support is found by
// counting, for each element, the elements at least as large and their
// sum, without a sort.
func (k Sparsemax) Device(p Planner) {
	p.Launch("on_sparsemax", k.Rows, k.Rows, k.Cols, k.Src, k.Dst)
}

func sparsemaxHost[T Float](p *Pool, k Sparsemax) Func {
	cols, n := k.Cols, k.Rows*k.Cols
	src, dst := hostData[T](k.Src)[:n], hostData[T](k.Dst)[:n]
	var s *splitter
	var sorted [][]float64 // a row's worth of scratch per part of the loop
	s = p.split(k.Rows, 8*cols, func(lo, hi int) {
		zs := sorted[part(s, lo)]
		for r := lo; r < hi; r++ {
			x, y := src[r*cols:(r+1)*cols], dst[r*cols:(r+1)*cols]
			m := x[0]
			for _, v := range x[1:] {
				m = max(m, v)
			}
			for j, v := range x {
				zs[j] = float64(v - m) // shifted in the element type, as gorgonia does
			}
			slices.Sort(zs)
			// The support is the largest k with 1 + k z_(k) > sum_(j<=k) z_(j),
			// z sorted in decreasing order.
			var cum, support float64
			size := 0
			for j := range cols {
				z := zs[cols-1-j]
				cum += z
				if 1+float64(j+1)*z > cum {
					size, support = j+1, cum
				}
			}
			tau := (support - 1) / float64(size)
			for j, v := range x {
				y[j] = T(max(float64(v-m)-tau, 0))
			}
		}
	})
	sorted = make([][]float64, s.parts)
	for i := range sorted {
		sorted[i] = make([]float64, cols)
	}
	return s.loop()
}

// SparsemaxGrad writes into DX the gradient of Sparsemax from its output Y
// and the gradient DY of Y, row by row (Rows x Cols): with s the support
// (Y != 0), DX = s (DY - sum(s DY) / sum(s)).
type SparsemaxGrad struct {
	Rows, Cols int
	Y, DY, DX  Operand
}

// Check checks the operands.
func (k SparsemaxGrad) Check() error {
	n := k.Rows * k.Cols
	return checkSized(k, []int{k.Rows, k.Cols}, DTypeOf(k.DX), "Y", k.Y, n, "DY", k.DY, n, "DX", k.DX, n)
}

// Host computes the gradient row by row, its sums in float64.
func (k SparsemaxGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, sparsemaxGradHost[float32], sparsemaxGradHost[float64])
}

// Device takes a block per row (on_sparsemax_grad).
func (k SparsemaxGrad) Device(p Planner) {
	p.Launch("on_sparsemax_grad", k.Rows, k.Rows, k.Cols, k.Y, k.DY, k.DX)
}

func sparsemaxGradHost[T Float](p *Pool, k SparsemaxGrad) Func {
	cols, n := k.Cols, k.Rows*k.Cols
	y, dy, dx := hostData[T](k.Y)[:n], hostData[T](k.DY)[:n], hostData[T](k.DX)[:n]
	return p.split(k.Rows, 3*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			yr, dyr, dxr := y[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
			var sum, count float64
			for j, v := range yr {
				if v != 0 {
					sum += float64(dyr[j])
					count++
				}
			}
			mean := 0.0
			if count > 0 {
				mean = sum / count
			}
			for j, v := range yr {
				dxr[j] = 0
				if v != 0 {
					dxr[j] = T(float64(dyr[j]) - mean)
				}
			}
		}
	}).loop()
}

// YOLODecode decodes YOLOv3's detection grid, as gorgonia's YOLOv3 does
// outside training: Src is (Batch, Boxes*Attrs, Grid, Grid) (Attrs = 5 +
// classes per box), Dst is (Batch, Grid*Grid*Boxes, Attrs), row (cell, box)
// of image b holding box b's attributes at cell (x, y) = (cell % Grid,
// cell / Grid): x and y become (sigmoid(v) + x or y) * Stride, the width
// and height exp(v) * Anchors[2 box] (or [2 box + 1]) * Stride, the
// objectness and the class scores sigmoid(v). Anchors holds each box's
// anchor divided by Stride, in the data's type.
type YOLODecode struct {
	Batch, Boxes, Attrs, Grid int
	Stride                    float64
	Anchors, Src, Dst         Operand
}

// Check checks the operands.
func (k YOLODecode) Check() error {
	if k.Attrs < 5 {
		return fmt.Errorf("backend: yolo-decode: %d attributes per box, want at least 5", k.Attrs)
	}
	n := k.Batch * k.Boxes * k.Attrs * k.Grid * k.Grid
	return checkSized(k, []int{k.Batch, k.Boxes, k.Grid}, DTypeOf(k.Dst), "anchors", k.Anchors, 2*k.Boxes,
		"source", k.Src, n, "destination", k.Dst, n)
}

// Host decodes row by row of the destination.
func (k YOLODecode) Host(p *Pool) (Func, error) {
	return onFloats(p, k, yoloHost[float32], yoloHost[float64])
}

// Device launches on_yolo, a thread per element.
func (k YOLODecode) Device(p Planner) {
	elementwise(p, "on_yolo", k.Batch*k.Grid*k.Grid*k.Boxes*k.Attrs, k.Batch, k.Boxes, k.Attrs, k.Grid, k.Stride, k.Anchors, k.Src, k.Dst)
}

func yoloHost[T Float](p *Pool, k YOLODecode) Func {
	cells := k.Grid * k.Grid
	n := k.Batch * k.Boxes * k.Attrs * cells
	anchors, src, dst := hostData[T](k.Anchors)[:2*k.Boxes], hostData[T](k.Src)[:n], hostData[T](k.Dst)[:n]
	stride := T(k.Stride)
	sigmoid := func(v T) T { return T(1 / (1 + math.Exp(-float64(v)))) }
	return p.split(k.Batch*cells*k.Boxes, 4*k.Attrs, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			box, cell, b := row%k.Boxes, (row/k.Boxes)%cells, row/(k.Boxes*cells)
			in := src[(b*k.Boxes+box)*k.Attrs*cells+cell:]
			out := dst[row*k.Attrs : (row+1)*k.Attrs]
			for a := range out {
				v := in[a*cells]
				switch a {
				case 0:
					out[a] = (sigmoid(v) + T(cell%k.Grid)) * stride
				case 1:
					out[a] = (sigmoid(v) + T(cell/k.Grid)) * stride
				case 2, 3:
					out[a] = T(math.Exp(float64(v))) * anchors[2*box+a-2] * stride
				default:
					out[a] = sigmoid(v)
				}
			}
		}
	}).loop()
}
