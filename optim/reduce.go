package optim

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Communicator is the group of ranks a data-parallel Solver (Options.Comm)
// averages over; package dist's communicators (NewSingle, NewLocal,
// OpenMPI) implement it. Every rank holds the same weights and the same
// Solver, steps on its own shard of each global batch (the same number of
// examples on every rank, each gradient the mean over the shard), and
// calls Step together. A Step sums, in one call per element type, before
// any parameter moves (never after: a step taken on one rank's gradient
// would move the ranks apart):
//
//   - for RSDM, the r x r matrix P G (PX)^T of each weight, which is linear
//     in G, so that the step of the mean gradient needs only its sum: r^2
//     numbers in place of n p, and with a factored gradient no rank forms
//     G. Every rank draws the same rows, from the same seed;
//   - for RGD, Riemannian Adam and rules of one's own, the full gradient;
//   - for the unconstrained parameters, their gradients;
//   - one number a rank that says whether it failed the step (a NaN or Inf
//     gradient, a failed Options.Checked), so that all refuse it together.
//
// Each sum is divided by the number of ranks, the mean of the shards' means:
// the global batch's mean gradient, to rounding (the order of the sums
// differs). Every rank then takes the same step from the same numbers, so
// the weights stay identical bit for bit; a checksum of them every
// Options.ChecksumEvery steps proves it. Not supported yet, refused by
// NewSolver with ErrNotDistributed: parameters on a device, gradient
// clipping and RSDM samplers of dense frames (Orthogonal), whose P is drawn
// in floating point that ranks on different machines may round apart.
type Communicator interface {
	// Rank returns this rank's number, from 0 to Size()-1.
	Rank() int
	// Size returns the number of ranks.
	Size() int
	// AllReduceSum32 replaces buf on every rank by the sum of every
	// rank's buf.
	AllReduceSum32(buf []float32) error
	// AllReduceSum64 replaces buf on every rank by the sum of every
	// rank's buf.
	AllReduceSum64(buf []float64) error
}

var (
	// ErrNotDistributed is wrapped by NewSolver's error for what a Solver
	// with a Communicator does not do yet.
	ErrNotDistributed = errors.New("optim: not supported in data-parallel training yet")
	// ErrDiverged is wrapped by the error of a step whose ranks no longer
	// hold the same weights.
	ErrDiverged = errors.New("optim: the ranks' weights have drifted apart")
	// ErrRankFailed is wrapped by the error of a step that another rank
	// failed; it also wraps ErrNotFinite when that rank's gradient had a
	// NaN or Inf entry.
	ErrRankFailed = errors.New("optim: another rank failed the step")
)

// Traffic is what each Step of a data-parallel Solver all-reduces, in
// bytes of the buffers summed (a ring all-reduce sends and receives about
// twice that on each rank).
type Traffic struct {
	// Constrained is of the constrained weights: r x r numbers per RSDM
	// weight, the gradient for the other rules.
	Constrained int64
	// Plain is of the unconstrained parameters' gradients.
	Plain int64
	// Flags is of the ranks' failure flags, one number a rank.
	Flags int64
	// FullGradient is what all-reducing every parameter's gradient would
	// move: the cost of the usual data-parallel step.
	FullGradient int64
}

// Traffic returns what each Step all-reduces; the zero Traffic without
// Options.Comm.
func (s *Solver) Traffic() Traffic {
	if s.red == nil {
		return Traffic{}
	}
	return s.red.traffic
}

// reduction is the part of a data-parallel Solver that sums across ranks:
// one buffer per element type, holding each parameter's part in turn and
// the failure flags last.
type reduction struct {
	comm     Communicator
	every    int // steps between checksums; 0: never
	b32      []float32
	b64      []float64
	n32, n64 int  // the data part of each buffer
	flags32  bool // the flags end b32, else b64
	segs     []segment
	sums     []float64 // a checksum per rank
	traffic  Traffic
}

// segment is one parameter's part of its buffer.
type segment struct {
	off, n int
	rsdm   bool // a split RSDM step's P G (PX)^T, else a gradient
	// grad is what the step prepares from once summed: the buffer's
	// slice, or summed{} for RSDM (boxed once, not at each step).
	grad Gradient
}

// summed stands for an RSDM weight's gradient once the ranks have summed
// its P G (PX)^T, which the RSDM holds in the buffer itself.
type summed struct{ float32 bool }

// Float32 reports whether the weight's elements are float32.
func (s summed) Float32() bool { return s.float32 }

