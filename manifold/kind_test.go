package manifold

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestKinds checks the built-in kinds: their names, and the manifolds they
// make for each element type, with the retraction they carry.
func TestKinds(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		name string
		want string // the manifold's String for 6 x 2 points
	}{
		{StiefelKind{}, "stiefel", "Stiefel(6, 2)"},
		{StiefelKind{Retraction: Cayley}, "stiefel (cayley retraction)", "Stiefel(6, 2)"},
		{GrassmannKind{}, "grassmann", "Grassmann(6, 2)"},
		{GrassmannKind{Retraction: Polar}, "grassmann (polar retraction)", "Grassmann(6, 2)"},
	} {
		if got := tc.k.String(); got != tc.name {
			t.Errorf("%#v: String %q, want %q", tc.k, got, tc.name)
		}
		m32, err := tc.k.Float32(6, 2)
		if err != nil {
			t.Fatal(err)
		}
		m64, err := tc.k.Float64(6, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []any{m32, m64} {
			if got := m.(interface{ String() string }).String(); got != tc.want {
				t.Errorf("%v: manifold %q, want %q", tc.k, got, tc.want)
			}
		}
		var r Retraction
		switch m := m64.(type) {
		case *Stiefel[float64]:
			r = m.Retraction
		case *Grassmann[float64]:
			r = m.Retraction
		}
		if want := retractionOf(tc.k); r != want {
			t.Errorf("%v: retraction %v, want %v", tc.k, r, want)
		}
		if _, err := tc.k.Float64(2, 6); err == nil {
			t.Errorf("%v: 2 x 6 points: no error", tc.k)
		}
	}
}

func retractionOf(k Kind) Retraction {
	switch k := k.(type) {
	case StiefelKind:
		return k.Retraction
	case GrassmannKind:
		return k.Retraction
	}
	return QR
}

// TestMatrixOf checks the matrix view of shapes.
func TestMatrixOf(t *testing.T) {
	for _, tc := range []struct {
		shape      []int
		rows, cols int
		ok         bool
	}{
		{nil, 0, 0, false},
		{[]int{5}, 0, 0, false},
		{[]int{5, 3}, 5, 3, true},
		{[]int{8, 3, 3, 3}, 8, 27, true},
	} {
		r, c, ok := MatrixOf(tc.shape)
		if r != tc.rows || c != tc.cols || ok != tc.ok {
			t.Errorf("MatrixOf(%v) = %d, %d, %v, want %d, %d, %v", tc.shape, r, c, ok, tc.rows, tc.cols, tc.ok)
		}
	}
}

// TestOf checks the manifold of a weight: a tall one as it is, a wide one
// transposed, and the refusals of a wide Grassmann weight and of a kind
// whose manifold has the wrong shape.
func TestOf(t *testing.T) {
	m, wide, err := Of[float32](StiefelKind{}, 7, 3)
	if n, p := m.Dims(); err != nil || wide || n != 7 || p != 3 {
		t.Errorf("tall: %d x %d, wide %v, %v", n, p, wide, err)
	}
	m, wide, err = Of[float32](StiefelKind{}, 3, 7)
	if n, p := m.Dims(); err != nil || !wide || n != 7 || p != 3 {
		t.Errorf("wide: %d x %d, wide %v, %v", n, p, wide, err)
	}
	for _, tc := range []struct {
		k          Kind
		rows, cols int
		want       string
	}{
		{GrassmannKind{}, 2, 5, "marked Grassmann but is 2 x 5"},
		{nil, 4, 2, "no manifold kind"},
		{squareKind{}, 4, 2, "the square manifold of 4 x 2 points has points of 4 x 4"},
		{noneKind{}, 4, 2, "the none manifold gave none for 4 x 2 points"},
	} {
		if _, _, err := Of[float64](tc.k, tc.rows, tc.cols); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.k, err, tc.want)
		}
	}
}

// squareKind makes n x n manifolds whatever p is asked for.
type squareKind struct{}

func (squareKind) String() string                              { return "square" }
func (squareKind) Float32(n, _ int) (Manifold[float32], error) { return NewStiefel[float32](n, n) }
func (squareKind) Float64(n, _ int) (Manifold[float64], error) { return NewStiefel[float64](n, n) }

// noneKind makes no manifold.
type noneKind struct{}

func (noneKind) String() string                              { return "none" }
func (noneKind) Float32(_, _ int) (Manifold[float32], error) { return nil, nil }
func (noneKind) Float64(_, _ int) (Manifold[float64], error) { return nil, nil }

// TestOrthonormalizeWeight checks that Orthonormalize puts tall and wide
// Gaussian weights of both types on their manifold (orthonormal columns,
// or rows for a wide one), as Feasibility then reports, and refuses a
// weight with a NaN or of the wrong length.
func TestOrthonormalizeWeight(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, shape := range [][2]int{{9, 4}, {4, 9}} {
		rows, cols := shape[0], shape[1]
		w64 := make([]float64, rows*cols)
		for i := range w64 {
			w64[i] = rng.NormFloat64()
		}
		w32 := make([]float32, len(w64))
		for i, v := range w64 {
			w32[i] = float32(v)
		}
		if f, err := Feasibility(StiefelKind{}, rows, cols, w64); err != nil || f < 0.1 {
			t.Errorf("%d x %d: a Gaussian weight: feasibility %g, %v", rows, cols, f, err)
		}
		if err := Orthonormalize(StiefelKind{}, rows, cols, w64); err != nil {
			t.Fatal(err)
		}
		if err := Orthonormalize(StiefelKind{}, rows, cols, w32); err != nil {
			t.Fatal(err)
		}
		if f, err := Feasibility(StiefelKind{}, rows, cols, w64); err != nil || f > 1e-12 {
			t.Errorf("%d x %d float64: feasibility %g, %v", rows, cols, f, err)
		}
		if f, err := Feasibility(StiefelKind{}, rows, cols, w32); err != nil || f > 1e-5 {
			t.Errorf("%d x %d float32: feasibility %g, %v", rows, cols, f, err)
		}
		// The rows of a wide weight (the columns of a tall one) are orthonormal.
		k := min(rows, cols)
		for a := range k {
			for b := range k {
				var d float64
				for i := range max(rows, cols) {
					if rows < cols {
						d += w64[a*cols+i] * w64[b*cols+i]
					} else {
						d += w64[i*cols+a] * w64[i*cols+b]
					}
				}
				if want := float64(b2i(a == b)); math.Abs(d-want) > 1e-12 {
					t.Fatalf("%d x %d: <%d, %d> = %g, want %g", rows, cols, a, b, d, want)
				}
			}
		}
	}
	bad := make([]float64, 8)
	bad[3] = math.NaN()
	if err := Orthonormalize(StiefelKind{}, 4, 2, bad); err == nil {
		t.Error("a weight with a NaN: no error")
	}
	if err := Orthonormalize(StiefelKind{}, 4, 2, make([]float64, 7)); err == nil {
		t.Error("a weight of 7 entries for 4 x 2: no error")
	}
	if _, err := Feasibility(StiefelKind{}, 4, 2, make([]float64, 9)); err == nil {
		t.Error("Feasibility of 9 entries for 4 x 2: no error")
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
