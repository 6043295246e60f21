package optim

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Sampler draws RSDM's random submanifolds (the paper's Algorithm 1, line
// 3): at each outer step, the r x n matrix P with orthonormal rows, the
// first r rows of P_k in U(Y) = P_k^T diag(Y, I) P_k (equation (2)), that
// the step moves the weight's rows in. Permutation, Orthogonal and Blocks
// are orthonet's; a type of one's own that implements Sampler goes into
// RSDMConfig.Sampling as they do.
type Sampler interface {
	// String returns the sampler's name, which ParseSampler reads for
	// orthonet's samplers.
	String() string
	// Rows reports whether P is always r distinct rows of I_n, which a
	// step reads and writes alone (gathers and scatters, O(r p)), rather
	// than a dense r x n matrix (products, O(n r p)).
	Rows() bool
	// Start returns the draws of one weight of n rows, r at a time
	// (2 <= r <= n).
	Start(n, r int) (Draws, error)
}

// Draws is the sequence of submanifolds a Sampler draws for one weight.
type Draws interface {
	// Draw samples the next P with rng: into p.Rows (r distinct row
	// indices) for a sampler whose Rows is true, else into whichever of
	// p.Frame32 and p.Frame64 is not nil (r x n, row-major, orthonormal
	// rows).
	Draw(rng *rand.Rand, p *Submanifold) error
	// Undraw returns the draws' own position (not rng, which RSDM
	// restores) to where it was before the last Draw, whose step failed.
	Undraw()
	// Save writes the draws' position into st (RSDM saves rng and the
	// drawn P itself). st is the draws' own: RSDM's State holds its
	// entries apart from RSDM's (State.Sampler), so any names will do.
	Save(st State)
	// Load checks the position in st, what Save wrote, and returns the
	// function that restores it; on error nothing changes.
	Load(st State) (restore func(), err error)
}

// Submanifold is one draw of a Sampler: the rows P of the orthogonal
// matrix P_k, in the form the Sampler's Rows says.
type Submanifold struct {
	// Rows holds r distinct rows of I_n (a sampler whose Rows is true).
	Rows []int
	// Frame32 or Frame64, the one of the weight's element type, holds P
	// as an r x n matrix (a sampler whose Rows is false).
	Frame32 []float32
	Frame64 []float64
}

var (
	// Permutation picks r distinct rows uniformly (RSDM-P): a step reads
	// and writes only those rows, O(r^2 p + r^3). The default.
	Permutation Sampler = permutation{}
	// Orthogonal takes r rows of a Haar-random orthogonal matrix (RSDM-O):
	// every row moves, O(npr).
	Orthogonal Sampler = orthogonal{}
	// Blocks partitions the rows at random into ceil(n/r) blocks of r and
	// visits each block once per pass, so that every pass covers every row
	// (the paper's Algorithm 2, which converges deterministically). When r
	// does not divide n the last block of a pass overlaps the one before it.
	Blocks Sampler = blocks{}
)

// Samplers lists orthonet's samplers, the names ParseSampler reads.
var Samplers = []Sampler{Permutation, Orthogonal, Blocks}

// ParseSampler returns the sampler of Samplers whose String is name.
func ParseSampler(name string) (Sampler, error) { return parse("sampler", name, Samplers) }

