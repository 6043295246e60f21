package optim

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// sampler draws RSDM's random submanifold, the first r rows P of the
// orthogonal matrix P_k in U(Y) = P_k^T diag(Y, I) P_k (the paper's
// equation (2)), and moves matrices in and out of it. Permutation and
// Blocks sampling pick rows of I_n (rowSampler), Orthogonal takes
// Haar-random ones (haarSampler).
type sampler[T Float] interface {
	// draw samples P for the next outer iteration (Algorithm 1, line 3).
	draw(rng *rand.Rand) error
	// undraw returns the sampler's own position (not rng, which RSDM
	// restores) to where it was before the last draw, for a step that failed.
	undraw()
	// project sets dst (r x p) = P a for an n x p matrix a.
	project(dst, a []T)
	// projectFactor sets dst (k x r) = A P^T for a k x n matrix A, the
	// first factor of a Factored gradient.
	projectFactor(dst, a []T, k int)
	// update moves x from U(y) X_0 to U(ynew) X_0 (Algorithm 1, line 6),
	// where U(Y) = P^T diag(Y, I) P and px0 = P X_0 (r x p) is the projected
	// point at the first inner step.
	update(x, px0 []T, y, ynew []float64)
	// save writes the sampler's state into s, with the drawn P when an
	// inner loop is under way.
	save(s State, inLoop bool)
	// load checks the sampler's part of s and returns the function that
	// restores it; on error the sampler is unchanged.
	load(s State, inLoop bool) (restore func(), err error)
}

// newSampler returns the sampler of an n x p weight for r-dimensional
// submanifolds.
func newSampler[T Float](s Sampling, n, p, r int) (sampler[T], error) {
	switch s {
	case Permutation:
		perm, err := manifold.NewPermutation(n, r)
		if err != nil {
			return nil, err
		}
		return &permSampler[T]{rowSampler: newRowSampler[T](n, p, r), perm: perm}, nil
	case Orthogonal:
		haar, err := manifold.NewHaarRows[T](n, r)
		if err != nil {
			return nil, err
		}
		return &haarSampler[T]{n: n, p: p, r: r, haar: haar,
			rows: make([]T, r*n), yt: make([]T, r*r), upd: make([]T, r*p)}, nil
	case Blocks:
		return &blockSampler[T]{rowSampler: newRowSampler[T](n, p, r),
			order: make([]int, n), orderPrev: make([]int, n), block: -1}, nil
	}
	return nil, fmt.Errorf("optim: unknown sampling %v", s)
}

// rowSampler is the part of the Permutation and Blocks samplers that works
// with the sampled rows: P is a selection of r distinct rows of I_n, so that
// products with it are gathers and scatters, O(r p) instead of O(n r p).
type rowSampler[T Float] struct {
	n, p, r int
	idx     []int     // the sampled rows
	yt      []T       // r x r
	upd     []T       // r x p: the new sampled rows
	wide    []float64 // AddMul's workspace
}

func newRowSampler[T Float](n, p, r int) rowSampler[T] {
	return rowSampler[T]{n: n, p: p, r: r, idx: make([]int, r), yt: make([]T, r*r), upd: make([]T, r*p)}
}

func (s *rowSampler[T]) project(dst, a []T) {
	p := s.p
	for i, row := range s.idx {
		copy(dst[i*p:i*p+p], a[row*p:row*p+p])
	}
}

func (s *rowSampler[T]) projectFactor(dst, a []T, k int) {
	n, r := s.n, s.r
	for j := 0; j < k; j++ {
		row, d := a[j*n:(j+1)*n], dst[j*r:(j+1)*r]
		for i, c := range s.idx {
			d[i] = row[c]
		}
	}
}

// update writes the new sampled rows U(ynew) X_0 = X_0 + (ynew - I) P X_0.
// Adding the small correction (ynew - I) P X_0 instead of multiplying by
// ynew keeps float32 rounding relative to the correction's size, so that
// ||X^T X - I|| does not drift by eps ||Y|| a step.
func (s *rowSampler[T]) update(x, px0 []T, _, ynew []float64) {
	r, p := s.r, s.p
	for i, v := range ynew {
		s.yt[i] = T(v)
	}
	for i := 0; i < r; i++ {
		s.yt[i*r+i] = T(ynew[i*r+i] - 1)
	}
	copy(s.upd, px0)
	linalg.AddMul(r, p, r, s.yt, px0, s.upd, &s.wide)
	for i, row := range s.idx {
		copy(x[row*p:row*p+p], s.upd[i*p:i*p+p])
	}
}

// saveRows writes the sampled rows into s.
func (s *rowSampler[T]) saveRows(st State) { st.Buffers["rows"] = ints64(s.idx) }

// loadRows checks the sampled rows in st and returns the function that
// restores them.
func (s *rowSampler[T]) loadRows(st State) (func(), error) {
	idx := make([]int64, s.r)
	if _, err := buffer(st, "rows", idx, false); err != nil {
		return nil, err
	}
	for _, v := range idx {
		if v < 0 || v >= int64(s.n) {
			return nil, fmt.Errorf("optim: rsdm state: sampled row %d outside 0 to %d", v, s.n-1)
		}
	}
	return func() {
		for i, v := range idx {
			s.idx[i] = int(v)
		}
	}, nil
}

// noBlock checks that a state restored into a sampler without blocks has
// no block position; State writes "block" = 0 for those samplers.
func noBlock(st State, s Sampling) error {
	if b, ok := st.Counters["block"]; ok && b != -1 && b != 0 {
		return fmt.Errorf("optim: rsdm state has block %d but the sampling is %v", b, s)
	}
	return nil
}

