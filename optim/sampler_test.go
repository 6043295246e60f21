package optim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/orthonet/orthonet/optim"
)

// TestSamplerDraws checks the draws of every sampler of optim.Samplers,
// for a few weights of n rows drawn r at a time and frames of both element
// types: the same seed gives the same draws, bit for bit, and another seed
// others; an Undraw followed by a Draw from the same random state draws
// the same again; a sampler of rows draws r distinct rows in 0 to n-1,
// and another one an r x n frame with orthonormal rows.
func TestSamplerDraws(t *testing.T) {
	const k = 8 // draws of each sequence
	for _, s := range optim.Samplers {
		for _, size := range [][2]int{{10, 3}, {12, 4}, {6, 6}} {
			for _, f32 := range []bool{false, true} {
				n, r := size[0], size[1]
				t.Run(fmt.Sprintf("%v/%dx%d/f32=%v", s, n, r, f32), func(t *testing.T) {
					a, b, c := drawSeq(t, s, n, r, k, 1, f32), drawSeq(t, s, n, r, k, 1, f32), drawSeq(t, s, n, r, k, 2, f32)
					if !reflect.DeepEqual(a, b) {
						t.Errorf("the same seed drew %v, then %v", a, b)
					}
					if reflect.DeepEqual(a, c) {
						t.Errorf("seeds 1 and 2 drew the same %d submanifolds: %v", k, a)
					}
					tol := 1e-12
					if f32 {
						tol = 1e-5
					}
					for i, d := range a {
						if err := checkDraw(s, d, n, r, tol); err != nil {
							t.Errorf("draw %d: %v", i, err)
						}
					}
					checkUndraw(t, s, n, r, f32)
				})
			}
		}
	}
}

// newSubmanifold returns a Submanifold for a draw of s of r of n rows,
// with a frame of float32 (f32) or float64 for a sampler whose Rows is
// false.
func newSubmanifold(s optim.Sampler, n, r int, f32 bool) *optim.Submanifold {
	switch {
	case s.Rows():
		return &optim.Submanifold{Rows: make([]int, r)}
	case f32:
		return &optim.Submanifold{Frame32: make([]float32, r*n)}
	}
	return &optim.Submanifold{Frame64: make([]float64, r*n)}
}

// values returns the drawn rows of p, or its frame, as float64s.
func values(p *optim.Submanifold) []float64 {
	var out []float64
	for _, v := range p.Rows {
		out = append(out, float64(v))
	}
	for _, v := range p.Frame32 {
		out = append(out, float64(v))
	}
	return append(out, p.Frame64...)
}

// drawSeq returns k draws of s for a weight of n rows, r at a time, with
// a random source seeded by seed (values).
func drawSeq(t *testing.T, s optim.Sampler, n, r, k int, seed uint64, f32 bool) [][]float64 {
	t.Helper()
	d, err := s.Start(n, r)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	var out [][]float64
	for range k {
		p := newSubmanifold(s, n, r, f32)
		if err := d.Draw(rng, p); err != nil {
			t.Fatal(err)
		}
		out = append(out, values(p))
	}
	return out
}

// checkDraw returns why d, a draw of s (values), is not r distinct rows in
// 0 to n-1 (a sampler of rows) or an r x n frame whose rows are
// orthonormal to tol.
func checkDraw(s optim.Sampler, d []float64, n, r int, tol float64) error {
	if s.Rows() {
		seen := map[float64]bool{}
		for _, v := range d {
			if v < 0 || v >= float64(n) || v != math.Trunc(v) || seen[v] {
				return fmt.Errorf("rows %v: want %d distinct rows in 0 to %d", d, r, n-1)
			}
			seen[v] = true
		}
		if len(d) != r {
			return fmt.Errorf("%d rows %v, want %d", len(d), d, r)
		}
		return nil
	}
	for i := range r {
		for j := range r {
			dot := 0.0
			for c := range n {
				dot += d[i*n+c] * d[j*n+c]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if !(math.Abs(dot-want) <= tol) {
				return fmt.Errorf("frame rows %d and %d: product %v, want %v", i, j, dot, want)
			}
		}
	}
	return nil
}

// checkUndraw checks that a Draw after an Undraw of s's draws, from the
// random state the undone draw started from, draws what it drew, and that
// the draws go on as they would have: the second draw of a sequence.
func checkUndraw(t *testing.T, s optim.Sampler, n, r int, f32 bool) {
	t.Helper()
	want := drawSeq(t, s, n, r, 2, 3, f32)
	d, err := s.Start(n, r)
	if err != nil {
		t.Fatal(err)
	}
	src := rand.NewPCG(3, 7)
	rng := rand.New(src)
	got := make([][]float64, 2)
	for i := range got {
		saved := *src
		p := newSubmanifold(s, n, r, f32)
		if err := d.Draw(rng, p); err != nil {
			t.Fatal(err)
		}
		d.Undraw()
		*src = saved
		if err := d.Draw(rng, p); err != nil {
			t.Fatal(err)
		}
		got[i] = values(p)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("draws undone and drawn again: %v, want %v", got, want)
	}
}