// split lays out the buffers the ranks sum for slots and splits their
// RSDM steps around the sum; it refuses what it cannot reduce.
func (s *Solver) split(slots []Stepper) error {
	if s.options.ClipNorm > 0 {
		return fmt.Errorf("optim: gradient clipping by the global norm: %w", ErrNotDistributed)
	}
	r := s.red
	if r == nil {
		r = &reduction{comm: s.options.Comm, every: s.options.ChecksumEvery, sums: make([]float64, s.options.Comm.Size())}
		if r.every == 0 {
			r.every = 100
		}
	}
	var n32, n64 int
	var t Traffic
	segs := make([]segment, len(slots))
	for i, sl := range slots {
		var err error
		switch ts := sl.(type) {
		case *typedSlot[float32]:
			segs[i], err = ts.segment(&n32)
		case *typedSlot[float64]:
			segs[i], err = ts.segment(&n64)
		default:
			err = fmt.Errorf("lives on a device: %w", ErrNotDistributed)
		}
		if err != nil {
			return fmt.Errorf("optim: %s: %w", s.params[i].describe(), err)
		}
		size, bytes := floats(s.params[i].Value)
		t.FullGradient += int64(size * bytes)
		if s.params[i].Constrained() {
			t.Constrained += int64(segs[i].n * bytes)
		} else {
			t.Plain += int64(segs[i].n * bytes)
		}
	}
	ranks := len(r.sums)
	if r.flags32 = n64 == 0 && n32 > 0; r.flags32 {
		r.b32, r.b64, t.Flags = resize(r.b32, n32+ranks), resize(r.b64, n64), int64(4*ranks)
	} else {
		r.b32, r.b64, t.Flags = resize(r.b32, n32), resize(r.b64, n64+ranks), int64(8*ranks)
	}
	for i, sl := range slots {
		if seg := &segs[i]; s.float32[i] {
			seg.grad = alias(sl, *seg, r.b32[seg.off:seg.off+seg.n])
		} else {
			seg.grad = alias(sl, *seg, r.b64[seg.off:seg.off+seg.n])
		}
	}
	r.n32, r.n64, r.segs, r.traffic, s.red = n32, n64, segs, t, r
	return nil
}

// resize returns buf if it has n elements, else a new buffer of n: the
// slots of a SetState that fails share the buffers with those it keeps.
func resize[T Float](buf []T, n int) []T {
	if len(buf) == n {
		return buf
	}
	return make([]T, n)
}

// rsdm returns the slot's RSDM and the point it steps, if RSDM steps it.
func (t *typedSlot[T]) rsdm() (*RSDM[T], []T) {
	if os, ok := t.Stepper.(*optStepper[T]); ok {
		if o, ok := os.o.(*RSDM[T]); ok {
			return o, os.x
		}
	}
	return nil, nil
}

// segment lays out the slot's part of its buffer from *end: r x r numbers
// for RSDM, whose step it splits, else the gradient's.
func (t *typedSlot[T]) segment(end *int) (segment, error) {
	seg := segment{off: *end, n: len(t.x)}
	if o, _ := t.rsdm(); o != nil {
		if !o.cfg.Sampling.Rows() {
			return seg, fmt.Errorf("RSDM's %v sampler draws dense frames in floating point, which ranks may round apart: %w (sample rows: %s)", o.cfg.Sampling, ErrNotDistributed, rowSamplers())
		}
		o.split, seg.n, seg.rsdm = true, o.r*o.r, true
	}
	*end += seg.n
	return seg, nil
}

// alias points a split RSDM's P G (PX)^T at buf and returns summed{}, or
// returns buf, boxed, for a gradient summed whole.
func alias[T Float](sl Stepper, seg segment, buf []T) Gradient {
	if !seg.rsdm {
		return Host[T](buf)
	}
	o, _ := sl.(*typedSlot[T]).rsdm()
	o.b = buf
	return summed{float32: isFloat32[T]()}
}

// reduce sums the step's gradients across the ranks (local is this rank's
// failure so far) and points s.grads at the means. On error no rank steps:
// the RSDM steps prepared before the sum are aborted.
func (r *reduction) reduce(s *Solver, local error) error {
	if r.every > 0 && s.steps%r.every == 0 {
		if err := s.CheckWeights(); err != nil {
			return err
		}
	}
	prepared := 0
	if local == nil {
		prepared, local = r.gather(s)
	}
	clear(r.b32[r.n32:])
	clear(r.b64[r.n64:])
	if local != nil {
		code := 1.0 // a NaN or Inf gradient
		if !errors.Is(local, ErrNotFinite) {
			code = 2
		}
		if r.flags32 { // this rank's flag
			r.b32[r.n32+r.comm.Rank()] = float32(code)
		} else {
			r.b64[r.n64+r.comm.Rank()] = code
		}
	}
	err := r.sum()
	if err == nil {
		err = r.failed(local)
	}
	if err != nil {
		r.abortSplit(s, 0, prepared)
		return err
	}
	for i, seg := range r.segs {
		s.grads[i] = seg.grad
	}
	return nil
}

