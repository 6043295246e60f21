package manifold

import (
	"fmt"
	"math/rand/v2"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Permutation draws the first r entries of a uniformly random permutation of
// {0, ..., n-1}: r distinct row indices, every ordered r-tuple equally likely.
// It is RSDM's permutation sampling (paper, section 4). A draw costs O(r)
// time and memory, not O(n): it runs the first r swaps of a Fisher-Yates
// shuffle on a virtual identity permutation, recording displaced entries in a
// small hash table that is cleared after each draw.
type Permutation struct {
	n, r  int
	keys  []int32 // key+1 of each slot, 0 if empty
	vals  []int32
	used  []int32 // slots to clear after a draw
	mask  uint32
	shift uint32
}

// NewPermutation returns a sampler of r distinct indices below n.
func NewPermutation(n, r int) (*Permutation, error) {
	if r < 1 || r > n {
		return nil, fmt.Errorf("manifold: permutation sample of %d indices from %d: want 1 <= r <= n", r, n)
	}
	if n > 1<<31-2 {
		return nil, fmt.Errorf("manifold: permutation sampler: n = %d is too large", n)
	}
	size, bits := 1, uint32(0)
	for size < 4*r {
		size <<= 1
		bits++
	}
	return &Permutation{
		n: n, r: r,
		keys: make([]int32, size), vals: make([]int32, size), used: make([]int32, 0, r),
		mask: uint32(size - 1), shift: 32 - bits,
	}, nil
}

// Size returns r, the number of indices a draw returns.
func (s *Permutation) Size() int { return s.r }

// Sample writes r distinct indices into dst[:r].
func (s *Permutation) Sample(dst []int, rng *rand.Rand) error {
	if len(dst) < s.r {
		return fmt.Errorf("%w: permutation sample needs %d slots, got %d", ErrShape, s.r, len(dst))
	}
	for i := 0; i < s.r; i++ {
		j := i + rng.IntN(s.n-i)
		vi, vj := s.get(int32(i)), s.get(int32(j))
		dst[i] = int(vj)
		s.set(int32(j), vi) // position i is never read again
	}
	for _, slot := range s.used {
		s.keys[slot] = 0
	}
	s.used = s.used[:0]
	return nil
}

func (s *Permutation) slot(k int32) uint32 {
	return (uint32(k) * 0x9E3779B1) >> s.shift & s.mask
}

func (s *Permutation) get(k int32) int32 {
	for i := s.slot(k); ; i = (i + 1) & s.mask {
		switch s.keys[i] {
		case k + 1:
			return s.vals[i]
		case 0:
			return k
		}
	}
}

func (s *Permutation) set(k, v int32) {
	for i := s.slot(k); ; i = (i + 1) & s.mask {
		switch s.keys[i] {
		case k + 1:
			s.vals[i] = v
			return
		case 0:
			s.keys[i], s.vals[i] = k+1, v
			s.used = append(s.used, int32(i))
			return
		}
	}
}

// HaarRows draws the first r rows of an n x n orthogonal matrix distributed
// by the Haar measure on O(n): the transpose of the sign-fixed Q factor of an
// n x r standard normal matrix (paper, section 4; Mezzadri 2007). Without the
// sign fix the sample is not Haar. A draw costs O(nr^2).
type HaarRows[T Float] struct {
	n, r int
	g    []T
	qr   linalg.QR[T]
}

// NewHaarRows returns a sampler of r x n matrices with orthonormal rows.
func NewHaarRows[T Float](n, r int) (*HaarRows[T], error) {
	if r < 1 || r > n {
		return nil, fmt.Errorf("manifold: %d Haar rows of O(%d): want 1 <= r <= n", r, n)
	}
	return &HaarRows[T]{n: n, r: r}, nil
}

// Sample writes an r x n row-major matrix with orthonormal rows into dst.
func (h *HaarRows[T]) Sample(dst []T, rng *rand.Rand) error {
	n, r := h.n, h.r
	if len(dst) != r*n {
		return fmt.Errorf("%w: Haar rows: dst has %d entries, want %d x %d", ErrShape, len(dst), r, n)
	}
	h.g = linalg.Grow(h.g, n*r)
	for i := range h.g {
		h.g[i] = T(rng.NormFloat64())
	}
	if err := h.qr.QF(n, r, h.g); err != nil {
		return fmt.Errorf("manifold: Haar rows: %w", err)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < r; j++ {
			dst[j*n+i] = h.g[i*r+j]
		}
	}
	return nil
}
