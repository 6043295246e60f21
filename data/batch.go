package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Loader serves a Dataset in shuffled mini-batches, a new order every
// epoch. The order depends only on the seed, the epoch number and the
// number of examples, so a run that restarts at epoch k sees the same
// batches, whatever the Dataset's type.
type Loader struct {
	data  Dataset
	set   *Set // data itself when it is a *Set, copied from directly; else nil
	name  string
	n     int // examples
	dim   int // values per example
	batch int
	seed  uint64
	epoch int
	pos   int
	order []int
}

// NewLoader returns a Loader over d with the given batch size and seed,
// positioned at the start of epoch 0. A *Set's images are copied from its
// X directly; any other Dataset's are written by its Example method.
func NewLoader(d Dataset, batch int, seed uint64) (*Loader, error) {
	if batch < 1 {
		return nil, fmt.Errorf("data: batch size %d, want >= 1", batch)
	}
	if d == nil {
		return nil, fmt.Errorf("data: a loader over a nil Dataset")
	}
	l := &Loader{data: d, batch: batch, seed: seed, n: d.Len()}
	if s, ok := d.(*Set); ok {
		l.set, l.name, l.dim = s, s.Name, s.Dim()
	} else {
		l.name = fmt.Sprintf("the %T data set", d)
		shape := d.Shape()
		if len(shape) == 0 {
			return nil, fmt.Errorf("data: %s has examples of shape %v, want at least one dimension", l.name, shape)
		}
		l.dim = 1
		for _, v := range shape {
			if v < 1 || l.dim > math.MaxInt32/v {
				return nil, fmt.Errorf("data: %s has examples of shape %v, want positive sizes, at most 2^31 values in all", l.name, shape)
			}
			l.dim *= v
		}
	}
	if l.n <= 0 {
		return nil, fmt.Errorf("data: %s has no examples", l.name)
	}
	l.order = make([]int, l.n)
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
	if e < 0 || pos < 0 || pos > l.n {
		return fmt.Errorf("data: seek to epoch %d, example %d of %d", e, pos, l.n)
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
func (l *Loader) BatchesPerEpoch() int { return (l.n + l.batch - 1) / l.batch }

// Next copies the next batch of the epoch into x (batch x the values of an
// example) and y and returns its size, or 0 at the end of the epoch; call
// SetEpoch to go on. An error from the Dataset's Example, or a label it
// returns outside 0..NumClasses()-1, is returned naming the example's
// index; the loader stays where it was, so Next may be called again.
func (l *Loader) Next(x []float32, y []int) (int, error) {
	d := l.dim
	if len(x) < l.batch*d || len(y) < l.batch {
		return 0, fmt.Errorf("data: batch buffers hold %d values and %d labels, want %d x %d and %d", len(x), len(y), l.batch, d, l.batch)
	}
	n := min(l.batch, l.n-l.pos)
	if s := l.set; s != nil {
		for k := 0; k < n; k++ {
			i := l.order[l.pos+k]
			copy(x[k*d:(k+1)*d], s.X[i*d:(i+1)*d])
			y[k] = int(s.Y[i])
		}
		l.pos += n
		return n, nil
	}
	classes := l.data.NumClasses()
	for k := 0; k < n; k++ {
		i := l.order[l.pos+k]
		label, err := l.data.Example(i, x[k*d:(k+1)*d])
		if err != nil {
			return 0, fmt.Errorf("data: example %d of %s: %w", i, l.name, err)
		}
		if label < 0 || label >= classes {
			return 0, fmt.Errorf("data: example %d of %s has label %d, not in 0..%d", i, l.name, label, classes-1)
		}
		y[k] = label
	}
	l.pos += n
	return n, nil
}
