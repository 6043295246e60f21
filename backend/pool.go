package backend

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is the host's threads as the CPU implementations of the kernels
// (their Host methods) use them: a large loop is split into parts that
// run on the pool's goroutines. A Pool is not safe for concurrent use.
type Pool struct {
	threads, grain int
	work           chan task
	closed         atomic.Bool // after Close, loops run on the calling goroutine alone
	// scratch32 and scratch64 are workspace that the host kernels share,
	// a buffer per part of a loop: kernels run one at a time, so one
	// kernel's workspace, hot in the cache, is free for the next.
	scratch32 [][]float32
	scratch64 [][]float64
}

// reserve grows p's workspace of type T to at least n elements for each
// part of a loop; a kernel reserves when it is prepared, never when it
// runs.
func reserve[T Float](p *Pool, n int) {
	s := scratchOf[T](p)
	for len(*s) < p.threads {
		*s = append(*s, nil)
	}
	for i := range *s {
		if len((*s)[i]) < n {
			(*s)[i] = make([]T, n)
		}
	}
}

// scratch returns the workspace of type T of part q of a loop (reserve's
// size).
func scratch[T Float](p *Pool, q int) []T { return (*scratchOf[T](p))[q] }

// scratchOf returns p's workspace buffers of type T.
func scratchOf[T Float](p *Pool) *[][]T {
	if s, ok := any(&p.scratch32).(*[][]T); ok {
		return s
	}
	return any(&p.scratch64).(*[][]T)
}

// NewPool returns a pool of threads goroutines (runtime.GOMAXPROCS(0) when
// threads <= 0, the caller's own among them) that share a loop in parts of
// at least grain elements (32768 when grain <= 0).
func NewPool(threads, grain int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if grain <= 0 {
		grain = 1 << 15
	}
	p := &Pool{threads: threads, grain: grain}
	if p.threads > 1 {
		p.work = make(chan task, p.threads)
		for i := 1; i < p.threads; i++ {
			go worker(p.work)
		}
	}
	return p
}

// Threads returns the pool's number of threads.
func (p *Pool) Threads() int { return p.threads }

// Close stops the pool's goroutines; loops run on the caller afterwards.
func (p *Pool) Close() {
	if !p.closed.Swap(true) && p.work != nil {
		close(p.work)
	}
}

// task is a chunk [lo, hi) of a parallel loop.
type task struct {
	fn     func(lo, hi int)
	lo, hi int
	wg     *sync.WaitGroup
}

func worker(work <-chan task) {
	for t := range work {
		t.fn(t.lo, t.hi)
		t.wg.Done()
	}
}

// splitter runs a loop over [0, n) on the pool's threads. It is built once
// per kernel so that running it does not allocate.
type splitter struct {
	p     *Pool
	n     int
	parts int
	fn    func(lo, hi int)
	wg    sync.WaitGroup
}

// split returns a splitter over [0, n) in pieces of at least grain units
// (grain elements per unit of cost; cost is the work of one unit).
func (p *Pool) split(n, cost int, fn func(lo, hi int)) *splitter {
	parts := 1
	if p.threads > 1 && n > 1 {
		parts = min(p.threads, n, max(1, n*max(cost, 1)/p.grain))
	}
	return &splitter{p: p, n: n, parts: parts, fn: fn}
}

func (s *splitter) run() {
	if s.parts <= 1 || s.p.closed.Load() {
		s.fn(0, s.n)
		return
	}
	s.wg.Add(s.parts - 1)
	for q := 1; q < s.parts; q++ {
		s.p.work <- task{fn: s.fn, lo: q * s.n / s.parts, hi: (q + 1) * s.n / s.parts, wg: &s.wg}
	}
	s.fn(0, s.n/s.parts)
	s.wg.Wait()
}

// loop returns a Func that runs the splitter.
func (s *splitter) loop() Func { return func() error { s.run(); return nil } }

// part returns the index of the part of s's loop that starts at lo.
func part(s *splitter, lo int) int {
	q := 0
	for q < s.parts-1 && q*s.n/s.parts != lo {
		q++
	}
	return q
}
