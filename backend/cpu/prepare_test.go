package cpu_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
)

func TestFill(t *testing.T) {
	t.Run("float32", testFill[float32])
	t.Run("float64", testFill[float64])
	t.Run("int32", func(t *testing.T) {
		for _, b := range backends(t) {
			buf := load(t, b, []int32{1, 2, 3, 4, 5})
			run(t, b, backend.Fill{N: 3, Dst: backend.At(buf, 1), Value: -7})
			if got, want := fmt.Sprint(read[int32](t, b, buf)), "[1 -7 -7 -7 5]"; got != want {
				t.Errorf("filled %s, want %s", got, want)
			}
		}
	})
}

func testFill[T num](t *testing.T) {
	for _, c := range []struct {
		n, off int
		v      float64
	}{{0, 2, 3}, {1, 0, -0.25}, {257, 3, 1.5}, {7, 1, math.NaN()}, {65, 0, math.Inf(-1)}} {
		t.Run(fmt.Sprintf("%d_off%d_%g", c.n, c.off, c.v), func(t *testing.T) {
			init := uniform[T](rng(1), c.off+c.n+2, -1, 1)
			want := wide(init)
			for i := c.off; i < c.off+c.n; i++ {
				want[i] = round[T](c.v)
			}
			onEach(t, func(t *testing.T, b *cpu.Backend) []T {
				buf := load(t, b, init)
				run(t, b, backend.Fill{N: c.n, Dst: backend.At(buf, c.off), Value: c.v})
				got := read[T](t, b, buf)
				near(t, "Dst", got, want, nil)
				return got
			})
		})
	}
}

func TestCheckFinite(t *testing.T) {
	floats(t, testCheckFinite[float32], testCheckFinite[float64])
}

// testCheckFinite puts one NaN or infinity at every position of vectors of
// odd lengths, and one just outside the checked range.
func testCheckFinite[T num](t *testing.T) {
	for _, b := range backends(t) {
		for _, n := range []int{1, 3, 7, 65} {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat32} {
				for pos := -1; pos <= n; pos++ {
					const off = 1
					v := uniform[T](rng(uint64(n)), n+2, -1e3, 1e3)
					v[off+pos] = T(bad)
					flag := load(t, b, []int32{0})
					run(t, b, backend.CheckFinite{N: n, Src: backend.At(load(t, b, v), off), Flag: backend.At(flag, 0)})
					// MaxFloat32 is finite in either type.
					want := pos >= 0 && pos < n && bad != math.MaxFloat32
					if got := read[int32](t, b, flag)[0]; got != b2i(want) {
						t.Errorf("%s: n %d, %v at %d: flag %d, want %d", b.Name(), n, bad, pos, got, b2i(want))
					}
				}
			}
		}
		// The flag is never cleared.
		flag := load(t, b, []int32{1})
		run(t, b, backend.CheckFinite{N: 3, Src: backend.At(load(t, b, []T{1, 2, 3}), 0), Flag: backend.At(flag, 0)})
		if got := read[int32](t, b, flag)[0]; got != 1 {
			t.Errorf("%s: a finite source cleared the flag to %d", b.Name(), got)
		}
	}
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func TestCheckProduct(t *testing.T) {
	floats(t, testCheckProduct[float32], testCheckProduct[float64])
}

func testCheckProduct[T num](t *testing.T) {
	big := math.Sqrt(math.MaxFloat32) / 4 // big^2 = MaxFloat32/16
	if dtypeOf[T]() == backend.Float64 {
		big = math.Sqrt(math.MaxFloat64) / 4
	}
	type setup struct {
		name     string
		ra       int
		aMax     float64 // the largest |A|, put at position at
		bMax     float64
		at       int
		flagged  bool
		flagInit int32
	}
	var cases []setup
	for _, at := range []int{0, 1, 4, 6} { // both lanes of the max, and the odd tail
		cases = append(cases,
			setup{"bound holds", 7, -big, big, at, false, 0},
			setup{"bound holds, flag kept", 7, big, big, at, true, 1},
			setup{"bound overflows", 9, big, -big, at, true, 0},
			setup{"A NaN", 1, math.NaN(), 1, at, true, 0},
			setup{"A +Inf", 1, math.Inf(1), 1, at, true, 0},
			setup{"B -Inf", 1, 1, math.Inf(-1), at, true, 0},
			setup{"B NaN", 1, 1, math.NaN(), at, true, 0},
			setup{"B NaN, A 0", 1, 0, math.NaN(), at, true, 0},
		)
	}
	for _, b := range backends(t) {
		for _, c := range cases {
			// A is ra x 7, B is ra x 5: the extreme entry at row 0,
			// column at (or at%5), everything else in [-1, 1).
			r := rng(uint64(c.at))
			a, bb := uniform[T](r, c.ra*7, -1, 1), uniform[T](r, c.ra*5, -1, 1)
			if c.aMax == 0 {
				clear(a)
			}
			a[c.at], bb[c.at%5] = T(c.aMax), T(c.bMax)
			flag := load(t, b, []int32{c.flagInit})
			run(t, b, backend.CheckProduct{RA: c.ra, CA: 7, CB: 5, A: backend.At(load(t, b, a), 0), B: backend.At(load(t, b, bb), 0), Flag: backend.At(flag, 0)})
			if got := read[int32](t, b, flag)[0]; got != b2i(c.flagged) {
				t.Errorf("%s: %s at %d: flag %d, want %d", b.Name(), c.name, c.at, got, b2i(c.flagged))
			}
		}
	}
}

