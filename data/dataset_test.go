package data

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// hiddenSet serves a Set through the Dataset interface only, so that a
// Loader cannot see it is a *Set.
type hiddenSet struct{ s *Set }

func (h hiddenSet) Len() int                                { return h.s.Len() }
func (h hiddenSet) Shape() []int                            { return h.s.Shape() }
func (h hiddenSet) NumClasses() int                         { return h.s.NumClasses() }
func (h hiddenSet) Example(i int, x []float32) (int, error) { return h.s.Example(i, x) }

// faultySet fails at example bad, or returns label badLabel for it.
type faultySet struct {
	hiddenSet
	bad, badLabel int
}

var errBroken = errors.New("broken")

func (f faultySet) Example(i int, x []float32) (int, error) {
	l, err := f.hiddenSet.Example(i, x)
	if i != f.bad {
		return l, err
	}
	if f.badLabel != 0 {
		return f.badLabel, nil
	}
	return 0, errBroken
}

// countingSet returns a Set of n images of 1 x 2 x 3 whose values are
// 10 i + j and whose labels are i % classes.
func countingSet(n, classes int) *Set {
	s := &Set{Name: "counting", N: n, C: 1, H: 2, W: 3, X: make([]float32, n*6), Y: make([]uint8, n), Classes: classes}
	for i := range n {
		for j := range 6 {
			s.X[i*6+j] = float32(10*i + j)
		}
		s.Y[i] = uint8(i % classes)
	}
	return s
}

func TestSetExample(t *testing.T) {
	s := countingSet(4, 3)
	if got := s.Shape(); !slices.Equal(got, []int{1, 2, 3}) || s.Len() != 4 || s.NumClasses() != 3 {
		t.Fatalf("Shape %v, Len %d, NumClasses %d; want [1 2 3], 4, 3", got, s.Len(), s.NumClasses())
	}
	for _, tc := range []struct {
		i, buf int
		label  int
		fault  string // "" if none
	}{
		{0, 6, 0, ""},
		{3, 6, 0, ""},
		{2, 9, 2, ""}, // a longer buffer is written at its start
		{-1, 6, 0, "example -1"},
		{4, 6, 0, "example 4"},
		{1, 5, 0, "buffer holds 5"},
	} {
		x := make([]float32, tc.buf)
		x[len(x)-1] = -7
		label, err := s.Example(tc.i, x)
		if tc.fault != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fault) || !strings.HasPrefix(err.Error(), "data: ") {
				t.Errorf("Example(%d) with %d values: error %v, want one saying %q", tc.i, tc.buf, err, tc.fault)
			}
			continue
		}
		if err != nil || label != int(s.Y[tc.i]) || !slices.Equal(x[:6], s.Image(tc.i)) {
			t.Errorf("Example(%d) = %d, %v, %v; want %d, %v", tc.i, label, err, x[:6], s.Y[tc.i], s.Image(tc.i))
		}
		if tc.buf > 6 && x[len(x)-1] != -7 {
			t.Errorf("Example(%d) wrote past the example", tc.i)
		}
	}
}

func TestFromSlices(t *testing.T) {
	for _, tc := range []struct {
		name    string
		x       int // values
		labels  []int
		shape   []int
		classes int
		chw     [3]int // want, if no fault
		fault   string
	}{
		{"vector", 8, []int{0, 1}, []int{4}, 2, [3]int{1, 1, 4}, ""},
		{"plane", 12, []int{1, 0}, []int{2, 3}, 2, [3]int{1, 2, 3}, ""},
		{"image", 24, []int{255, 0}, []int{2, 2, 3}, 256, [3]int{2, 2, 3}, ""},
		{"no examples", 0, nil, []int{5}, 3, [3]int{1, 1, 5}, ""},
		{"four dims", 16, []int{0}, []int{1, 2, 2, 4}, 2, [3]int{}, "1 to 3 dimensions"},
		{"no dims", 1, []int{0}, nil, 2, [3]int{}, "1 to 3 dimensions"},
		{"zero size", 0, []int{0}, []int{2, 0}, 2, [3]int{}, "positive sizes"},
		{"short x", 7, []int{0, 1}, []int{4}, 2, [3]int{}, "7 values for 2 examples"},
		{"long x", 9, []int{0, 1}, []int{4}, 2, [3]int{}, "9 values for 2 examples"},
		{"257 classes", 4, []int{0}, []int{4}, 257, [3]int{}, "1 to 256"},
		{"0 classes", 4, []int{0}, []int{4}, 0, [3]int{}, "1 to 256"},
		{"label too big", 8, []int{0, 2}, []int{4}, 2, [3]int{}, "label 2 of example 1"},
		{"negative label", 8, []int{-1, 0}, []int{4}, 2, [3]int{}, "label -1 of example 0"},
	} {
		x := make([]float32, tc.x)
		for i := range x {
			x[i] = float32(i)
		}
		s, err := FromSlices(tc.name, x, tc.labels, tc.shape, tc.classes)
		if tc.fault != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fault) || !strings.HasPrefix(err.Error(), "data: "+tc.name) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.fault)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if [3]int{s.C, s.H, s.W} != tc.chw || s.N != len(tc.labels) || s.Classes != tc.classes || s.Name != tc.name {
			t.Errorf("%s: %d x %v, %d classes; want %d x %v, %d", tc.name, s.N, s.Shape(), s.Classes, len(tc.labels), tc.chw, tc.classes)
		}
		for i, l := range tc.labels {
			buf := make([]float32, s.Dim())
			got, err := s.Example(i, buf)
			if err != nil || got != l || !slices.Equal(buf, x[i*s.Dim():(i+1)*s.Dim()]) {
				t.Errorf("%s: example %d = %d, %v, %v; want %d, %v", tc.name, i, got, err, buf, l, x[i*s.Dim():(i+1)*s.Dim()])
			}
		}
	}
}