// gather writes this rank's part of every sum into the buffers: the
// gradients, and the P G (PX)^T that a split RSDM step's prepare computes
// there. It returns how many slots it reached.
func (r *reduction) gather(s *Solver) (int, error) {
	for i, sl := range s.slots {
		seg := r.segs[i]
		if !seg.rsdm {
			switch g := s.grads[i].(type) {
			case Host[float32]:
				copy(r.b32[seg.off:seg.off+seg.n], g)
			case Host[float64]:
				copy(r.b64[seg.off:seg.off+seg.n], g)
			}
			continue
		}
		if err := sl.Prepare(s.grads[i], s.groups[s.member[i]].lr(s.steps)); err != nil {
			return i + 1, fmt.Errorf("optim: %s: %w; no parameter was updated", s.params[i].describe(), err)
		}
	}
	return len(s.slots), nil
}

// flag returns rank k's flag, summed.
func (r *reduction) flag(k int) float64 {
	if r.flags32 {
		return float64(r.b32[r.n32+k])
	}
	return r.b64[r.n64+k]
}

// sum all-reduces the buffers.
func (r *reduction) sum() error {
	if len(r.b32) > 0 {
		if err := r.comm.AllReduceSum32(r.b32); err != nil {
			return fmt.Errorf("optim: all-reduce of the gradients: %w", err)
		}
	}
	if len(r.b64) > 0 {
		if err := r.comm.AllReduceSum64(r.b64); err != nil {
			return fmt.Errorf("optim: all-reduce of the gradients: %w", err)
		}
	}
	return nil
}

// failed returns the error of a step that a rank failed (this rank's own,
// local, when it did), or whose sums overflowed; else it divides the sums
// by the number of ranks, their means.
func (r *reduction) failed(local error) error {
	var bad []string
	notFinite := true
	for k := range r.comm.Size() {
		if f := r.flag(k); f != 0 {
			bad = append(bad, fmt.Sprint(k))
			notFinite = notFinite && f == 1
		}
	}
	switch {
	case local != nil:
		return fmt.Errorf("%w (rank %d of %d: no rank stepped)", local, r.comm.Rank(), r.comm.Size())
	case bad != nil && notFinite:
		return fmt.Errorf("optim: rank %s had a gradient with a NaN or Inf entry: %w: %w; no parameter was updated", strings.Join(bad, ", "), ErrRankFailed, ErrNotFinite)
	case bad != nil:
		return fmt.Errorf("optim: rank %s failed the step: %w; no parameter was updated", strings.Join(bad, ", "), ErrRankFailed)
	}
	n := r.comm.Size()
	if !mean(r.b32[:r.n32], n) || !mean(r.b64[:r.n64], n) {
		return fmt.Errorf("optim: the gradients summed over the ranks: %w; no parameter was updated", ErrNotFinite)
	}
	return nil
}

// mean divides the sums in buf by n and reports whether they are finite.
func mean[T Float](buf []T, n int) bool {
	if n > 1 {
		for i := range buf {
			buf[i] /= T(n)
		}
	}
	return linalg.Finite(buf)
}

// abortSplit aborts the split RSDM steps of the slots from to end, which
// prepare began before the sum.
func (r *reduction) abortSplit(s *Solver, from, end int) {
	if r == nil {
		return
	}
	for i := from; i < end; i++ {
		if r.segs[i].rsdm {
			s.slots[i].Abort()
		}
	}
}

// CheckWeights compares a checksum of every weight across the ranks of a
// data-parallel Solver and returns an error wrapping ErrDiverged that names
// the ranks whose weights differ from rank 0's, the same error on every
// rank. Every rank calls it together, as Step does every
// Options.ChecksumEvery steps; a caller adds a call before it saves a
// checkpoint. Without Options.Comm it returns nil.
func (s *Solver) CheckWeights() error {
	r := s.red
	if r == nil {
		return nil
	}
	clear(r.sums)
	r.sums[r.comm.Rank()] = s.checksum()
	if err := r.comm.AllReduceSum64(r.sums); err != nil {
		return fmt.Errorf("optim: all-reduce of the weights' checksums: %w", err)
	}
	var bad []string
	for k, c := range r.sums[1:] {
		if c != r.sums[0] {
			bad = append(bad, fmt.Sprint(k+1))
		}
	}
	if bad != nil {
		return fmt.Errorf("optim: after %d steps the weights of rank %s differ from rank 0's: %w", s.steps, strings.Join(bad, ", "), ErrDiverged)
	}
	return nil
}

// checksum hashes the bits of every parameter's value (FNV-1a over words)
// into 52 bits, which a float64 sum carries exactly.
func (s *Solver) checksum() float64 {
	h := uint64(14695981039346656037)
	for _, p := range s.params {
		switch v := p.Value.(type) {
		case Host[float32]:
			for _, x := range v {
				h = (h ^ uint64(math.Float32bits(x))) * 1099511628211
			}
		case Host[float64]:
			for _, x := range v {
				h = (h ^ math.Float64bits(x)) * 1099511628211
			}
		}
	}
	return float64(h >> 12)
}