func TestGatherScatterRows(t *testing.T) {
	floats(t, testRows[float32], testRows[float64])
}

func testRows[T num](t *testing.T) {
	const rows, width, off = 9, 5, 2
	idx := []int32{8, 0, 3, 7, 4, 1}
	r := rng(3)
	mat := uniform[T](r, off+rows*width, -1, 1) // the indexed matrix
	small := uniform[T](r, off+len(idx)*width+1, -1, 1)

	gathered := wide(small)
	scattered := wide(mat)
	for i, row := range idx {
		for j := 0; j < width; j++ {
			gathered[off+i*width+j] = float64(mat[off+int(row)*width+j])
			scattered[off+int(row)*width+j] = float64(small[off+i*width+j])
		}
	}
	// Each direction: what Dst holds before and after, what Src holds, and
	// the kernel that moves rows of width elements from Src to Dst.
	dirs := []struct {
		name     string
		dst, src []T
		want     []float64
		kernel   func(n int, rows, src, dst backend.Operand) backend.Kernel
	}{
		{"gather", small, mat, gathered, func(n int, rows, src, dst backend.Operand) backend.Kernel {
			return backend.GatherRows{N: n, Width: width, Rows: rows, Src: src, Dst: dst}
		}},
		{"scatter", mat, small, scattered, func(n int, rows, src, dst backend.Operand) backend.Kernel {
			return backend.ScatterRows{N: n, Width: width, Rows: rows, Src: src, Dst: dst}
		}},
	}
	for _, d := range dirs {
		t.Run(d.name, func(t *testing.T) {
			onEach(t, func(t *testing.T, b *cpu.Backend) []T {
				db := load(t, b, d.dst)
				run(t, b, d.kernel(len(idx), backend.At(load(t, b, idx), 0), backend.At(load(t, b, d.src), off), backend.At(db, off)))
				got := read[T](t, b, db)
				near(t, "Dst", got, d.want, nil)
				return got
			})
		})
	}
	// An index outside the matrix is an error naming it, and changes
	// nothing: the indices are all checked before any row moves.
	for _, bad := range []int32{-1, rows, 1 << 30} {
		for _, b := range backends(t) {
			bi := append([]int32(nil), idx...)
			bi[len(bi)-1] = bad
			for _, d := range dirs {
				db := load(t, b, d.dst)
				k := d.kernel(len(bi), backend.At(load(t, b, bi), 0), backend.At(load(t, b, d.src), off), backend.At(db, off))
				f, err := b.Prepare(k)
				if err != nil {
					t.Fatal(err)
				}
				err = f()
				if err == nil || !strings.Contains(err.Error(), fmt.Sprint(bad)) {
					t.Errorf("%s with index %d: error %v, want one naming the index", backend.Name(k), bad, err)
				}
				near(t, backend.Name(k)+" Dst after the error", read[T](t, b, db), wide(d.dst), nil)
			}
		}
	}
	// Rows of no columns move nothing, whatever the indices.
	for _, b := range backends(t) {
		db := load(t, b, small)
		rb := load(t, b, []int32{5, -3})
		for _, k := range []backend.Kernel{
			backend.GatherRows{N: 2, Width: 0, Rows: backend.At(rb, 0), Src: backend.At(load(t, b, mat), 0), Dst: backend.At(db, 0)},
			backend.ScatterRows{N: 2, Width: 0, Rows: backend.At(rb, 0), Src: backend.At(load(t, b, mat), 0), Dst: backend.At(db, 0)},
		} {
			f, err := prepare(t, b, k)
			if err == nil {
				err = f()
			}
			if err != nil {
				t.Errorf("%s of width 0: %v", backend.Name(k), err)
			}
			near(t, backend.Name(k)+" of width 0", read[T](t, b, db), wide(small), nil)
		}
	}
}

func TestQF(t *testing.T) {
	floats(t, testQF[float32], testQF[float64])
}

