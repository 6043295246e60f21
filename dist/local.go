package dist

import (
	"fmt"
	"sync"
	"time"
)

// Local is one rank of a group whose ranks are goroutines of one process
// (NewLocal). Its calls check that every rank made the same call (else all
// fail with ErrMismatch), and its sums add the ranks' buffers in rank
// order, so every rank gets the same bits on every run.
type Local struct {
	g    *group
	rank int
}

var _ Communicator = (*Local)(nil)

// group is the state the ranks of a Local group share.
type group struct {
	mu      sync.Mutex
	timeout time.Duration
	slots   []slot
	arrived int    // ranks waiting in the current call
	gen     uint64 // calls completed
	head    call   // the current call, as its first rank made it
	result  error  // of the last completed call (a bad root), returned to all
	err     error  // set once, by Abort, a mismatch, a timeout or a Close mid-call
	closed  int    // ranks that have closed
}

// slot is one rank's part in the current call.
type slot struct {
	f32     []float32
	f64     []float64
	bytes   []byte
	closed  bool
	waiting bool
	wake    chan struct{} // one token: the call completed or the group failed
	timer   *time.Timer
}

// NewLocal returns the size ranks of a group in this process, one per
// goroutine that will use it. A call that waits longer than timeout for the
// other ranks fails the group with ErrTimeout; timeout 0 waits for ever.
func NewLocal(size int, timeout time.Duration) ([]*Local, error) {
	if size < 1 {
		return nil, fmt.Errorf("dist: NewLocal: size %d, want at least 1", size)
	}
	if timeout < 0 {
		return nil, fmt.Errorf("dist: NewLocal: negative timeout %v", timeout)
	}
	g := &group{timeout: timeout, slots: make([]slot, size)}
	ranks := make([]*Local, size)
	for r := range ranks {
		g.slots[r].wake = make(chan struct{}, 1)
		if timeout > 0 {
			g.slots[r].timer = time.NewTimer(timeout)
			g.slots[r].timer.Stop()
		}
		ranks[r] = &Local{g: g, rank: r}
	}
	return ranks, nil
}

// Rank returns this rank's number.
func (l *Local) Rank() int { return l.rank }

// Size returns the number of ranks in the group.
func (l *Local) Size() int { return len(l.g.slots) }

// AllReduceSum32 replaces buf, on every rank, with the sum of every rank's
// buf, added in rank order.
func (l *Local) AllReduceSum32(buf []float32) error {
	l.g.mu.Lock()
	l.g.slots[l.rank].f32 = buf
	return l.collective(call{opSum32, len(buf), -1})
}

// AllReduceSum64 replaces buf, on every rank, with the sum of every rank's
// buf, added in rank order.
func (l *Local) AllReduceSum64(buf []float64) error {
	l.g.mu.Lock()
	l.g.slots[l.rank].f64 = buf
	return l.collective(call{opSum64, len(buf), -1})
}

// Broadcast32 copies root's buf into every other rank's buf.
func (l *Local) Broadcast32(buf []float32, root int) error {
	l.g.mu.Lock()
	l.g.slots[l.rank].f32 = buf
	return l.collective(call{opBcast32, len(buf), root})
}

// Broadcast64 copies root's buf into every other rank's buf.
func (l *Local) Broadcast64(buf []float64, root int) error {
	l.g.mu.Lock()
	l.g.slots[l.rank].f64 = buf
	return l.collective(call{opBcast64, len(buf), root})
}

// BroadcastBytes copies root's buf into every other rank's buf.
func (l *Local) BroadcastBytes(buf []byte, root int) error {
	l.g.mu.Lock()
	l.g.slots[l.rank].bytes = buf
	return l.collective(call{opBcastBytes, len(buf), root})
}

// Barrier returns once every rank has called it.
func (l *Local) Barrier() error {
	l.g.mu.Lock()
	return l.collective(call{opBarrier, 0, -1})
}

// Abort fails the group: every rank's waiting and later calls return an
// error wrapping ErrAborted and cause.
func (l *Local) Abort(cause error) error {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.fail(aborted(l.rank, cause))
	}
	return nil
}

// Close leaves the group. A rank that waits for this one, now or later,
// fails with ErrClosed.
func (l *Local) Close() error {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &g.slots[l.rank]
	if s.closed {
		return nil
	}
	s.closed = true
	s.f32, s.f64, s.bytes = nil, nil, nil
	g.closed++
	if g.arrived > 0 && g.err == nil {
		g.fail(fmt.Errorf("dist: rank %d closed while others waited in %v: %w", l.rank, g.head, ErrClosed))
	}
	return nil
}