// TestLoaderDatasetPath checks that a Set served through the Dataset
// interface gives the batches its direct path gives, bit for bit, over two
// epochs and after a Seek: checkpoints of runs resume from that order.
func TestLoaderDatasetPath(t *testing.T) {
	s := countingSet(23, 4)
	batches := func(d Dataset) (xs [][]float32, ys [][]int) {
		l, err := NewLoader(d, 5, 7)
		if err != nil {
			t.Fatal(err)
		}
		if _, direct := d.(*Set); (l.set != nil) != direct {
			t.Fatalf("%T: fast path %v", d, l.set != nil)
		}
		for epoch := range 2 {
			l.SetEpoch(epoch)
			for {
				x, y := make([]float32, 5*6), make([]int, 5)
				n, err := l.Next(x, y)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				xs, ys = append(xs, x[:n*6]), append(ys, y[:n])
			}
		}
		if err := l.Seek(1, 20); err != nil {
			t.Fatal(err)
		}
		x, y := make([]float32, 5*6), make([]int, 5)
		n, err := l.Next(x, y)
		if err != nil {
			t.Fatal(err)
		}
		return append(xs, x[:n*6]), append(ys, y[:n])
	}
	dx, dy := batches(s)
	ix, iy := batches(hiddenSet{s})
	if len(dx) != 2*5+1 || len(dx) != len(ix) {
		t.Fatalf("%d batches directly, %d through the interface; want 11", len(dx), len(ix))
	}
	for b := range dx {
		if !slices.Equal(dx[b], ix[b]) || !slices.Equal(dy[b], iy[b]) {
			t.Fatalf("batch %d differs: directly %v %v, through the interface %v %v", b, dx[b], dy[b], ix[b], iy[b])
		}
		for k, label := range dy[b] {
			if i := int(dx[b][6*k]) / 10; label != i%4 {
				t.Fatalf("batch %d: example %d has label %d, want %d", b, i, label, i%4)
			}
		}
	}
	if slices.Equal(dx[0], dx[5]) {
		t.Error("epochs 0 and 1 start alike")
	}
}

func TestLoaderDatasetFaults(t *testing.T) {
	s := countingSet(8, 4)
	for _, tc := range []struct {
		name  string
		d     Dataset
		fault string
	}{
		{"Example fails", faultySet{hiddenSet{s}, 3, 0}, "data: example 3 of the data.faultySet data set: broken"},
		{"label too big", faultySet{hiddenSet{s}, 5, 4}, "example 5 of the data.faultySet data set has label 4, not in 0..3"},
		{"label negative", faultySet{hiddenSet{s}, 0, -1}, "has label -1"},
	} {
		l, err := NewLoader(tc.d, 8, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Next(make([]float32, 8*6), make([]int, 8))
		if err == nil || !strings.Contains(err.Error(), tc.fault) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.fault)
		}
		if tc.name == "Example fails" && !errors.Is(err, errBroken) {
			t.Errorf("%s: %v does not wrap the Dataset's error", tc.name, err)
		}
		if l.Pos() != 0 {
			t.Errorf("%s: a failed Next moved the loader to %d", tc.name, l.Pos())
		}
	}
	for _, tc := range []struct {
		name  string
		d     Dataset
		fault string
	}{
		{"nil", nil, "nil Dataset"},
		{"empty", hiddenSet{countingSet(0, 2)}, "has no examples"},
		{"empty set", countingSet(0, 2), "counting has no examples"},
		{"zero size", hiddenSet{&Set{N: 3, C: 1, H: 0, W: 2}}, "positive sizes"},
		{"no shape", shapeless{}, "at least one dimension"},
	} {
		if _, err := NewLoader(tc.d, 4, 1); err == nil || !strings.Contains(err.Error(), tc.fault) {
			t.Errorf("%s: NewLoader error %v, want one saying %q", tc.name, err, tc.fault)
		}
	}
}

// shapeless is a Dataset whose examples have no dimensions.
type shapeless struct{ hiddenSet }

func (shapeless) Len() int     { return 1 }
func (shapeless) Shape() []int { return nil }
