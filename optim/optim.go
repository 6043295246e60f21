// Package optim updates weights that live on the Stiefel or Grassmann
// manifold, or on a manifold of one's own: RSDM, the Riemannian random
// submanifold descent method of Han, Poirion and Takeda (ICML 2025), with
// its permutation, orthogonal and covering-block samplers and its momentum
// variant, Riemannian coordinate descent, Riemannian gradient descent (RGD)
// with or without momentum and Riemannian Adam, and SGD, Adam and AdamW
// (Adam with decoupled weight decay) for the unconstrained parameters.
//
// An optimizer is built once for one weight's manifold with its options, and
// Step is called with the weight and its Euclidean gradient each iteration;
// Step updates the weight in place and allocates nothing after its first
// call. Weights are row-major slices of float32 or float64.
//
// A Solver steps many parameters, each carrying the kind of its manifold
// (manifold.Kind), in groups whose Rule (a value: RSDMConfig, RGDConfig,
// AdamWConfig, ... or one's own) builds each parameter's Stepper; RSDM's
// Sampler is a value too. A parameter's value and gradient are typed
// (Value: a Host slice, or a device's memory). A constrained rule may write
// its step once in StepBlocks (Described, as RGDConfig does), from which
// both its host stepper and its device stepper are recorded. Package
// optim/device steps the same rules in a backend's memory.
package optim

import (
	"errors"
	"fmt"
	"math"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Float is the element type of weights and gradients.
type Float = manifold.Float

// Optimizer updates one constrained weight from its Euclidean gradient.
type Optimizer[T Float] interface {
	// Step moves x, an n x p point of the optimizer's manifold, along the
	// Euclidean gradient grad. On error x is left unchanged.
	Step(x, grad []T) error
}

// ErrNotFinite reports a gradient with a NaN or Inf entry.
var ErrNotFinite = errors.New("optim: gradient has a NaN or Inf entry")

// step is an optimizer's Step: after the check err, prepare, then commit,
// or abort what prepare advanced.
func step[T Float](o twoPhase[T], err error, x, grad []T) error {
	if err != nil {
		return err
	}
	if err := o.prepare(x, grad); err != nil {
		o.abort()
		return err
	}
	o.commit(x, grad)
	return nil
}

func checkStep[T Float](n, p int, x, grad []T) error {
	if len(x) != n*p {
		return fmt.Errorf("%w: weight has %d entries, want %d x %d", manifold.ErrShape, len(x), n, p)
	}
	if len(grad) != n*p {
		return fmt.Errorf("%w: gradient has %d entries, want %d x %d", manifold.ErrShape, len(grad), n, p)
	}
	if !linalg.Finite(grad) {
		return ErrNotFinite
	}
	return nil
}

// Factored is a Euclidean gradient given as the product A^T B of a K x n
// matrix A and a K x p matrix B, both row-major: the gradient of a linear
// layer's n x p weight over a batch of K examples (A the layer's inputs, B
// the gradients of its outputs). RSDM steps along it without forming it.
type Factored[T Float] struct {
	K    int
	A, B []T
}

func checkFactored[T Float](n, p int, x []T, g Factored[T]) error {
	if len(x) != n*p {
		return fmt.Errorf("%w: weight has %d entries, want %d x %d", manifold.ErrShape, len(x), n, p)
	}
	if g.K < 1 || len(g.A) != g.K*n || len(g.B) != g.K*p {
		return fmt.Errorf("%w: gradient factors of %d and %d entries for K = %d, want K x %d and K x %d", manifold.ErrShape, len(g.A), len(g.B), g.K, n, p)
	}
	if !linalg.Finite(g.A) || !linalg.Finite(g.B) {
		return ErrNotFinite
	}
	return nil
}

func checkLR(lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		return fmt.Errorf("optim: learning rate %v, want a finite value >= 0", lr)
	}
	return nil
}

// setLR sets *dst to lr, a step size checked by checkLR.
func setLR(dst *float64, lr float64) error {
	if err := checkLR(lr); err != nil {
		return err
	}
	*dst = lr
	return nil
}

func checkMomentum(beta float64) error {
	if !(beta >= 0 && beta < 1) {
		return fmt.Errorf("optim: momentum %v, want 0 <= momentum < 1", beta)
	}
	return nil
}

// checkPlain checks an unconstrained parameter and its gradient.
func checkPlain[T Float](n int, w, g []T) error {
	if len(w) != n || len(g) != n {
		return fmt.Errorf("optim: parameter has %d entries and gradient %d, want %d", len(w), len(g), n)
	}
	if !linalg.Finite(g) {
		return ErrNotFinite
	}
	return nil
}
