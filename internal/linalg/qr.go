package linalg

import "errors"

// ErrNotFinite reports a matrix with a NaN or an infinite entry.
var ErrNotFinite = errors.New("matrix has a NaN or Inf entry")

// QR computes Q factors of tall matrices. Its zero value is ready to use; it
// keeps its workspace between calls, so a QR is not safe for concurrent use.
type QR[T Float] struct {
	be    qrWork[T] // the backend's workspace
	sign  []float64
	gram  []float64
	gramT []T
	f64   *QR[float64]
}

// QF overwrites the m x n row-major matrix a (m >= n) with the Q factor of
// its thin QR decomposition a = Q R, with the signs of Q's columns chosen so
// that diag(R) >= 0. With that convention Q is unique for full-rank a, which
// is what makes the QR retraction smooth and the Haar sampler exact.
func (q *QR[T]) QF(m, n int, a []T) error {
	if m < n {
		return errors.New("linalg: QF needs rows >= cols")
	}
	if n == 0 {
		return nil
	}
	if !Finite(a[:m*n]) {
		return ErrNotFinite
	}
	if cap(q.sign) < n {
		q.sign = make([]float64, n)
	}
	sign := q.sign[:n]
	qfBackend(q, m, n, a[:m*n], sign)
	for i := 0; i < m; i++ {
		row := a[i*n : i*n+n]
		for j, s := range sign {
			if s < 0 {
				row[j] = -row[j]
			}
		}
	}
	return nil
}

// Grow returns s with length n, reusing its storage when it is large enough.
func Grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}