// rowSamplers names the samplers of Samplers that draw rows (Rows):
// "perm or blocks".
func rowSamplers() string {
	var names []string
	for _, s := range Samplers {
		if s.Rows() {
			names = append(names, s.String())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

type permutation struct{}

// String returns "perm".
func (permutation) String() string { return "perm" }
func (permutation) Rows() bool     { return true }
func (permutation) Start(n, r int) (Draws, error) {
	perm, err := manifold.NewPermutation(n, r)
	if err != nil {
		return nil, err
	}
	return &permDraws{positionless{Permutation}, perm}, nil
}

// permDraws draws r distinct rows uniformly.
type permDraws struct {
	positionless
	perm *manifold.Permutation
}

func (d *permDraws) Draw(rng *rand.Rand, p *Submanifold) error { return d.perm.Sample(p.Rows, rng) }

// positionless is the position of draws that have none of their own: a
// draw only advances rng, and a state holds block 0.
type positionless struct{ s Sampler }

func (positionless) Undraw()       {}
func (positionless) Save(st State) { st.Counters["block"] = 0 }

func (d positionless) Load(st State) (func(), error) {
	if b, ok := st.Counters["block"]; ok && b != -1 && b != 0 {
		return nil, fmt.Errorf("optim: rsdm state has block %d but the sampling is %v", b, d.s)
	}
	return func() {}, nil
}

type orthogonal struct{}

// String returns "orth".
func (orthogonal) String() string { return "orth" }
func (orthogonal) Rows() bool     { return false }
func (orthogonal) Start(n, r int) (Draws, error) {
	h32, err := manifold.NewHaarRows[float32](n, r)
	if err != nil {
		return nil, err
	}
	h64, _ := manifold.NewHaarRows[float64](n, r)
	return &haarDraws{positionless: positionless{Orthogonal}, h32: h32, h64: h64}, nil
}

// haarDraws draws r rows of a Haar-random orthogonal matrix.
type haarDraws struct {
	positionless
	h32 *manifold.HaarRows[float32]
	h64 *manifold.HaarRows[float64]
}

func (d *haarDraws) Draw(rng *rand.Rand, p *Submanifold) error {
	if p.Frame32 != nil {
		return d.h32.Sample(p.Frame32, rng)
	}
	return d.h64.Sample(p.Frame64, rng)
}

type blocks struct{}

// String returns "blocks".
func (blocks) String() string { return "blocks" }
func (blocks) Rows() bool     { return true }
func (blocks) Start(n, r int) (Draws, error) {
	if r < 1 || r > n {
		return nil, fmt.Errorf("optim: blocks of %d of %d rows", r, n)
	}
	return &blockDraws{n: n, r: r, order: make([]int, n), orderPrev: make([]int, n), block: -1}, nil
}

// blockDraws is Algorithm 2: a random order of all rows per pass, cut into
// ceil(n/r) blocks of r visited in turn, the last one overlapping the one
// before it when r does not divide n.
type blockDraws struct {
	n, r      int
	order     []int // this pass's row order
	block     int   // the next block of order; -1 before the first pass
	orderPrev []int // order before the last draw's reshuffle
	blockPrev int   // block before the last draw
	shuffled  bool  // the last draw started a pass
}

func (d *blockDraws) Draw(rng *rand.Rand, p *Submanifold) error {
	d.blockPrev, d.shuffled = d.block, false
	if nb := (d.n + d.r - 1) / d.r; d.block < 0 || d.block == nb {
		copy(d.orderPrev, d.order)
		d.shuffled = true
		for i := range d.order {
			d.order[i] = i
		}
		rng.Shuffle(d.n, func(i, j int) { d.order[i], d.order[j] = d.order[j], d.order[i] })
		d.block = 0
	}
	start := min(d.block*d.r, d.n-d.r)
	copy(p.Rows, d.order[start:start+d.r])
	d.block++
	return nil
}

func (d *blockDraws) Undraw() {
	d.block = d.blockPrev
	if d.shuffled {
		copy(d.order, d.orderPrev)
		d.shuffled = false
	}
}

func (d *blockDraws) Save(st State) {
	st.Counters["block"] = int64(d.block)
	if d.block >= 0 {
		st.Buffers["order"] = ints64(d.order)
	}
}

func (d *blockDraws) Load(st State) (func(), error) {
	block, err := st.counter("block", -1, int64((d.n+d.r-1)/d.r))
	if err != nil {
		return nil, err
	}
	var order []int64
	if block >= 0 {
		order = make([]int64, d.n)
		if _, err := buffer(st, "order", order, false); err != nil {
			return nil, err
		}
		seen := make([]bool, d.n)
		for _, v := range order {
			if v < 0 || v >= int64(d.n) || seen[v] {
				return nil, fmt.Errorf("optim: rsdm state: block order is not a permutation of 0 to %d", d.n-1)
			}
			seen[v] = true
		}
	}
	return func() {
		d.block = block
		for i, v := range order {
			d.order[i] = int(v)
		}
	}, nil
}

// ---- applying a draw to a weight ----------------------------------------------------

// applier moves matrices in and out of a drawn submanifold: gathers and
// scatters of the drawn rows, or products with the drawn frame.
type applier[T Float] interface {
	// project sets dst (r x p) = P a for an n x p matrix a.
	project(dst, a []T)
	// projectFactor sets dst (k x r) = A P^T for a k x n matrix A, the
	// first factor of a Factored gradient.
	projectFactor(dst, a []T, k int)
	// update moves x from U(y) X_0 to U(ynew) X_0 (Algorithm 1, line 6),
	// where U(Y) = P^T diag(Y, I) P and px0 = P X_0 (r x p) is the projected
	// point at the first inner step.
	update(x, px0 []T, y, ynew []float64)
}

// rowApplier applies a draw of rows: products with P are gathers and
// scatters, O(r p) instead of O(n r p).
type rowApplier[T Float] struct {
	n, p, r int
	idx     []int     // the drawn rows
	yt      []T       // r x r
	upd     []T       // r x p: the new sampled rows
	wide    []float64 // AddMul's workspace
}

func (s *rowApplier[T]) project(dst, a []T) {
	p := s.p
	for i, row := range s.idx {
		copy(dst[i*p:i*p+p], a[row*p:row*p+p])
	}
}

func (s *rowApplier[T]) projectFactor(dst, a []T, k int) {
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
func (s *rowApplier[T]) update(x, px0 []T, _, ynew []float64) {
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

// frameApplier applies a dense draw: P is r rows of an orthogonal matrix,
// so that every row of X moves, O(n p r).
type frameApplier[T Float] struct {
	n, p, r int
	rows    []T // r x n: P
	yt      []T // r x r
	upd     []T // r x p: the change of P X
}

func (s *frameApplier[T]) project(dst, a []T) {
	linalg.Mul(false, false, s.r, s.p, s.n, s.rows, a, dst)
}

func (s *frameApplier[T]) projectFactor(dst, a []T, k int) {
	linalg.Gemm(false, true, k, s.r, s.n, 1, a, s.n, s.rows, s.n, 0, dst, s.r)
}

// update adds P^T (ynew - y) P X_0 to x = U(y) X_0: a correction of the
// current point rather than U(ynew) X_0 formed anew, for the reason given
// at rowApplier.update.
func (s *frameApplier[T]) update(x, px0 []T, y, ynew []float64) {
	for i := range s.yt {
		s.yt[i] = T(ynew[i] - y[i])
	}
	linalg.Mul(false, false, s.r, s.p, s.r, s.yt, px0, s.upd)
	linalg.Gemm(true, false, s.n, s.p, s.r, 1, s.rows, s.n, s.upd, s.p, 1, x, s.p)
}

// newApplier returns the applier of the draws of s for an n x p weight,
// with the Submanifold the draws go into.
func newApplier[T Float](s Sampler, n, p, r int) (applier[T], *Submanifold) {
	if s.Rows() {
		sub := &Submanifold{Rows: make([]int, r)}
		return &rowApplier[T]{n: n, p: p, r: r, idx: sub.Rows, yt: make([]T, r*r), upd: make([]T, r*p)}, sub
	}
	frame := make([]T, r*n)
	sub := &Submanifold{}
	switch f := any(frame).(type) {
	case []float32:
		sub.Frame32 = f
	case []float64:
		sub.Frame64 = f
	}
	return &frameApplier[T]{n: n, p: p, r: r, rows: frame, yt: make([]T, r*r), upd: make([]T, r*p)}, sub
}
