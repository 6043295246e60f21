package manifold

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/lapack/gonum"

	"github.com/orthonet/orthonet/internal/linalg"
)

// expm computes matrix exponentials of small float64 matrices by scaling and
// squaring with a diagonal [8/8] Padé approximant, reusing its buffers.
// Scaling to ||A/2^s||_1 <= 1/2 keeps the Padé error below float64 rounding.
type expm struct {
	buf  []float64
	ipiv []int
}

// padeCoef[k] is the k-th coefficient of the [8/8] Padé approximant of exp.
var padeCoef = func() [9]float64 {
	var c [9]float64
	c[0] = 1
	const q = 8
	for k := 1; k <= q; k++ {
		c[k] = c[k-1] * float64(q-k+1) / float64(k*(2*q-k+1))
	}
	return c
}()

// compute returns exp(a) for the q x q matrix a. The result aliases the
// receiver's buffer and is valid until the next call; a is not modified.
func (e *expm) compute(q int, a []float64) ([]float64, error) {
	if !linalg.Finite(a[:q*q]) {
		return nil, linalg.ErrNotFinite
	}
	qq := q * q
	e.buf = linalg.Grow(e.buf, 8*qq)
	x, x2, x4, x6, u, vv, t, r := e.buf[:qq], e.buf[qq:2*qq], e.buf[2*qq:3*qq], e.buf[3*qq:4*qq],
		e.buf[4*qq:5*qq], e.buf[5*qq:6*qq], e.buf[6*qq:7*qq], e.buf[7*qq:8*qq]
	var norm float64
	for j := 0; j < q; j++ {
		var s float64
		for i := 0; i < q; i++ {
			s += math.Abs(a[i*q+j])
		}
		norm = max(norm, s)
	}
	s := 0
	if norm > 0.5 {
		s = int(math.Ceil(math.Log2(norm / 0.5)))
	}
	scale := math.Ldexp(1, -s)
	for i := range x {
		x[i] = a[i] * scale
	}
	c := padeCoef
	linalg.Mul(false, false, q, q, q, x, x, x2)
	linalg.Mul(false, false, q, q, q, x2, x2, x4)
	linalg.Mul(false, false, q, q, q, x4, x2, x6)
	// vv = c0 I + c2 X^2 + c4 X^4 + c6 X^6 + c8 X^8, t = c1 I + c3 X^2 + c5 X^4 + c7 X^6.
	linalg.Mul(false, false, q, q, q, x4, x4, vv)
	for i := range vv {
		vv[i] = c[8]*vv[i] + c[6]*x6[i] + c[4]*x4[i] + c[2]*x2[i]
		t[i] = c[7]*x6[i] + c[5]*x4[i] + c[3]*x2[i]
	}
	for i := 0; i < q; i++ {
		vv[i*q+i] += c[0]
		t[i*q+i] += c[1]
	}
	linalg.Mul(false, false, q, q, q, x, t, u) // odd part
	// Numerator vv + u into r, denominator vv - u into x.
	for i := range r {
		r[i] = vv[i] + u[i]
		x[i] = vv[i] - u[i]
	}
	e.ipiv = linalg.Grow(e.ipiv, q)
	impl := gonum.Implementation{}
	if !impl.Dgetrf(q, q, x, q, e.ipiv) {
		return nil, errors.New("manifold: matrix exponential: singular Padé denominator")
	}
	impl.Dgetrs(blas.NoTrans, q, q, x, q, e.ipiv, r, q)
	for ; s > 0; s-- {
		linalg.Mul(false, false, q, q, q, r, r, t)
		r, t = t, r
	}
	return r, nil
}
