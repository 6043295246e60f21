//go:build cgo

package cuda

// Pretend is pretend for the package's external tests (package cuda_test):
// the host model set for one test, its default restored after.
var Pretend = pretend
