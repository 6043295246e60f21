package manifold

import (
	"math"
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
)

// omega returns (G X^T - X G^T)/2, the Riemannian gradient of F(U X) on O(n)
// at the identity.
func omega(n, p int, x, g []float64) []float64 {
	gx := make([]float64, n*n)
	linalg.Mul(false, true, n, n, p, g, x, gx)
	w := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			w[i*n+j] = (gx[i*n+j] - gx[j*n+i]) / 2
		}
	}
	return w
}

// TestProposition1 checks E||P Omega P^T||^2 = r(r-1)/(n(n-1)) ||Omega||^2
// (the paper's Proposition 1) for both samplers by Monte Carlo, within four
// standard errors of the estimate.
func TestProposition1(t *testing.T) {
	for _, tc := range []struct{ n, p, r int }{{8, 3, 4}, {12, 12, 5}, {6, 2, 2}} {
		rng := newRNG(uint64(tc.n*100 + tc.r))
		st, _ := NewStiefel[float64](tc.n, tc.p)
		x := make([]float64, tc.n*tc.p)
		_ = st.Random(x, rng)
		w := omega(tc.n, tc.p, x, randn(rng, tc.n*tc.p))
		n, r := tc.n, tc.r
		want := float64(r*(r-1)) / float64(n*(n-1)) * linalg.Dot(w, w)

		perm, err := NewPermutation(n, r)
		if err != nil {
			t.Fatal(err)
		}
		haar, err := NewHaarRows[float64](n, r)
		if err != nil {
			t.Fatal(err)
		}
		idx := make([]int, r)
		pm := make([]float64, r*n)
		pw := make([]float64, r*n)
		a := make([]float64, r*r)
		const k = 40000
		for _, name := range []string{"permutation", "orthogonal"} {
			var sum, sum2 float64
			for it := 0; it < k; it++ {
				if name == "permutation" {
					if err := perm.Sample(idx, rng); err != nil {
						t.Fatal(err)
					}
					for i, si := range idx {
						for j, sj := range idx {
							a[i*r+j] = w[si*n+sj]
						}
					}
				} else {
					if err := haar.Sample(pm, rng); err != nil {
						t.Fatal(err)
					}
					linalg.Mul(false, false, r, n, n, pm, w, pw)
					linalg.Mul(false, true, r, r, n, pw, pm, a)
				}
				v := linalg.Dot(a, a)
				sum += v
				sum2 += v * v
			}
			mean := sum / k
			se := math.Sqrt((sum2/k - mean*mean) / k)
			t.Logf("n=%d r=%d %s: E||A||^2 = %.5f +- %.5f, Proposition 1 gives %.5f", n, r, name, mean, se, want)
			if math.Abs(mean-want) > 4*se {
				t.Errorf("n=%d r=%d %s: estimate %.5f differs from %.5f by %.1f standard errors", n, r, name, mean, want, math.Abs(mean-want)/se)
			}
		}
	}
}

// TestLemma2 checks ||(G X^T - X G^T)/2||^2 >= ||grad F(X)||^2 / 2 on random
// instances (the paper's Lemma 2).
func TestLemma2(t *testing.T) {
	rng := newRNG(7)
	for _, sh := range []struct{ n, p int }{{5, 2}, {10, 10}, {30, 7}, {40, 1}} {
		st, _ := NewStiefel[float64](sh.n, sh.p)
		x := make([]float64, sh.n*sh.p)
		for trial := 0; trial < 20; trial++ {
			_ = st.Random(x, rng)
			g := randn(rng, sh.n*sh.p)
			if trial%2 == 1 { // a gradient concentrated in the span of X
				linalg.Mul(false, false, sh.n, sh.p, sh.p, x, randn(rng, sh.p*sh.p), g)
			}
			w := omega(sh.n, sh.p, x, g)
			rg := make([]float64, len(g))
			if err := st.Proj(rg, x, g); err != nil {
				t.Fatal(err)
			}
			lhs, rhs := linalg.Dot(w, w), linalg.Dot(rg, rg)/2
			if lhs < rhs*(1-1e-12)-1e-24*linalg.Dot(g, g) {
				t.Errorf("n=%d p=%d: ||Omega||^2 = %g < ||grad F||^2/2 = %g", sh.n, sh.p, lhs, rhs)
			}
		}
	}
}

