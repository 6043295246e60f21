package cpu_test

import (
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

// copyCase is a strided Copy from a buffer of srcLen elements into one of
// dstLen elements.
type copyCase struct {
	name           string
	shape          []int
	srcLen, dstLen int
	srcOff, dstOff int
	srcStr, dstStr []int
	add            bool
}

// contiguous returns the row-major strides of shape.
func contiguous(shape []int) []int {
	s := make([]int, len(shape))
	n := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = n
		n *= shape[i]
	}
	return s
}

func copyCases() []copyCase {
	// A permutation of a (2, 3, 4, 5) array: destination axes (3, 1, 0, 2)
	// of the source, that is a (5, 3, 2, 4) array.
	perm := []int{3, 1, 0, 2}
	shape := []int{2, 3, 4, 5}
	dshape := make([]int, 4)
	for i, p := range perm {
		dshape[i] = shape[p]
	}
	dcont := contiguous(dshape)
	permStr := make([]int, 4)
	for i, p := range perm {
		permStr[p] = dcont[i]
	}
	return []copyCase{
		{name: "permute4d", shape: shape, srcLen: 120, dstLen: 120, srcStr: contiguous(shape), dstStr: permStr},
		{name: "permute4d_add", shape: shape, srcLen: 121, dstLen: 123, srcOff: 1, dstOff: 2, srcStr: contiguous(shape), dstStr: permStr, add: true},
		// Rows 1, 3, 5, 7 and columns 2, 5, 8 of a 9 x 11 matrix at
		// offset 4.
		{name: "slice_step", shape: []int{4, 3}, srcLen: 4 + 99, dstLen: 12, srcOff: 4 + 11 + 2, srcStr: []int{22, 3}, dstStr: []int{3, 1}},
		// Every third element of a long vector: one long strided run.
		{name: "vector_step", shape: []int{257}, srcLen: 3 * 257, dstLen: 257, srcStr: []int{3}, dstStr: []int{1}},
		{name: "broadcast_row", shape: []int{5, 7}, srcLen: 7, dstLen: 35, srcStr: []int{0, 1}, dstStr: []int{7, 1}},
		{name: "broadcast_column", shape: []int{5, 7}, srcLen: 5, dstLen: 35, srcStr: []int{1, 0}, dstStr: []int{7, 1}},
		{name: "broadcast_scalar_add", shape: []int{3, 65}, srcLen: 1, dstLen: 195, srcStr: []int{0, 0}, dstStr: []int{65, 1}, add: true},
		{name: "contiguous_add", shape: []int{7, 65}, srcLen: 455, dstLen: 455, srcStr: []int{65, 1}, dstStr: []int{65, 1}, add: true},
		// Into columns 2 to 4 of a 7 x 6 matrix: concatenation.
		{name: "concat", shape: []int{7, 3}, srcLen: 21, dstLen: 42, dstOff: 2, srcStr: []int{3, 1}, dstStr: []int{6, 1}},
		{name: "unit_axes", shape: []int{1, 3, 1, 5}, srcLen: 15, dstLen: 15, srcStr: []int{99, 5, 99, 1}, dstStr: []int{0, 1, 0, 3}},
		{name: "scalar", shape: []int{}, srcLen: 3, dstLen: 3, srcOff: 2, dstOff: 1, srcStr: []int{}, dstStr: []int{}},
		{name: "scalar_axes", shape: []int{1, 1}, srcLen: 3, dstLen: 3, srcOff: 2, dstOff: 1, srcStr: []int{5, 5}, dstStr: []int{7, 7}, add: true},
		{name: "empty", shape: []int{3, 0, 2}, srcLen: 4, dstLen: 4, srcStr: []int{1, 1, 1}, dstStr: []int{1, 1, 1}},
		// Negative strides: reverse a vector, flip a matrix upside down
		// and transpose it, from the last element back.
		{name: "reverse", shape: []int{65}, srcLen: 65, dstLen: 65, srcOff: 64, srcStr: []int{-1}, dstStr: []int{1}},
		{name: "reverse_dst_add", shape: []int{65}, srcLen: 65, dstLen: 66, dstOff: 65, srcStr: []int{1}, dstStr: []int{-1}, add: true},
		{name: "flip_rows", shape: []int{7, 5}, srcLen: 35, dstLen: 35, srcOff: 30, srcStr: []int{-5, 1}, dstStr: []int{5, 1}},
		{name: "flip_transpose", shape: []int{7, 5}, srcLen: 35, dstLen: 36, srcOff: 34, dstOff: 1, srcStr: []int{-5, -1}, dstStr: []int{1, 7}},
	}
}

// copyRef applies c to dst from src in float64.
func copyRef(c copyCase, src, dst []float64) {
	n := 1
	for _, s := range c.shape {
		n *= s
	}
	idx := make([]int, len(c.shape))
	for e := 0; e < n; e++ {
		r := e
		so, do := c.srcOff, c.dstOff
		for ax := len(c.shape) - 1; ax >= 0; ax-- {
			idx[ax] = r % c.shape[ax]
			r /= c.shape[ax]
			so += idx[ax] * c.srcStr[ax]
			do += idx[ax] * c.dstStr[ax]
		}
		if c.add {
			dst[do] += src[so]
		} else {
			dst[do] = src[so]
		}
	}
}

func TestCopy(t *testing.T) {
	floats(t, testCopy[float32], testCopy[float64])
}

func testCopy[T num](t *testing.T) {
	for ci, c := range copyCases() {
		t.Run(c.name, func(t *testing.T) {
			r := rng(uint64(ci))
			src, dst := uniform[T](r, c.srcLen, -1, 1), uniform[T](r, c.dstLen, -1, 1)
			want := wide(dst)
			copyRef(c, wide(src), want)
			for i, w := range want {
				want[i] = round[T](w) // one rounding with Add
			}
			onEach(t, func(t *testing.T, b *cpu.Backend) []T {
				db := load(t, b, dst)
				run(t, b, backend.Copy{Shape: c.shape, Src: backend.At(load(t, b, src), c.srcOff), Dst: backend.At(db, c.dstOff),
					SrcStrides: c.srcStr, DstStrides: c.dstStr, Add: c.add})
				got := read[T](t, b, db)
				near(t, "Dst", got, want, nil)
				return got
			})
		})
	}
}
