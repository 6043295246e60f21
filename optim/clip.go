package optim

import (
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// clipGrads scales every gradient of the step under way by ClipNorm / norm
// when their global norm exceeds ClipNorm.
func (s *Solver) clipGrads() error {
	var total float64
	for i, o := range s.slots { // typedSlots: NewSolver refuses clipping on a device
		sq, err := o.(normed).sqNorm(s.grads[i])
		if err != nil {
			return fmt.Errorf("optim: %s: gradient clipping: %w; no parameter was updated", s.params[i].describe(), err)
		}
		total += sq
	}
	norm := math.Sqrt(total)
	if !(norm > s.options.ClipNorm) {
		return nil
	}
	c := s.options.ClipNorm / norm
	for _, g := range s.grads {
		scale(g, c)
	}
	return nil
}

// normed is a stepper that measures its gradient for clipping: a host
// parameter's typedSlot.
type normed interface {
	sqNorm(g Gradient) (float64, error)
}

var _ normed = (*typedSlot[float32])(nil)

// scale multiplies a gradient (one factor of a factored one) by c.
func scale(g Gradient, c float64) {
	switch d := g.(type) {
	case Host[float32]:
		for i := range d {
			d[i] *= float32(c)
		}
	case Host[float64]:
		for i := range d {
			d[i] *= c
		}
	case factored:
		scale(d.b, c)
	}
}

// sqNorm returns the squared norm of the gradient g: Euclidean for an
// unconstrained parameter, of its Riemannian gradient P_X(G) for a
// constrained one. With M = X^T G for the column-orthonormal X (W^T for a
// wide W), ||P_X(G)||^2 is ||G||^2 - ||sym(M)||^2 on the Stiefel manifold
// and ||G||^2 - ||M||^2 on the Grassmann manifold; on another manifold it
// is the Euclidean norm of its own projection (sqNormProj).
func (t *typedSlot[T]) sqNorm(g Gradient) (float64, error) {
	if t.m == nil {
		gs := g.(Host[T])
		return linalg.Dot(gs, gs), nil
	}
	_, stiefel := t.m.(*manifold.Stiefel[T])
	_, grass := t.m.(*manifold.Grassmann[T])
	if !stiefel && !grass {
		return t.sqNormProj(g)
	}
	x := t.x
	n, p := t.m.Dims() // of the column-orthonormal view
	var gg float64
	var m []T
	switch gr := g.(type) {
	case Host[T]:
		gg = linalg.Dot(gr, gr)
		t.clip = linalg.Grow(t.clip, p*p)
		m = t.clip
		if t.wide { // X^T G' = W G^T, W (p x n) row-major
			linalg.Gemm(false, true, p, p, n, 1, x, n, gr, n, 0, m, p)
		} else {
			linalg.Gemm(true, false, p, p, n, 1, x, p, gr, p, 0, m, p)
		}
	case factored:
		a, b := []T(gr.a.(Host[T])), []T(gr.b.(Host[T]))
		k := gr.k
		if t.wide { // the view's gradient is B^T A
			a, b = b, a
		}
		t.clip = linalg.Grow(t.clip, p*p+k*p+2*k*k)
		ws := t.clip
		m = ws[:p*p]
		ax, aa, bb := ws[p*p:p*p+k*p], ws[p*p+k*p:p*p+k*p+k*k], ws[p*p+k*p+k*k:]
		// ||A^T B||^2 = <A A^T, B B^T>.
		linalg.Gemm(false, true, k, k, n, 1, a, n, a, n, 0, aa, k)
		linalg.Gemm(false, true, k, k, p, 1, b, p, b, p, 0, bb, k)
		gg = linalg.Dot(aa, bb)
		// M = X^T A^T B = (A X)^T B.
		if t.wide { // X = W^T with W (p x n): A X = A W^T
			linalg.Gemm(false, true, k, p, n, 1, a, n, x, n, 0, ax, p)
		} else {
			linalg.Gemm(false, false, k, p, n, 1, a, n, x, p, 0, ax, p)
		}
		linalg.Gemm(true, false, p, p, k, 1, ax, p, b, p, 0, m, p)
	}
	var mm float64
	for i := 0; i < p; i++ {
		for j := 0; j < p; j++ {
			e := float64(m[i*p+j])
			if !grass {
				e = (e + float64(m[j*p+i])) / 2
			}
			mm += e * e
		}
	}
	return max(gg-mm, 0), nil
}

// sqNormProj returns ||P_X(G)||^2 on a manifold other than Stiefel and
// Grassmann, by the manifold's own projection (Proj, which with the
// Euclidean metric maps G to the Riemannian gradient): of the view's X and
// G, a factored gradient multiplied out.
func (t *typedSlot[T]) sqNormProj(g Gradient) (float64, error) {
	n, p := t.m.Dims() // of the column-orthonormal view
	np := n * p
	t.clip = linalg.Grow(t.clip, 3*np)
	xv, gv, pg := t.clip[:np], t.clip[np:2*np], t.clip[2*np:3*np]
	if t.wide {
		linalg.Transpose(xv, t.x, p, n)
	} else {
		copy(xv, t.x)
	}
	switch gr := g.(type) {
	case Host[T]:
		if t.wide {
			linalg.Transpose(gv, gr, p, n)
		} else {
			copy(gv, gr)
		}
	case factored:
		a, b := []T(gr.a.(Host[T])), []T(gr.b.(Host[T]))
		if t.wide { // the view's gradient is B^T A
			a, b = b, a
		}
		linalg.Gemm(true, false, n, p, gr.k, 1, a, n, b, p, 0, gv, p)
	}
	if err := t.m.Proj(pg, xv, gv); err != nil {
		return 0, fmt.Errorf("measuring the Riemannian gradient on %s: %w", manifoldName(t.m), err)
	}
	return linalg.Dot(pg, pg), nil
}
