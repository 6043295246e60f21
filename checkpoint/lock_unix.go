//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// noFollow makes an open fail on a symbolic link.
const noFollow = syscall.O_NOFOLLOW

// tryLock takes an exclusive flock(2) on f without waiting, and reports
// false where another open file holds it. The kernel releases the lock
// when the file is closed or its process ends, however it ends (SIGKILL
// included).
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}
