package data

import (
	"fmt"
	"math/rand/v2"
)

// Loader serves a Set in shuffled mini-batches, a new order every epoch.
// The order depends only on the seed and the epoch number, so a run that
// restarts at epoch k sees the same batches.
type Loader struct {
	set   *Set
	batch int
	seed  uint64
	epoch int
	pos   int
	order []int
}

// NewLoader returns a Loader over s with the given batch size and seed,
// positioned at the start of epoch 0.
func NewLoader(s *Set, batch int, seed uint64) (*Loader, error) {
	if batch < 1 {
		return nil, fmt.Errorf("data: batch size %d, want >= 1", batch)
	}
	if s.N == 0 {
		return nil, fmt.Errorf("data: %s has no examples", s.Name)
	}
	l := &Loader{set: s, batch: batch, seed: seed, order: make([]int, s.N)}
	l.SetEpoch(0)
	return l, nil
}

// SetEpoch moves to the start of epoch e.
func (l *Loader) SetEpoch(e int) {
	l.epoch, l.pos = e, 0
	for i := range l.order {
		l.order[i] = i
	}
	rng := rand.New(rand.NewPCG(l.seed, uint64(e)))
	rng.Shuffle(len(l.order), func(i, j int) { l.order[i], l.order[j] = l.order[j], l.order[i] })
}

// Seek positions the loader after the first pos examples of epoch e's
// order, as SetEpoch(e) and batches covering pos examples would: a resumed
// run goes on with the batches it would have drawn.
func (l *Loader) Seek(e, pos int) error {
	if e < 0 || pos < 0 || pos > l.set.N {
		return fmt.Errorf("data: seek to epoch %d, example %d of %d", e, pos, l.set.N)
	}
	l.SetEpoch(e)
	l.pos = pos
	return nil
}

// Pos returns how many examples of the current epoch have been served.
func (l *Loader) Pos() int { return l.pos }

// Epoch returns the current epoch.
func (l *Loader) Epoch() int { return l.epoch }

// BatchesPerEpoch returns the number of batches in an epoch; the last one
// may be short.
func (l *Loader) BatchesPerEpoch() int { return (l.set.N + l.batch - 1) / l.batch }

// Next copies the next batch of the epoch into x (batch x Dim) and y and
// returns its size, or 0 at the end of the epoch; call SetEpoch to go on.
func (l *Loader) Next(x []float32, y []int) (int, error) {
	d := l.set.Dim()
	if len(x) < l.batch*d || len(y) < l.batch {
		return 0, fmt.Errorf("data: batch buffers hold %d values and %d labels, want %d x %d and %d", len(x), len(y), l.batch, d, l.batch)
	}
	n := min(l.batch, l.set.N-l.pos)
	for k := 0; k < n; k++ {
		i := l.order[l.pos+k]
		copy(x[k*d:(k+1)*d], l.set.X[i*d:(i+1)*d])
		y[k] = int(l.set.Y[i])
	}
	l.pos += n
	return n, nil
}