// permSampler is Permutation sampling: r distinct rows drawn uniformly.
type permSampler[T Float] struct {
	rowSampler[T]
	perm *manifold.Permutation
}

func (s *permSampler[T]) draw(rng *rand.Rand) error { return s.perm.Sample(s.idx, rng) }

func (s *permSampler[T]) undraw() {} // a draw only advances rng

func (s *permSampler[T]) save(st State, inLoop bool) {
	st.Counters["block"] = 0
	if inLoop {
		s.saveRows(st)
	}
}

func (s *permSampler[T]) load(st State, inLoop bool) (func(), error) {
	if err := noBlock(st, Permutation); err != nil {
		return nil, err
	}
	if !inLoop {
		return func() {}, nil
	}
	return s.loadRows(st)
}

// blockSampler is Blocks sampling (Algorithm 2): a random order of all rows
// per pass, cut into ceil(n/r) blocks of r visited in turn, the last one
// overlapping the one before it when r does not divide n.
type blockSampler[T Float] struct {
	rowSampler[T]
	order     []int // this pass's row order
	block     int   // the next block of order; -1 before the first pass
	orderPrev []int // order before the last draw's reshuffle
	blockPrev int   // block before the last draw
	shuffled  bool  // the last draw started a pass
}

func (s *blockSampler[T]) draw(rng *rand.Rand) error {
	s.blockPrev, s.shuffled = s.block, false
	if nb := (s.n + s.r - 1) / s.r; s.block < 0 || s.block == nb {
		copy(s.orderPrev, s.order)
		s.shuffled = true
		for i := range s.order {
			s.order[i] = i
		}
		rng.Shuffle(s.n, func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
		s.block = 0
	}
	start := min(s.block*s.r, s.n-s.r)
	copy(s.idx, s.order[start:start+s.r])
	s.block++
	return nil
}

func (s *blockSampler[T]) undraw() {
	s.block = s.blockPrev
	if s.shuffled {
		copy(s.order, s.orderPrev)
		s.shuffled = false
	}
}

func (s *blockSampler[T]) save(st State, inLoop bool) {
	st.Counters["block"] = int64(s.block)
	if s.block >= 0 {
		st.Buffers["order"] = ints64(s.order)
	}
	if inLoop {
		s.saveRows(st)
	}
}

func (s *blockSampler[T]) load(st State, inLoop bool) (func(), error) {
	block, err := st.counter("block", -1, int64((s.n+s.r-1)/s.r))
	if err != nil {
		return nil, err
	}
	var order []int64
	if block >= 0 {
		order = make([]int64, s.n)
		if _, err := buffer(st, "order", order, false); err != nil {
			return nil, err
		}
		seen := make([]bool, s.n)
		for _, v := range order {
			if v < 0 || v >= int64(s.n) || seen[v] {
				return nil, fmt.Errorf("optim: rsdm state: block order is not a permutation of 0 to %d", s.n-1)
			}
			seen[v] = true
		}
	}
	rows := func() {}
	if inLoop {
		if rows, err = s.loadRows(st); err != nil {
			return nil, err
		}
	}
	return func() {
		s.block = block
		for i, v := range order {
			s.order[i] = int(v)
		}
		rows()
	}, nil
}

// haarSampler is Orthogonal sampling: P is r rows of a Haar-random
// orthogonal matrix, so that every row of X moves, O(n p r).
type haarSampler[T Float] struct {
	n, p, r int
	haar    *manifold.HaarRows[T]
	rows    []T // r x n: P
	yt      []T // r x r
	upd     []T // r x p: the change of P X
}

func (s *haarSampler[T]) draw(rng *rand.Rand) error { return s.haar.Sample(s.rows, rng) }

func (s *haarSampler[T]) undraw() {} // a draw only advances rng

func (s *haarSampler[T]) project(dst, a []T) {
	linalg.Mul(false, false, s.r, s.p, s.n, s.rows, a, dst)
}

func (s *haarSampler[T]) projectFactor(dst, a []T, k int) {
	linalg.Gemm(false, true, k, s.r, s.n, 1, a, s.n, s.rows, s.n, 0, dst, s.r)
}

// update adds P^T (ynew - y) P X_0 to x = U(y) X_0: a correction of the
// current point rather than U(ynew) X_0 formed anew, for the reason given
// at rowSampler.update.
func (s *haarSampler[T]) update(x, px0 []T, y, ynew []float64) {
	for i := range s.yt {
		s.yt[i] = T(ynew[i] - y[i])
	}
	linalg.Mul(false, false, s.r, s.p, s.r, s.yt, px0, s.upd)
	linalg.Gemm(true, false, s.n, s.p, s.r, 1, s.rows, s.n, s.upd, s.p, 1, x, s.p)
}

func (s *haarSampler[T]) save(st State, inLoop bool) {
	st.Counters["block"] = 0
	if inLoop {
		st.Buffers["haar_rows"] = append([]T(nil), s.rows...)
		// States have always held "rows", which readers before this
		// sampler required; Orthogonal sampling has no rows to list.
		st.Buffers["rows"] = make([]int64, s.r)
	}
}

func (s *haarSampler[T]) load(st State, inLoop bool) (func(), error) {
	if err := noBlock(st, Orthogonal); err != nil {
		return nil, err
	}
	if !inLoop {
		return func() {}, nil
	}
	rows := make([]T, len(s.rows))
	if _, err := buffer(st, "haar_rows", rows, false); err != nil {
		return nil, err
	}
	return func() { copy(s.rows, rows) }, nil
}
