//go:build cgo

package dist

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "ompi.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"unsafe"
)

// MPIOptions configure OpenMPI.
type MPIOptions struct {
	// Library is the Open MPI library to open: a soname or a path. If
	// empty, it is "libmpi.so.40" (Open MPI 4 and 5).
	Library string
	// Check makes every collective call first compare, across the ranks,
	// which call it is, its length and its root (one all-reduce of 8
	// integers), so that a mismatch fails every rank with ErrMismatch
	// instead of being undefined.
	Check bool
}

// DefaultMPILibrary is the soname OpenMPI opens when MPIOptions.Library is
// empty.
const DefaultMPILibrary = "libmpi.so.40"

// mpiState guards that MPI starts at most once per process, as MPI allows.
var mpiState struct {
	sync.Mutex
	started bool
}

// maxCount is the most elements one MPI call takes (its count is a C int);
// longer buffers go in pieces.
const maxCount = 1 << 30

// OpenMPI starts MPI (MPI_Init_thread) and returns this process's rank of
// MPI_COMM_WORLD: under `mpirun -np N`, one of N ranks; started alone, the
// only rank of a group of 1. MPI starts once per process: a second OpenMPI
// fails. Open MPI's libmpi.so.40 is loaded now (see the package
// documentation); where it is missing, the error says so in one line and
// wraps ErrUnavailable.
func OpenMPI(opts MPIOptions) (Communicator, error) {
	mpiState.Lock()
	defer mpiState.Unlock()
	if mpiState.started {
		return nil, fmt.Errorf("dist: MPI was already started in this process (it starts once per process)")
	}
	lib := opts.Library
	if lib == "" {
		lib = DefaultMPILibrary
	}
	m := &mpiComm{api: new(C.ompi_api), check: opts.Check, calls: make(chan mpiCall), done: make(chan error), hdr: new([8]int64)}
	var msg [512]C.char
	path := C.CString(lib)
	defer C.free(unsafe.Pointer(path))
	if C.ompi_load(m.api, path, &msg[0], C.size_t(len(msg))) != 0 {
		return nil, fmt.Errorf("%w: cannot load Open MPI's %s (apt-get install openmpi-bin): %s", ErrUnavailable, lib, C.GoString(&msg[0]))
	}
	started := make(chan error)
	go m.serve(started)
	if err := <-started; err != nil {
		return nil, err
	}
	mpiState.started = true
	return m, nil
}

// mpiComm is a rank of MPI_COMM_WORLD. Every MPI call but MPI_Abort runs on
// one goroutine locked to its OS thread (serve), since MPI wants
// MPI_Finalize on the thread that started it, and the Go scheduler would
// move a caller's calls between threads.
type mpiComm struct {
	api        *C.ompi_api // in Go memory; the C calls read it, never keep it
	rank, size int
	check      bool

	mu     sync.Mutex // one call at a time
	calls  chan mpiCall
	done   chan error
	closed bool
	err    error     // the first MPI error: every later call returns it
	hdr    *[8]int64 // Check's all-reduce, apart from the struct (cgo's pointer rules)
}

var _ Communicator = (*mpiComm)(nil)

// mpiCall is one request to the MPI thread.
type mpiCall struct {
	c   call
	buf unsafe.Pointer
	typ C.ompi_handle
}

// serve starts MPI on a locked thread, reports on started, then makes the
// calls that come on m.calls until a finalize.
func (m *mpiComm) serve(started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	var provided C.int
	if rc := C.ompi_init(m.api, &provided); rc != 0 {
		if rc == -1 {
			started <- fmt.Errorf("dist: MPI was started in this process by someone else")
		} else {
			started <- m.mpiError("MPI_Init_thread", rc)
		}
		return
	}
	var rank, size C.int
	if rc := C.ompi_rank_size(m.api, &rank, &size); rc != 0 {
		started <- m.mpiError("MPI_Comm_rank", rc)
		return
	}
	m.rank, m.size = int(rank), int(size)
	started <- nil
	for req := range m.calls {
		if req.c.op == 0 { // finalize
			rc := C.ompi_finalize(m.api)
			if rc != 0 {
				m.done <- m.mpiError("MPI_Finalize", rc)
			} else {
				m.done <- nil
			}
			return
		}
		m.done <- m.do(req)
	}
}

// do makes one call on the MPI thread, in pieces of at most maxCount
// elements.
func (m *mpiComm) do(req mpiCall) error {
	switch req.c.op {
	case opBarrier:
		return m.mpiError("MPI_Barrier", C.ompi_barrier(m.api))
	case opCompare:
		return m.mpiError("MPI_Allreduce", C.ompi_allreduce_max_int64(m.api, req.buf, 8))
	}
	size := uintptr(elemSize(req.c.op))
	for off := 0; off < req.c.n; off += maxCount {
		n := C.int(min(maxCount, req.c.n-off))
		p := unsafe.Add(req.buf, uintptr(off)*size)
		switch req.c.op {
		case opSum32, opSum64:
			if rc := C.ompi_allreduce_sum(m.api, p, n, req.typ); rc != 0 {
				return m.mpiError("MPI_Allreduce", rc)
			}
		default:
			if rc := C.ompi_bcast(m.api, p, n, req.typ, C.int(req.c.root)); rc != 0 {
				return m.mpiError("MPI_Bcast", rc)
			}
		}
	}
	return nil
}

func elemSize(o op) int {
	switch o {
	case opSum32, opBcast32:
		return 4
	case opSum64, opBcast64:
		return 8
	}
	return 1
}

