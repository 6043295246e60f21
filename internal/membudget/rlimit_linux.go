package membudget

import "syscall"

// addressLimit returns RLIMIT_AS's soft limit, ok false where it is
// unlimited (RLIM_INFINITY, all ones) or cannot be read.
func addressLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil || r.Cur == ^uint64(0) {
		return 0, false
	}
	return r.Cur, true
}
