//go:build !cgo

package dist

import "fmt"

// MPIOptions configure OpenMPI.
type MPIOptions struct {
	// Library is the Open MPI library to open: a soname or a path. If
	// empty, it is "libmpi.so.40" (Open MPI 4 and 5).
	Library string
	// Check makes every collective call first compare, across the ranks,
	// which call it is, its length and its root, so that a mismatch fails
	// every rank with ErrMismatch instead of being undefined.
	Check bool
}

// DefaultMPILibrary is the soname OpenMPI opens when MPIOptions.Library is
// empty.
const DefaultMPILibrary = "libmpi.so.40"

// OpenMPI returns an error wrapping ErrUnavailable: loading Open MPI needs
// cgo, which this build was made without.
func OpenMPI(MPIOptions) (Communicator, error) {
	return nil, fmt.Errorf("%w: this binary was built without cgo (CGO_ENABLED=0), which loading Open MPI needs", ErrUnavailable)
}