// checkQ checks that q (m x n) has orthonormal columns and that R = Q^T a
// is upper triangular with a positive diagonal and Q R = a.
func checkQ(t *testing.T, m, n int, a, q []float64, tol float64) {
	t.Helper()
	var scale float64
	for _, v := range a {
		scale += v * v
	}
	scale = math.Sqrt(scale)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			var g, rij float64
			for p := 0; p < m; p++ {
				g += q[p*n+i] * q[p*n+j]
				rij += q[p*n+i] * a[p*n+j]
			}
			if i == j {
				g--
				if !(rij > 0) {
					t.Errorf("%dx%d: R[%d,%d] = %g, want > 0", m, n, i, i, rij)
				}
			}
			if math.Abs(g) > tol {
				t.Errorf("%dx%d: (Q^T Q - I)[%d,%d] = %g", m, n, i, j, g)
			}
			if i > j && math.Abs(rij) > tol*scale {
				t.Errorf("%dx%d: R[%d,%d] = %g below the diagonal", m, n, i, j, rij)
			}
		}
	}
	// Q R = Q Q^T a = a when a is in the range of Q.
	for p := 0; p < m; p++ {
		for j := 0; j < n; j++ {
			var qr float64
			for i := 0; i < n; i++ {
				var rij float64
				for s := 0; s < m; s++ {
					rij += q[s*n+i] * a[s*n+j]
				}
				if i <= j {
					qr += q[p*n+i] * rij
				}
			}
			if math.Abs(qr-a[p*n+j]) > tol*scale {
				t.Errorf("%dx%d: (QR - A)[%d,%d] = %g", m, n, p, j, qr-a[p*n+j])
				return
			}
		}
	}
}

func testQF[T num](t *testing.T) {
	for si, s := range [][2]int{{1, 1}, {3, 1}, {7, 3}, {5, 5}, {65, 7}, {257, 5}, {16, 16}} {
		m, n := s[0], s[1]
		t.Run(fmt.Sprintf("%dx%d", m, n), func(t *testing.T) {
			a := uniform[T](rng(uint64(si)), m*n+2, -1, 1)
			onEach(t, func(t *testing.T, b *cpu.Backend) []T {
				buf := load(t, b, a)
				run(t, b, backend.QF{M: m, N: n, A: backend.At(buf, 1)})
				got := read[T](t, b, buf)
				if got[0] != a[0] || got[m*n+1] != a[m*n+1] {
					t.Errorf("elements outside A changed")
				}
				checkQ(t, m, n, wide(a[1:1+m*n]), wide(got[1:1+m*n]), 50*float64(m)*eps[T]())
				return got
			})
		})
	}
	// A NaN is an error.
	for _, b := range backends(t) {
		for _, gram := range []float64{0, 10} {
			a := uniform[T](rng(9), 9, -1, 1)
			a[4] = T(math.NaN())
			f, err := b.Prepare(backend.QF{M: 3, N: 3, A: backend.At(load(t, b, a), 0), GramBound: gram})
			if err != nil {
				t.Fatal(err)
			}
			if err := f(); err == nil {
				t.Errorf("QF of a matrix with a NaN (GramBound %g): no error", gram)
			}
		}
	}
}

// TestQFGramBound checks the Cholesky route of square float64 matrices
// against Householder QR, and that a bound above linalg's limit (or a
// float32 or non-square matrix) takes the Householder route bit for bit.
func TestQFGramBound(t *testing.T) {
	b := cpu.New(cpu.Options{})
	defer b.Close()
	qf := func(m, n int, a []float64, gram float64) []float64 {
		buf := load(t, b, a)
		run(t, b, backend.QF{M: m, N: n, A: backend.At(buf, 0), GramBound: gram})
		return read[float64](t, b, buf)
	}
	for _, n := range []int{1, 3, 7, 65} {
		// 2 I + E, |E| <= 0.6: singular values in [1.4, 2.6], so
		// cond(A^T A) <= 3.5.
		a := uniform[float64](rng(uint64(n)), n*n, -0.6/math.Sqrt(float64(n)), 0.6/math.Sqrt(float64(n)))
		for i := 0; i < n; i++ {
			a[i*n+i] += 2
		}
		house := qf(n, n, a, 0)
		chol := qf(n, n, a, 10)
		checkQ(t, n, n, a, chol, 1e-12)
		var diff float64
		for i := range house {
			diff = max(diff, math.Abs(house[i]-chol[i]))
		}
		if diff > 1e-12 {
			t.Errorf("%dx%d: Cholesky and Householder Q differ by %g", n, n, diff)
		}
		near(t, "GramBound 1e9", qf(n, n, a, 1e9), house, nil)
	}
	a := uniform[float64](rng(1), 21, -1, 1)
	near(t, "GramBound of a 7x3 matrix", qf(7, 3, a, 10), qf(7, 3, a, 0), nil)
	a32 := uniform[float32](rng(2), 25, -1, 1)
	q32 := func(gram float64) []float32 {
		buf := load(t, b, a32)
		run(t, b, backend.QF{M: 5, N: 5, A: backend.At(buf, 0), GramBound: gram})
		return read[float32](t, b, buf)
	}
	near(t, "GramBound of a float32 matrix", q32(10), wide(q32(0)), nil)
}