// TestHaarRows checks orthonormal rows and the first two moments of the
// entries: a Haar matrix has E[P_ij] = 0 and E[P_ij^2] = 1/n. A QR without
// the sign fix fails the first (its diagonal has a fixed sign).
func TestHaarRows(t *testing.T) {
	const n, r, k = 6, 3, 20000
	h, err := NewHaarRows[float64](n, r)
	if err != nil {
		t.Fatal(err)
	}
	rng := newRNG(9)
	pm := make([]float64, r*n)
	ppt := make([]float64, r*r)
	var sum, sum2 [r * n]float64
	for it := 0; it < k; it++ {
		if err := h.Sample(pm, rng); err != nil {
			t.Fatal(err)
		}
		if it < 10 {
			linalg.Mul(false, true, r, r, n, pm, pm, ppt)
			for i := 0; i < r; i++ {
				ppt[i*r+i]--
			}
			if e := linalg.Norm(ppt); e > 1e-13 {
				t.Fatalf("||P P^T - I|| = %g", e)
			}
		}
		for i, v := range pm {
			sum[i] += v
			sum2[i] += v * v
		}
	}
	for i := range sum {
		mean, sq := sum[i]/k, sum2[i]/k
		se := math.Sqrt((sq - mean*mean) / k)
		if math.Abs(mean) > 4.5*se {
			t.Errorf("entry (%d,%d): mean %.4f is %.1f standard errors from 0", i/n, i%n, mean, math.Abs(mean)/se)
		}
		// Var of P_ij^2 for Haar is 2/(n(n+2)) - 1/n^2.
		se2 := math.Sqrt((2/float64(n*(n+2)) - 1/float64(n*n)) / k)
		if math.Abs(sq-1/float64(n)) > 4.5*se2 {
			t.Errorf("entry (%d,%d): E[P^2] = %.4f, want %.4f", i/n, i%n, sq, 1/float64(n))
		}
	}
}

// TestPermutationUniform checks that every ordered triple from {0..4} is
// drawn equally often (chi-square over 60 cells) and that draws are distinct.
func TestPermutationUniform(t *testing.T) {
	const n, r, k = 5, 3, 60000
	s, err := NewPermutation(n, r)
	if err != nil {
		t.Fatal(err)
	}
	rng := newRNG(11)
	counts := map[[3]int]int{}
	idx := make([]int, r)
	for it := 0; it < k; it++ {
		if err := s.Sample(idx, rng); err != nil {
			t.Fatal(err)
		}
		counts[[3]int{idx[0], idx[1], idx[2]}]++
	}
	if len(counts) != 60 {
		t.Fatalf("saw %d distinct ordered triples, want 60", len(counts))
	}
	var chi2 float64
	e := float64(k) / 60
	for key, c := range counts {
		if key[0] == key[1] || key[0] == key[2] || key[1] == key[2] {
			t.Fatalf("repeated index in %v", key)
		}
		chi2 += (float64(c) - e) * (float64(c) - e) / e
	}
	// 59 degrees of freedom: the 0.999 quantile is about 98.3.
	if chi2 > 98.3 {
		t.Errorf("chi-square %.1f over 59 degrees of freedom: not uniform", chi2)
	}
}

// TestPermutationLarge draws from n = 2^30 rows: the sampler works in O(r)
// memory, so this is instant; one that built an O(n) permutation would not.
func TestPermutationLarge(t *testing.T) {
	for _, tc := range []struct{ n, r int }{{1 << 30, 64}, {1000, 1000}, {7, 1}} {
		s, err := NewPermutation(tc.n, tc.r)
		if err != nil {
			t.Fatal(err)
		}
		rng := newRNG(13)
		idx := make([]int, tc.r)
		for it := 0; it < 5; it++ {
			if err := s.Sample(idx, rng); err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			for _, v := range idx {
				if v < 0 || v >= tc.n || seen[v] {
					t.Fatalf("n=%d r=%d: bad or repeated index %d", tc.n, tc.r, v)
				}
				seen[v] = true
			}
		}
	}
	if _, err := NewPermutation(4, 5); err == nil {
		t.Error("NewPermutation(4, 5) did not fail")
	}
	if _, err := NewHaarRows[float32](4, 0); err == nil {
		t.Error("NewHaarRows(4, 0) did not fail")
	}
}
