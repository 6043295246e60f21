package dist

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Communicator is one rank's end of a group of ranks that run the same
// program in step. Every rank makes the same calls in the same order (see
// the package documentation); the calls of one rank are made one at a time.
// A method that fails returns an error and never panics; after an error the
// caller should Abort, so that no other rank waits for ever.
type Communicator interface {
	// Rank returns this rank's number, from 0 to Size()-1.
	Rank() int
	// Size returns the number of ranks in the group.
	Size() int

	// AllReduceSum32 replaces buf, on every rank, with the element-wise sum
	// of every rank's buf.
	AllReduceSum32(buf []float32) error
	// AllReduceSum64 replaces buf, on every rank, with the element-wise sum
	// of every rank's buf.
	AllReduceSum64(buf []float64) error

	// Broadcast32 copies root's buf into every other rank's buf.
	Broadcast32(buf []float32, root int) error
	// Broadcast64 copies root's buf into every other rank's buf.
	Broadcast64(buf []float64, root int) error
	// BroadcastBytes copies root's buf into every other rank's buf.
	BroadcastBytes(buf []byte, root int) error

	// Barrier returns once every rank has called it.
	Barrier() error

	// Abort ends the group on every rank because of cause (which may be
	// nil). Under MPI the whole job ends, this process included, with a
	// non-zero exit: Abort returns only when that failed. In one process,
	// every rank's waiting and later calls return an error wrapping
	// ErrAborted and cause.
	Abort(cause error) error

	// Close leaves the group; every rank closes once it is done. Later
	// calls return an error wrapping ErrClosed; a second Close returns nil.
	Close() error
}

var (
	// ErrClosed is wrapped by the error of a call after Close, or of a call
	// that waits for a rank that has closed.
	ErrClosed = errors.New("dist: communicator closed")
	// ErrAborted is wrapped by the error of every call after a rank aborted
	// the group.
	ErrAborted = errors.New("dist: group aborted")
	// ErrMismatch is wrapped by the error of a collective call that the
	// ranks did not make alike (another call, length or root).
	ErrMismatch = errors.New("dist: ranks made different calls")
	// ErrTimeout is wrapped by the error of an in-process call that waited
	// longer than the group's timeout for the other ranks.
	ErrTimeout = errors.New("dist: timed out waiting for the other ranks")
	// ErrUnavailable is wrapped by the error of OpenMPI where MPI cannot be
	// used: a build without cgo, or no Open MPI library.
	ErrUnavailable = errors.New("dist: MPI is not available")
)

// AllReduceSum replaces buf, on every rank, with the element-wise sum of
// every rank's buf: c.AllReduceSum32 or c.AllReduceSum64, for code that is
// generic in its float type.
func AllReduceSum[T float32 | float64](c Communicator, buf []T) error {
	switch b := any(buf).(type) {
	case []float32:
		return c.AllReduceSum32(b)
	case []float64:
		return c.AllReduceSum64(b)
	}
	return fmt.Errorf("dist: AllReduceSum: unsupported buffer %T", buf)
}

// Broadcast copies root's buf into every other rank's buf: c.Broadcast32 or
// c.Broadcast64, for code that is generic in its float type.
func Broadcast[T float32 | float64](c Communicator, buf []T, root int) error {
	switch b := any(buf).(type) {
	case []float32:
		return c.Broadcast32(b, root)
	case []float64:
		return c.Broadcast64(b, root)
	}
	return fmt.Errorf("dist: Broadcast: unsupported buffer %T", buf)
}

// Open returns the communicator that a command line names: "single" (or "")
// for one process, "mpi" for the processes mpirun started. "single" is
// refused in a process that mpirun started as one of several ranks, where N
// independent runs would each write the same files.
func Open(kind string) (Communicator, error) {
	switch kind {
	case "", "single":
		if n := LaunchedRanks(); n > 1 {
			return nil, fmt.Errorf("dist: started by an MPI launcher as one of %d ranks, but asked to run single-process: use -dist mpi", n)
		}
		return NewSingle(), nil
	case "mpi":
		return OpenMPI(MPIOptions{Check: os.Getenv(CheckEnv) == "1"})
	}
	return nil, fmt.Errorf("dist: unknown communicator %q (want single or mpi)", kind)
}

// CheckEnv names the environment variable that, set to 1, makes Open("mpi")
// check every collective call for mismatched ranks (MPIOptions.Check).
const CheckEnv = "ORTHONET_DIST_CHECK"

// LaunchedRanks returns the number of ranks that an MPI launcher (Open MPI's
// mpirun, or a PMI launcher such as MPICH's) says it started with this
// process, and 0 for a process that no launcher started.
func LaunchedRanks() int {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// call names a collective call and its shape, to check that every rank made
// the same one.
type call struct {
	op   op
	n    int // elements
	root int // of a broadcast; -1 for the others
}

// op is a kind of collective call.
type op int

const (
	opSum32 op = iota + 1
	opSum64
	opBcast32
	opBcast64
	opBcastBytes
	opBarrier
)

var opNames = [...]string{
	opSum32:      "AllReduceSum32",
	opSum64:      "AllReduceSum64",
	opBcast32:    "Broadcast32",
	opBcast64:    "Broadcast64",
	opBcastBytes: "BroadcastBytes",
	opBarrier:    "Barrier",
}

func (o op) String() string {
	if o > 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// rooted reports whether o has a root.
func (o op) rooted() bool { return o == opBcast32 || o == opBcast64 || o == opBcastBytes }

func (c call) String() string {
	s := fmt.Sprintf("%v of %d", c.op, c.n)
	if c.op.rooted() {
		s += fmt.Sprintf(" from root %d", c.root)
	}
	return s
}

// checkRoot returns an error where root is not a rank of a group of size.
func checkRoot(o op, root, size int) error {
	if root < 0 || root >= size {
		return fmt.Errorf("dist: %v: root %d is not a rank of a group of %d", o, root, size)
	}
	return nil
}
