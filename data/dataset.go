package data

import (
	"fmt"
	"math"
)

// Dataset is a labelled data set of fixed-shape examples. A Loader serves
// any Dataset in shuffled mini-batches; *Set is the one held in memory.
type Dataset interface {
	// Len returns the number of examples.
	Len() int
	// Shape returns one example's shape, e.g. C, H, W.
	Shape() []int
	// NumClasses returns the number of label values: labels are
	// 0..NumClasses()-1.
	NumClasses() int
	// Example writes example i, the product of Shape's values long, into
	// x and returns its label.
	Example(i int, x []float32) (label int, err error)
}

var _ Dataset = (*Set)(nil)

// Len returns s.N.
func (s *Set) Len() int { return s.N }

// Shape returns []int{s.C, s.H, s.W}.
func (s *Set) Shape() []int { return []int{s.C, s.H, s.W} }

// NumClasses returns s.Classes.
func (s *Set) NumClasses() int { return s.Classes }

// Example copies Image(i) into x, which must hold at least Dim values,
// and returns its label. An index outside 0..N-1 is an error.
func (s *Set) Example(i int, x []float32) (int, error) {
	if i < 0 || i >= s.N {
		return 0, fmt.Errorf("data: example %d of %s, which has %d", i, s.Name, s.N)
	}
	d := s.Dim()
	if len(x) < d {
		return 0, fmt.Errorf("data: example %d of %s has %d values, the buffer holds %d", i, s.Name, d, len(x))
	}
	copy(x, s.X[i*d:(i+1)*d])
	return int(s.Y[i]), nil
}

// FromSlices returns a Set named name over len(labels) examples of the
// given shape, image after image in x (len(labels) times the product of
// shape's values). A shape of one or two dimensions is padded with leading
// 1s to C, H, W: {D} is 1 x 1 x D, {H, W} is 1 x H x W. Labels must lie in
// 0..classes-1, and classes in 1..256, since Set.Y holds bytes.
//
// The Set's X is x itself, not a copy; its values are kept as given (the
// sets Load reads are scaled to [-1, 1]; FromSlices does not scale).
func FromSlices(name string, x []float32, labels []int, shape []int, classes int) (*Set, error) {
	if len(shape) < 1 || len(shape) > 3 {
		return nil, fmt.Errorf("data: %s: shape %v, want 1 to 3 dimensions", name, shape)
	}
	chw := []int{1, 1, 1}
	copy(chw[3-len(shape):], shape)
	for _, v := range chw {
		if v < 1 {
			return nil, fmt.Errorf("data: %s: shape %v, want positive sizes", name, shape)
		}
	}
	if classes < 1 || classes > 256 {
		return nil, fmt.Errorf("data: %s: %d classes, want 1 to 256 (labels are bytes)", name, classes)
	}
	n := len(labels)
	if b := PixelBytes(n, chw[0], chw[1], chw[2]); b == math.MaxInt64 || int64(len(x)) != b/4 {
		return nil, fmt.Errorf("data: %s: %d values for %d examples of shape %v", name, len(x), n, shape)
	}
	y := make([]uint8, n)
	for i, l := range labels {
		if l < 0 || l >= classes {
			return nil, fmt.Errorf("data: %s: label %d of example %d is not in 0..%d", name, l, i, classes-1)
		}
		y[i] = uint8(l)
	}
	return &Set{Name: name, N: n, C: chw[0], H: chw[1], W: chw[2], X: x, Y: y, Classes: classes}, nil
}
