package testval

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// TestFloats checks that every supported kind of value converts to its
// elements in float64, as a copy.
func TestFloats(t *testing.T) {
	backing := []float64{1.5, -2}
	cases := []struct {
		name string
		v    any
		want []float64
	}{
		{"nil", nil, nil},
		{"float32s", []float32{1.5, -2}, []float64{1.5, -2}},
		{"float64s", backing, []float64{1.5, -2}},
		{"ints", []int{3, -4}, []float64{3, -4}},
		{"int32s", []int32{3, -4}, []float64{3, -4}},
		{"int64s", []int64{3, -4}, []float64{3, -4}},
		{"float32", float32(0.25), []float64{0.25}},
		{"float64", 0.25, []float64{0.25}},
		{"tensor", tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1.5, -2})), []float64{1.5, -2}},
	}
	for _, c := range cases {
		if got := Floats(c.v); !slices.Equal(got, c.want) {
			t.Errorf("%s: Floats gives %v, want %v", c.name, got, c.want)
		}
	}
	Floats(backing)[0] = 9
	if backing[0] != 1.5 {
		t.Error("Floats of a []float64 shares its backing array")
	}
	defer func() {
		if recover() == nil {
			t.Error("Floats of a string did not panic")
		}
	}()
	Floats("1.5")
}

// TestTensorHost checks that Tensor holds the values in the asked type and
// shape, and Host makes zeros of that type.
func TestTensorHost(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		v := []float64{1, 2.5, -3, 4, 0.5, 6}
		x := Tensor(dt, []int{2, 3}, v)
		if x.Dtype() != dt || !x.Shape().Eq(tensor.Shape{2, 3}) || !slices.Equal(Floats(x), v) {
			t.Errorf("%v: Tensor gives %v of %v holding %v", dt, x.Dtype(), x.Shape(), Floats(x))
		}
		if s := Tensor(dt, nil, []float64{2.5}); !s.Shape().IsScalar() || !slices.Equal(Floats(s), []float64{2.5}) {
			t.Errorf("%v: Tensor of no shape gives %v holding %v", dt, s.Shape(), Floats(s))
		}
		h := Host(dt, 3)
		if got := Floats(h); !slices.Equal(got, []float64{0, 0, 0}) || (dt == tensor.Float32) != isFloat32s(h) {
			t.Errorf("%v: Host gives %T %v", dt, h, got)
		}
	}
	if got := Float32s([]float64{0.5, -1}); !slices.Equal(got, []float32{0.5, -1}) {
		t.Errorf("Float32s gives %v", got)
	}
}

func isFloat32s(v any) bool { _, ok := v.([]float32); return ok }

// TestDistances checks MaxRel, NormRel and MaxAbs on differences known by
// hand, and that a NaN or a length mismatch never agrees.
func TestDistances(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name                    string
		a, b                    []float64
		maxRel, normRel, maxAbs float64
	}{
		{"equal", []float64{1, -2}, []float64{1, -2}, 0, 0, 0},
		{"scaled by the reference", []float64{1, 4.5}, []float64{1, 4}, 0.125, 0.5 / math.Sqrt(17), 0.5},
		{"zero reference", []float64{0, 0}, []float64{0, 0}, 0, 0, 0},
		{"NaN in a", []float64{nan, 1}, []float64{1, 1}, inf, inf, inf},
		{"NaN in b", []float64{1, 1}, []float64{1, nan}, inf, inf, inf},
		{"NaN in both", []float64{nan}, []float64{nan}, inf, inf, inf},
		{"lengths", []float64{1}, []float64{1, 1}, inf, inf, inf},
	}
	for _, c := range cases {
		if got := MaxRel(c.a, c.b); got != c.maxRel {
			t.Errorf("%s: MaxRel %v, want %v", c.name, got, c.maxRel)
		}
		if got := NormRel(c.a, c.b); math.Abs(got-c.normRel) > 1e-15 && got != c.normRel {
			t.Errorf("%s: NormRel %v, want %v", c.name, got, c.normRel)
		}
		if got := MaxAbs(c.a, c.b); got != c.maxAbs {
			t.Errorf("%s: MaxAbs %v, want %v", c.name, got, c.maxAbs)
		}
	}
	if got, want := Worst([]float64{1, 5, 3}, []float64{1, 4, 7}), "most at element 2 of 3: 3 against 7"; got != want {
		t.Errorf("Worst: %q, want %q", got, want)
	}
}

// TestSameBits checks that SameBits tells values apart by type, length and
// bits (a negative zero from zero, a NaN equal to itself).
func TestSameBits(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		a, b any
		want bool
	}{
		{"equal", []float64{1, nan}, []float64{1, nan}, true},
		{"float32", []float32{1, 2}, []float32{1, 2}, true},
		{"other bits", []float64{1, 2}, []float64{1, math.Nextafter(2, 3)}, false},
		{"negative zero", []float64{0}, []float64{math.Copysign(0, -1)}, false},
		{"types", []float32{1}, []float64{1}, false},
		{"lengths", []float64{1}, []float64{1, 1}, false},
	}
	for _, c := range cases {
		if got := SameBits(c.a, c.b); got != c.want {
			t.Errorf("%s: SameBits %v, want %v", c.name, got, c.want)
		}
	}
}

// recorder is a TB that records failures.
type recorder struct{ failed []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

// TestStraightThenResumed checks that a counter resumed from its saved
// value passes, and one whose Save loses the count fails at every k but 0.
func TestStraightThenResumed(t *testing.T) {
	counter := func(lossy bool) Resumable[*[]float64, float64] {
		return Resumable[*[]float64, float64]{
			Start: func() *[]float64 { return &[]float64{0} },
			Step:  func(r *[]float64, i int) { (*r)[0] += float64(i) },
			Save: func(r *[]float64) float64 {
				if lossy {
					return 0
				}
				return (*r)[0]
			},
			Resume: func(s float64) *[]float64 { return &[]float64{s} },
			Result: func(r *[]float64) any { return *r },
		}
	}
	var ok, lossy recorder
	StraightThenResumed(&ok, 5, []int{0, 2, 4}, counter(false))
	StraightThenResumed(&lossy, 5, []int{0, 2, 4}, counter(true))
	if len(ok.failed) != 0 {
		t.Errorf("a faithful resume failed: %q", ok.failed)
	}
	if len(lossy.failed) != 2 {
		t.Errorf("a resume that loses the count failed %d times, want 2 (k = 2, 4): %q", len(lossy.failed), lossy.failed)
	}
}
