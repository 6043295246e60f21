package dist_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orthonet/orthonet/dist"
)

// onRanks runs f on every rank of c, each in its own goroutine, and returns
// the ranks' errors.
func onRanks[C dist.Communicator](c []C, f func(c dist.Communicator) error) []error {
	errs := make([]error, len(c))
	var wg sync.WaitGroup
	for r := range c {
		wg.Go(func() { errs[r] = f(c[r]) })
	}
	wg.Wait()
	return errs
}

// onAllRanks runs f on every rank of c (onRanks) and fails t with each
// rank's error.
func onAllRanks[C dist.Communicator](t *testing.T, c []C, f func(c dist.Communicator) error) {
	t.Helper()
	for r, err := range onRanks(c, f) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// allReduceSizes are the buffers the all-reduce benchmarks sum: the r x r
// matrix that RSDM-P sums per weight (r = 300) and a full 1024 x 1024
// gradient.
var allReduceSizes = []struct {
	name string
	n    int
}{{"r300x300", 300 * 300}, {"np1024x1024", 1024 * 1024}}

// local returns a group of size ranks in this process with a timeout that
// fails a hung test fast.
func local(t *testing.T, size int) []*dist.Local {
	t.Helper()
	g, err := dist.NewLocal(size, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// fill sets buf from rank r to integer values, whose sums over ranks are
// exact in float32 and float64.
func fill[T float32 | float64](buf []T, r int) {
	for i := range buf {
		buf[i] = T((r+1)*(i%97) - 3*r)
	}
}

// sumOver is fill's value at i summed over size ranks.
func sumOver(size, i int) int {
	s := 0
	for r := range size {
		s += (r+1)*(i%97) - 3*r
	}
	return s
}

func TestLocalAllReduceSum(t *testing.T) {
	for _, tc := range []struct {
		size, n int
	}{{1, 5}, {2, 0}, {2, 1}, {2, 1000}, {3, 33}, {5, 4096}} {
		t.Run(fmt.Sprintf("size%d_n%d", tc.size, tc.n), func(t *testing.T) {
			g := local(t, tc.size)
			onAllRanks(t, g, func(c dist.Communicator) error {
				a := make([]float32, tc.n)
				b := make([]float64, tc.n)
				fill(a, c.Rank())
				fill(b, c.Rank())
				if err := dist.AllReduceSum(c, a); err != nil {
					return err
				}
				if err := dist.AllReduceSum(c, b); err != nil {
					return err
				}
				for i := range a {
					if want := sumOver(tc.size, i); a[i] != float32(want) || b[i] != float64(want) {
						return fmt.Errorf("rank %d [%d]: %v, %v, want %d", c.Rank(), i, a[i], b[i], want)
					}
				}
				return nil
			})
		})
	}
}

// TestLocalSumBitsAgree: a sum of values that round (not integers) is the
// same bits on every rank, as the weights of data-parallel training must
// stay.
func TestLocalSumBitsAgree(t *testing.T) {
	const size, n = 3, 257
	g := local(t, size)
	got := make([][]float32, size)
	errs := onRanks(g, func(c dist.Communicator) error {
		a := make([]float32, n)
		for i := range a {
			a[i] = 1 / float32(3+i+7*c.Rank())
		}
		got[c.Rank()] = a
		return c.AllReduceSum32(a)
	})
	for r := range size {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		for i := range n {
			if got[r][i] != got[0][i] {
				t.Fatalf("rank %d [%d] = %v, rank 0 has %v", r, i, got[r][i], got[0][i])
			}
		}
	}
}

func TestLocalBroadcast(t *testing.T) {
	const size = 3
	for root := range size {
		t.Run(fmt.Sprintf("root%d", root), func(t *testing.T) {
			g := local(t, size)
			onAllRanks(t, g, func(c dist.Communicator) error {
				r := c.Rank()
				a, b, s := make([]float32, 4), make([]float64, 4), []byte{byte(r), 0}
				fill(a, r)
				fill(b, r)
				if err := dist.Broadcast(c, a, root); err != nil {
					return err
				}
				if err := dist.Broadcast(c, b, root); err != nil {
					return err
				}
				if err := c.BroadcastBytes(s, root); err != nil {
					return err
				}
				wa, wb := make([]float32, 4), make([]float64, 4)
				fill(wa, root)
				fill(wb, root)
				for i := range a {
					if a[i] != wa[i] || b[i] != wb[i] {
						return fmt.Errorf("got %v %v, want root's %v %v", a, b, wa, wb)
					}
				}
				if s[0] != byte(root) {
					return fmt.Errorf("bytes %v, want root %d's", s, root)
				}
				return nil
			})
		})
	}
}

// TestLocalBarrier: no rank leaves the barrier before the last has come.
func TestLocalBarrier(t *testing.T) {
	const size = 4
	g := local(t, size)
	var mu sync.Mutex
	arrived := 0
	onAllRanks(t, g, func(c dist.Communicator) error {
		time.Sleep(time.Duration(c.Rank()) * 20 * time.Millisecond)
		mu.Lock()
		arrived++
		mu.Unlock()
		if err := c.Barrier(); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if arrived != size {
			return fmt.Errorf("left the barrier with %d of %d ranks arrived", arrived, size)
		}
		return nil
	})
}

// TestLocalErrors: every rank fails with the error that names what went
// wrong, and none waits for ever.
func TestLocalErrors(t *testing.T) {
	cause := errors.New("bad batch")
	for _, tc := range []struct {
		name string
		rank func(c dist.Communicator) error // what each rank does
		want []error                         // each rank's error (nil: none)
		// usable: the group still works after the calls.
		usable bool
	}{
		{
			name: "bad root",
			rank: func(c dist.Communicator) error { return c.Broadcast32(make([]float32, 2), 2) },
			want: []error{errAny, errAny}, usable: true,
		},
		{
			name: "negative root",
			rank: func(c dist.Communicator) error { return c.Broadcast64(make([]float64, 2), -1) },
			want: []error{errAny, errAny}, usable: true,
		},
		{
			name: "different lengths",
			rank: func(c dist.Communicator) error { return c.AllReduceSum64(make([]float64, 3+c.Rank())) },
			want: []error{dist.ErrMismatch, dist.ErrMismatch},
		},
		{
			name: "different calls",
			rank: func(c dist.Communicator) error {
				if c.Rank() == 0 {
					return c.Barrier()
				}
				return c.AllReduceSum32(nil)
			},
			want: []error{dist.ErrMismatch, dist.ErrMismatch},
		},
		{
			name: "different roots",
			rank: func(c dist.Communicator) error { return c.BroadcastBytes(make([]byte, 1), c.Rank()) },
			want: []error{dist.ErrMismatch, dist.ErrMismatch},
		},
		{
			name: "abort while the other waits",
			rank: func(c dist.Communicator) error {
				if c.Rank() == 1 {
					time.Sleep(20 * time.Millisecond)
					if err := c.Abort(cause); err != nil {
						return err
					}
					return c.Barrier()
				}
				return c.AllReduceSum32(make([]float32, 8))
			},
			want: []error{dist.ErrAborted, dist.ErrAborted},
		},
		{
			name: "close while the other waits",
			rank: func(c dist.Communicator) error {
				if c.Rank() == 1 {
					time.Sleep(20 * time.Millisecond)
					if err := c.Close(); err != nil {
						return err
					}
					return c.Barrier()
				}
				return c.Barrier()
			},
			want: []error{dist.ErrClosed, dist.ErrClosed},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := local(t, 2)
			errs := onRanks(g, tc.rank)
			for r, want := range tc.want {
				switch {
				case want == errAny && errs[r] == nil:
					t.Errorf("rank %d: no error", r)
				case want != errAny && !errors.Is(errs[r], want):
					t.Errorf("rank %d: %v, want %v", r, errs[r], want)
				}
			}
			errs = onRanks(g, func(c dist.Communicator) error { return c.Barrier() })
			for r, err := range errs {
				if (err == nil) != tc.usable {
					t.Errorf("rank %d: barrier afterwards: %v (usable %v)", r, err, tc.usable)
				}
			}
		})
	}
}

// errAny stands for any error in TestLocalErrors.
var errAny = errors.New("any error")

// TestLocalAbortNamesCause: the other ranks' error names the rank that
// aborted and wraps its cause.
func TestLocalAbortNamesCause(t *testing.T) {
	cause := errors.New("NaN loss at step 7")
	g := local(t, 2)
	if err := g[1].Abort(cause); err != nil {
		t.Fatal(err)
	}
	err := g[0].AllReduceSum64([]float64{1})
	if !errors.Is(err, dist.ErrAborted) || !errors.Is(err, cause) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("%v: want ErrAborted and the cause, naming rank 1", err)
	}
}

func TestLocalTimeout(t *testing.T) {
	g, err := dist.NewLocal(3, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errs := onRanks(g[:2], func(c dist.Communicator) error { return c.Barrier() }) // rank 2 never comes
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	for r, err := range errs {
		if !errors.Is(err, dist.ErrTimeout) || !strings.Contains(err.Error(), "[2]") {
			t.Errorf("rank %d: %v, want ErrTimeout naming rank 2", r, err)
		}
	}
	if err := g[2].Barrier(); !errors.Is(err, dist.ErrTimeout) {
		t.Errorf("the late rank: %v, want ErrTimeout", err)
	}
}

// TestClosed: after Close every call fails with ErrClosed, on each
// implementation; Close again is harmless.
func TestClosed(t *testing.T) {
	g := local(t, 1)
	for name, c := range map[string]dist.Communicator{"single": dist.NewSingle(), "local": g[0]} {
		t.Run(name, func(t *testing.T) {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			calls := map[string]error{
				"AllReduceSum32": c.AllReduceSum32([]float32{1}),
				"AllReduceSum64": c.AllReduceSum64([]float64{1}),
				"Broadcast32":    c.Broadcast32([]float32{1}, 0),
				"Broadcast64":    c.Broadcast64([]float64{1}, 0),
				"BroadcastBytes": c.BroadcastBytes([]byte{1}, 0),
				"Barrier":        c.Barrier(),
			}
			for call, err := range calls {
				if !errors.Is(err, dist.ErrClosed) {
					t.Errorf("%s after Close: %v, want ErrClosed", call, err)
				}
			}
			if err := c.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestSingle(t *testing.T) {
	s := dist.NewSingle()
	if s.Rank() != 0 || s.Size() != 1 {
		t.Fatalf("rank %d of %d", s.Rank(), s.Size())
	}
	a, b := []float32{1.25, -3}, []float64{0.1, 2}
	if err := s.AllReduceSum32(a); err != nil || a[0] != 1.25 || a[1] != -3 {
		t.Errorf("sum32: %v %v", a, err)
	}
	if err := s.AllReduceSum64(b); err != nil || b[0] != 0.1 || b[1] != 2 {
		t.Errorf("sum64: %v %v", b, err)
	}
	if err := s.Broadcast64(b, 0); err != nil || b[0] != 0.1 {
		t.Errorf("broadcast from 0: %v %v", b, err)
	}
	if err := s.Broadcast32(a, 1); err == nil {
		t.Error("broadcast from root 1 of 1: no error")
	}
	cause := errors.New("disk full")
	s.Abort(cause)
	if err := s.Barrier(); !errors.Is(err, dist.ErrAborted) || !errors.Is(err, cause) {
		t.Errorf("barrier after Abort: %v", err)
	}
}

func TestNewLocalRefuses(t *testing.T) {
	if _, err := dist.NewLocal(0, 0); err == nil {
		t.Error("size 0: no error")
	}
	if _, err := dist.NewLocal(2, -time.Second); err == nil {
		t.Error("negative timeout: no error")
	}
}

func TestOpen(t *testing.T) {
	c, err := dist.Open("")
	if err != nil || c.Size() != 1 {
		t.Fatalf("Open(\"\"): %v, %v", c, err)
	}
	if _, err := dist.Open("nccl"); err == nil {
		t.Error("Open(nccl): no error")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	if _, err := dist.Open("single"); err == nil || !strings.Contains(err.Error(), "-dist mpi") {
		t.Errorf("single under mpirun -np 2: %v, want a refusal naming -dist mpi", err)
	}
}

// TestOpenMPIUnavailable: where Open MPI cannot be loaded (no library, or
// a build without cgo) the error is one line wrapping ErrUnavailable.
func TestOpenMPIUnavailable(t *testing.T) {
	_, err := dist.OpenMPI(dist.MPIOptions{Library: "/nonexistent/libmpi.so.40"})
	if !errors.Is(err, dist.ErrUnavailable) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%q: want one line wrapping ErrUnavailable", err)
	}
}

// TestLocalNoAllocs: a sum and a broadcast of the in-process group
// allocate nothing once running.
func TestLocalNoAllocs(t *testing.T) {
	g := local(t, 2)
	a := [2][]float32{make([]float32, 64), make([]float32, 64)}
	b := [2][]float64{make([]float64, 64), make([]float64, 64)}
	start, done := make(chan struct{}), make(chan error)
	go func() { // rank 1 answers each of rank 0's calls
		for range start {
			err := g[1].AllReduceSum32(a[1])
			if err == nil {
				err = dist.AllReduceSum(g[1], b[1])
			}
			if err == nil {
				err = g[1].Broadcast64(b[1], 0)
			}
			done <- err
		}
	}()
	defer close(start)
	var err error
	allocs := testing.AllocsPerRun(20, func() {
		start <- struct{}{}
		if e := g[0].AllReduceSum32(a[0]); e != nil {
			err = e
		}
		if e := dist.AllReduceSum(g[0], b[0]); e != nil {
			err = e
		}
		if e := g[0].Broadcast64(b[0], 0); e != nil {
			err = e
		}
		if e := <-done; e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per sum, sum and broadcast", allocs)
	}
}

// BenchmarkLocalAllReduce times the in-process group's float32 sum over 2
// ranks, for the sizes of BenchmarkAllReduceMPI.
func BenchmarkLocalAllReduce(b *testing.B) {
	for _, s := range allReduceSizes {
		b.Run(s.name, func(b *testing.B) {
			g, err := dist.NewLocal(2, 0)
			if err != nil {
				b.Fatal(err)
			}
			bufs := [2][]float32{make([]float32, s.n), make([]float32, s.n)}
			b.SetBytes(int64(4 * s.n))
			errs := onRanks(g, func(c dist.Communicator) error {
				for range b.N {
					if err := c.AllReduceSum32(bufs[c.Rank()]); err != nil {
						return err
					}
				}
				return nil
			})
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
