//go:build !linux

package membudget

// addressLimit reports no RLIMIT_AS: it is read on Linux only.
func addressLimit() (uint64, bool) { return 0, false }
