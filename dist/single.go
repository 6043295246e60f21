package dist

import "fmt"

// Single is the group of one rank: a process that trains alone. Its sums
// leave buffers as they are and its broadcasts need root 0.
type Single struct {
	err error // set by Close or Abort: every later call returns it
}

var _ Communicator = (*Single)(nil)

// NewSingle returns the communicator of one rank.
func NewSingle() *Single { return &Single{} }

// Rank returns 0.
func (s *Single) Rank() int { return 0 }

// Size returns 1.
func (s *Single) Size() int { return 1 }

// AllReduceSum32 leaves buf as it is: the sum over one rank.
func (s *Single) AllReduceSum32(buf []float32) error { return s.err }

// AllReduceSum64 leaves buf as it is: the sum over one rank.
func (s *Single) AllReduceSum64(buf []float64) error { return s.err }

// Broadcast32 leaves buf as it is; root must be 0.
func (s *Single) Broadcast32(buf []float32, root int) error { return s.bcast(opBcast32, root) }

// Broadcast64 leaves buf as it is; root must be 0.
func (s *Single) Broadcast64(buf []float64, root int) error { return s.bcast(opBcast64, root) }

// BroadcastBytes leaves buf as it is; root must be 0.
func (s *Single) BroadcastBytes(buf []byte, root int) error { return s.bcast(opBcastBytes, root) }

func (s *Single) bcast(o op, root int) error {
	if s.err != nil {
		return s.err
	}
	return checkRoot(o, root, 1)
}

// Barrier returns at once.
func (s *Single) Barrier() error { return s.err }

// Abort makes every later call return an error wrapping ErrAborted and
// cause.
func (s *Single) Abort(cause error) error {
	if s.err == nil || s.err == ErrClosed {
		s.err = aborted(0, cause)
	}
	return nil
}

// Close makes every later call return ErrClosed.
func (s *Single) Close() error {
	if s.err == nil {
		s.err = ErrClosed
	}
	return nil
}

// aborted is the error of the calls after rank aborted the group.
func aborted(rank int, cause error) error {
	if cause == nil {
		return fmt.Errorf("dist: rank %d aborted: %w", rank, ErrAborted)
	}
	return fmt.Errorf("dist: rank %d aborted: %w: %w", rank, ErrAborted, cause)
}