// mpiError returns nil for rc 0, else an error naming the call and MPI's
// message.
func (m *mpiComm) mpiError(what string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	var s [C.OMPI_MAX_ERROR_STRING]C.char
	C.ompi_error_string(m.api, rc, &s[0])
	return fmt.Errorf("dist: %s failed: %s", what, C.GoString(&s[0]))
}

// Rank returns this process's rank in MPI_COMM_WORLD.
func (m *mpiComm) Rank() int { return m.rank }

// Size returns the number of processes in MPI_COMM_WORLD.
func (m *mpiComm) Size() int { return m.size }

// AllReduceSum32 replaces buf, on every rank, with the sum of every rank's
// buf (MPI_Allreduce with MPI_SUM, in place).
func (m *mpiComm) AllReduceSum32(buf []float32) error {
	return m.run(call{opSum32, len(buf), -1}, unsafe.Pointer(unsafe.SliceData(buf)), m.api.float32)
}

// AllReduceSum64 replaces buf, on every rank, with the sum of every rank's
// buf (MPI_Allreduce with MPI_SUM, in place).
func (m *mpiComm) AllReduceSum64(buf []float64) error {
	return m.run(call{opSum64, len(buf), -1}, unsafe.Pointer(unsafe.SliceData(buf)), m.api.float64)
}

// Broadcast32 copies root's buf into every other rank's buf (MPI_Bcast).
func (m *mpiComm) Broadcast32(buf []float32, root int) error {
	return m.run(call{opBcast32, len(buf), root}, unsafe.Pointer(unsafe.SliceData(buf)), m.api.float32)
}

// Broadcast64 copies root's buf into every other rank's buf (MPI_Bcast).
func (m *mpiComm) Broadcast64(buf []float64, root int) error {
	return m.run(call{opBcast64, len(buf), root}, unsafe.Pointer(unsafe.SliceData(buf)), m.api.float64)
}

// BroadcastBytes copies root's buf into every other rank's buf (MPI_Bcast).
func (m *mpiComm) BroadcastBytes(buf []byte, root int) error {
	return m.run(call{opBcastBytes, len(buf), root}, unsafe.Pointer(unsafe.SliceData(buf)), m.api.byte)
}

// Barrier returns once every rank has called it (MPI_Barrier).
func (m *mpiComm) Barrier() error {
	return m.run(call{opBarrier, 0, -1}, nil, nil)
}

// run checks call c (against the other ranks too, with Check) and makes it
// on the MPI thread.
func (m *mpiComm) run(c call, buf unsafe.Pointer, typ C.ompi_handle) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("dist: %v on rank %d: %w", c.op, m.rank, ErrClosed)
	}
	if m.err != nil {
		return m.err
	}
	if m.check {
		if err := m.compare(c); err != nil {
			return err
		}
	}
	if c.op.rooted() {
		if err := checkRoot(c.op, c.root, m.size); err != nil {
			return err
		}
	}
	if c.n == 0 && c.op != opBarrier {
		return nil
	}
	m.calls <- mpiCall{c: c, buf: buf, typ: typ}
	if err := <-m.done; err != nil {
		m.err = fmt.Errorf("%w (rank %d, %v)", err, m.rank, c)
		return m.err
	}
	return nil
}

// compare all-reduces the maximum of c and of its negation across the
// ranks: where the two differ, some rank made another call.
func (m *mpiComm) compare(c call) error {
	h := m.hdr
	h[0], h[1], h[2] = int64(c.op), int64(c.n), int64(c.root)
	h[3] = 0
	for i := range 4 {
		h[4+i] = -h[i]
	}
	m.calls <- mpiCall{c: call{op: opCompare}, buf: unsafe.Pointer(&h[0])}
	if err := <-m.done; err != nil {
		m.err = fmt.Errorf("%w (rank %d, checking %v)", err, m.rank, c)
		return m.err
	}
	if h[0] == -h[4] && h[1] == -h[5] && h[2] == -h[6] {
		return nil
	}
	lo := call{op(-h[4]), int(-h[5]), int(-h[6])}
	hi := call{op(h[0]), int(h[1]), int(h[2])}
	// Every rank got the same maxima, so every rank returns this error and
	// none waits: the group may go on.
	return fmt.Errorf("dist: rank %d called %v; the ranks' calls range from %v to %v: %w", m.rank, c, lo, hi, ErrMismatch)
}

// Abort ends the MPI job (MPI_Abort on MPI_COMM_WORLD with exit code 1):
// every process, this one included. It says why on standard error first.
// It is called from the caller's thread, not the MPI thread, so that it
// works while another goroutine waits in a collective call.
func (m *mpiComm) Abort(cause error) error {
	if cause == nil {
		cause = ErrAborted
	}
	fmt.Fprintf(os.Stderr, "dist: rank %d of %d aborts the MPI job: %v\n", m.rank, m.size, cause)
	rc := C.ompi_abort(m.api, 1)
	return fmt.Errorf("dist: MPI_Abort returned %d: %w", int(rc), cause)
}

// Close finalizes MPI (MPI_Finalize) once every rank is done. After an MPI
// error it aborts the job instead, since other ranks may wait in the call
// that failed and MPI_Finalize would wait for them.
func (m *mpiComm) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if m.err != nil {
		return m.Abort(m.err)
	}
	m.closed = true
	m.calls <- mpiCall{}
	return <-m.done
}

// opCompare is the MPI thread's all-reduce of 8 int64 by maximum (Check).
const opCompare op = math.MaxInt32
