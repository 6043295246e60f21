// Package testval converts the values tests compare (host slices, tensors,
// gorgonia values) to float64 and measures how far two sets of values are
// apart: the conversions and comparisons that tests of program, fused,
// optim, models and the example harness share.
package testval

import (
	"fmt"
	"math"
	"slices"

	"gorgonia.org/tensor"
)

// Floats returns a copy of v's elements in float64. v is a slice of
// float32, float64, int, int32 or int64, a float32 or float64 scalar, or a
// value with a Data method that returns one of them (a tensor.Tensor, a
// gorgonia.Value); nil gives nil. Any other type panics: it is a test's
// mistake.
func Floats(v any) []float64 {
	switch d := v.(type) {
	case nil:
		return nil
	case []float32:
		return convert(d)
	case []float64:
		return append([]float64(nil), d...)
	case []int:
		return convert(d)
	case []int32:
		return convert(d)
	case []int64:
		return convert(d)
	case float32:
		return []float64{float64(d)}
	case float64:
		return []float64{d}
	case interface{ Data() any }:
		return Floats(d.Data())
	}
	panic(fmt.Sprintf("testval.Floats: a value of %T", v))
}

func convert[T float32 | int | int32 | int64](d []T) []float64 {
	out := make([]float64, len(d))
	for i, x := range d {
		out[i] = float64(x)
	}
	return out
}

// Float32s returns v in float32.
func Float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// Host returns n zeros of dt's host type: []float32 for tensor.Float32,
// []float64 otherwise.
func Host(dt tensor.Dtype, n int) any {
	if dt == tensor.Float32 {
		return make([]float32, n)
	}
	return make([]float64, n)
}

// Tensor returns a dense tensor of dt (float32 or float64) with the given
// shape and values, a scalar where shape is empty; the tensor owns its
// values.
func Tensor(dt tensor.Dtype, shape []int, v []float64) tensor.Tensor {
	if len(shape) == 0 {
		if dt == tensor.Float32 {
			return tensor.New(tensor.FromScalar(float32(v[0])))
		}
		return tensor.New(tensor.FromScalar(v[0]))
	}
	if dt == tensor.Float32 {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(Float32s(v)))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), v...)))
}

// MaxRel returns max|a_i - b_i| / max|b_i|: the largest difference
// relative to the scale of the reference b. It is +Inf where the lengths
// differ or either holds a NaN: a NaN never agrees.
func MaxRel(a, b []float64) float64 {
	d, ok := MaxAbs(a, b), len(a) == len(b)
	if !ok || math.IsInf(d, 1) {
		return math.Inf(1)
	}
	var s float64
	for _, x := range b {
		s = max(s, math.Abs(x))
	}
	return d / max(s, 1e-300)
}

// NormRel returns ||a - b||_2 / ||b||_2: the difference of a and b as a
// whole (one entry far apart among many counts less than in MaxRel). It is
// +Inf where the lengths differ or either holds a NaN.
func NormRel(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d, s float64
	for i := range b {
		if math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			return math.Inf(1)
		}
		d += (a[i] - b[i]) * (a[i] - b[i])
		s += b[i] * b[i]
	}
	return math.Sqrt(d / max(s, 1e-300))
}

// MaxAbs returns max|a_i - b_i|, +Inf where the lengths differ or either
// holds a NaN.
func MaxAbs(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range b {
		if math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			return math.Inf(1)
		}
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// Worst says where a differs most from the reference b, for a failure's
// message: the element and both values there (a NaN first).
func Worst(a, b []float64) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d values against %d", len(a), len(b))
	}
	at, d := -1, -1.0
	for i := range b {
		if math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			at = i
			break
		}
		if e := math.Abs(a[i] - b[i]); e > d {
			at, d = i, e
		}
	}
	if at < 0 {
		return "no elements"
	}
	return fmt.Sprintf("most at element %d of %d: %v against %v", at, len(b), a[at], b[at])
}

// SameBits reports whether a and b are slices of one type and length (any
// that Floats takes) whose elements are the same bit for bit: what a
// resumed run must reproduce of a straight one.
func SameBits(a, b any) bool {
	switch x := a.(type) { // compared as they are: a float64 holds no int64 exactly
	case []float32:
		return equalBits(x, b, math.Float32bits)
	case []float64:
		return equalBits(x, b, math.Float64bits)
	case []int64:
		return equalBits(x, b, func(v int64) int64 { return v })
	}
	if fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
		return false
	}
	return slices.EqualFunc(Floats(a), Floats(b), func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y)
	})
}

// equalBits reports whether b is a slice of a's type and length whose
// elements have the same bits as a's.
func equalBits[T any, B comparable](a []T, b any, bits func(T) B) bool {
	c, ok := b.([]T)
	return ok && slices.EqualFunc(a, c, func(x, y T) bool { return bits(x) == bits(y) })
}
