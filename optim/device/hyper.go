package device

import (
	"fmt"

	"github.com/orthonet/orthonet/backend"
)

// hyperSlots is how many steppers share one buffer of hyperparameters: a
// model with more parameters on the device (none of orthonet's comes near)
// makes one more copy per step for each further hyperSlots.
const hyperSlots = 256

// hyperWidth is the Float64 elements of a stepper's hyperparameters: its
// step size, and for Adam the step's count (backend.AdamStep).
const hyperWidth = 2

// hyperTable holds the hyperparameters of every stepper that one Steppers
// built, in device buffers of hyperSlots steppers each, so that a step
// copies all of them to the device at once: each stepper's Prepare writes
// its slot on the host (set), the first Commit of the step copies the
// buffers (flush) before any stepper enqueues its kernels (the Solver
// prepares every stepper before it commits any).
type hyperTable struct {
	be     backend.Backend
	chunks []*hyperChunk
	dirty  bool // a slot was set since the last flush
}

// hyperChunk is one buffer of the table, its host copy and which of its
// slots are taken.
type hyperChunk struct {
	buf   backend.Buffer
	host  []float64
	taken [hyperSlots]bool
	used  int // slots taken
	top   int // the slots below top are copied (one past the highest taken)
}

// hyperSlot is a stepper's place in the table.
type hyperSlot struct {
	chunk *hyperChunk
	i     int
}

// operand returns the slot's hyperparameters on the device.
func (s hyperSlot) operand() backend.Operand { return backend.At(s.chunk.buf, s.i*hyperWidth) }

// take returns a free slot, allocating a buffer when all are taken.
func (t *hyperTable) take() (hyperSlot, error) {
	for _, c := range t.chunks {
		if c.used == hyperSlots {
			continue
		}
		for i := range c.taken {
			if !c.taken[i] {
				c.taken[i] = true
				c.used++
				c.top = max(c.top, i+1)
				return hyperSlot{c, i}, nil
			}
		}
	}
	buf, err := t.be.Alloc(backend.Float64, hyperSlots*hyperWidth)
	if err != nil {
		return hyperSlot{}, fmt.Errorf("allocating the step sizes: %w", err)
	}
	c := &hyperChunk{buf: buf, host: make([]float64, hyperSlots*hyperWidth), used: 1, top: 1}
	c.taken[0] = true
	t.chunks = append(t.chunks, c)
	return hyperSlot{c, 0}, nil
}

// release gives a slot back; a buffer whose slots are all free is freed.
func (t *hyperTable) release(s hyperSlot) error {
	c := s.chunk
	if c == nil || !c.taken[s.i] {
		return nil
	}
	c.taken[s.i] = false
	c.used--
	for c.top > 0 && !c.taken[c.top-1] {
		c.top--
	}
	if c.used > 0 {
		return nil
	}
	for i, o := range t.chunks {
		if o == c {
			t.chunks = append(t.chunks[:i], t.chunks[i+1:]...)
			break
		}
	}
	return t.be.Free(c.buf)
}

// set writes a slot's hyperparameters on the host (the rest of its
// elements zero); the next flush copies them.
func (t *hyperTable) set(s hyperSlot, h ...float64) {
	slot := s.chunk.host[s.i*hyperWidth : (s.i+1)*hyperWidth]
	clear(slot[copy(slot, h):])
	t.dirty = true
}

// flush copies the slots set since the last flush to the device: one copy
// per buffer.
func (t *hyperTable) flush() error {
	if !t.dirty {
		return nil
	}
	for _, c := range t.chunks {
		if err := t.be.CopyIn(c.buf, 0, c.host[:c.top*hyperWidth]); err != nil {
			return err
		}
	}
	t.dirty = false
	return nil
}