// collective makes call c, with g.mu held and this rank's buffer in its
// slot; it returns with g.mu released.
func (l *Local) collective(c call) error {
	g := l.g
	s := &g.slots[l.rank]
	if err := l.enter(c); err != nil {
		s.f32, s.f64, s.bytes = nil, nil, nil
		g.mu.Unlock()
		return err
	}
	g.arrived++
	if g.arrived == len(g.slots) {
		g.result = g.complete()
		g.arrived = 0
		g.gen++
		for r := range g.slots {
			o := &g.slots[r]
			o.f32, o.f64, o.bytes = nil, nil, nil
			if o.waiting {
				o.wake <- struct{}{} // empty: one token per wait
			}
		}
		err := g.result
		g.mu.Unlock()
		return err
	}
	gen := g.gen
	s.waiting = true
	g.mu.Unlock()

	var expired <-chan time.Time
	if s.timer != nil {
		s.timer.Reset(g.timeout)
		expired = s.timer.C
	}
	select {
	case <-s.wake:
	case <-expired:
	}
	if s.timer != nil {
		s.timer.Stop()
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen == gen && g.err == nil {
		g.fail(fmt.Errorf("dist: rank %d waited %v in %v for ranks %v: %w", l.rank, g.timeout, c, g.missing(), ErrTimeout))
	}
	s.waiting = false
	select { // the token of a call completed or failed as the timer fired
	case <-s.wake:
	default:
	}
	if g.gen != gen {
		return g.result
	}
	return g.err
}

// enter checks that this rank may make call c now, with g.mu held.
func (l *Local) enter(c call) error {
	g := l.g
	if g.slots[l.rank].closed {
		return fmt.Errorf("dist: %v on rank %d: %w", c.op, l.rank, ErrClosed)
	}
	if g.err != nil {
		return g.err
	}
	if g.closed > 0 {
		for r := range g.slots {
			if g.slots[r].closed {
				return fmt.Errorf("dist: %v on rank %d: rank %d has closed: %w", c.op, l.rank, r, ErrClosed)
			}
		}
	}
	if g.arrived == 0 {
		g.head = c
	} else if c != g.head {
		g.fail(fmt.Errorf("dist: rank %d called %v while another rank called %v: %w", l.rank, c, g.head, ErrMismatch))
		return g.err
	}
	return nil
}

// complete carries out the current call once every rank has arrived.
func (g *group) complete() error {
	c := g.head
	if c.op.rooted() {
		if err := checkRoot(c.op, c.root, len(g.slots)); err != nil {
			return err
		}
	}
	switch c.op {
	case opSum32:
		sumAcross(g.slots, func(s *slot) []float32 { return s.f32 })
	case opSum64:
		sumAcross(g.slots, func(s *slot) []float64 { return s.f64 })
	case opBcast32:
		for r := range g.slots {
			copy(g.slots[r].f32, g.slots[c.root].f32)
		}
	case opBcast64:
		for r := range g.slots {
			copy(g.slots[r].f64, g.slots[c.root].f64)
		}
	case opBcastBytes:
		for r := range g.slots {
			copy(g.slots[r].bytes, g.slots[c.root].bytes)
		}
	}
	return nil
}

// sumAcross replaces every rank's buffer (buf of its slot) by the sum of
// all of them, added in the order of the ranks.
func sumAcross[T float32 | float64](slots []slot, buf func(*slot) []T) {
	acc := buf(&slots[0])
	for r := 1; r < len(slots); r++ {
		addTo(acc, buf(&slots[r]))
	}
	for r := 1; r < len(slots); r++ {
		copy(buf(&slots[r]), acc)
	}
}

func addTo[T float32 | float64](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// fail sets the group's error and wakes every waiting rank, with g.mu held.
func (g *group) fail(err error) {
	g.err = err
	for r := range g.slots {
		if g.slots[r].waiting {
			select {
			case g.slots[r].wake <- struct{}{}:
			default:
			}
		}
	}
}

// missing returns the ranks that have not arrived in the current call.
func (g *group) missing() []int {
	var m []int
	for r := range g.slots {
		if !g.slots[r].waiting {
			m = append(m, r)
		}
	}
	return m
}
