//go:build cgo

package dist_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// TestMPISolver trains a small problem on 2 ranks under mpirun, each on its
// half of every global batch, with optim's data-parallel Solver (RSDM on a
// Stiefel weight, Adam on a bias): both ranks must end with the same bits,
// and within rounding of one process that steps on the whole batches.
func TestMPISolver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, code, took := run(t, mpirun(t, ctx, 2, "solver"))
	t.Logf("mpirun -np 2: exit %d in %v\n%s", code, took.Round(time.Millisecond), out)
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for r := range 2 {
		if want := fmt.Sprintf("rank %d of 2: ok", r); !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
}

// solverProblem is least squares through out = a W + c, W a 16 x 6 weight
// with orthonormal columns and c a bias, its gradients means over a batch.
type solverProblem struct {
	w, c, gw, gc []float64
	solver       *optim.Solver
}

const (
	spN, spP, spBatch, spSteps = 16, 6, 8, 5
	// spTol bounds how far 2 ranks may end from one process: the ranks
	// sum two half-batch means where one process sums the batch, a few
	// units of float64 rounding (2.2e-16) per step; measured ~1e-16.
	spTol = 1e-13
)

func newSolverProblem(c optim.Communicator) (*solverProblem, error) {
	p := &solverProblem{w: make([]float64, spN*spP), c: make([]float64, spP), gw: make([]float64, spN*spP), gc: make([]float64, spP)}
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range p.w {
		p.w[i] = rng.NormFloat64()
	}
	params := []optim.Param{
		{Name: "w", Shape: []int{spN, spP}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](p.w), Grad: optim.Host[float64](p.gw)},
		{Name: "c", Shape: []int{spP}, Value: optim.Host[float64](p.c), Grad: optim.Host[float64](p.gc)},
	}
	if err := params[0].Orthonormalize(); err != nil {
		return nil, err
	}
	groups := []optim.Group{
		{Select: optim.Param.Constrained, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 3}, LR: 0.3},
		{Rule: optim.AdamConfig{}, LR: 0.05},
	}
	var err error
	p.solver, err = optim.NewSolver(params, groups, optim.Options{Comm: c, ChecksumEvery: 1})
	return p, err
}

// step sets the mean gradients over examples [from, to) of the global
// batch of step k and steps.
func (p *solverProblem) step(k, from, to int) error {
	clear(p.gw)
	clear(p.gc)
	rng := rand.New(rand.NewPCG(uint64(k), 5))
	for e := range spBatch {
		a, t := make([]float64, spN), make([]float64, spP)
		for i := range a {
			a[i] = rng.NormFloat64()
		}
		for i := range t {
			t[i] = rng.NormFloat64()
		}
		if e < from || e >= to {
			continue
		}
		for j := range spP {
			res := p.c[j] - t[j]
			for i := range spN {
				res += a[i] * p.w[i*spP+j]
			}
			res /= float64(to - from)
			p.gc[j] += res
			for i := range spN {
				p.gw[i*spP+j] += a[i] * res
			}
		}
	}
	return p.solver.Step()
}

// solverChild is one rank of TestMPISolver.
func solverChild(c dist.Communicator) int {
	r, n := c.Rank(), c.Size()
	fail := func(err error) int {
		fmt.Printf("FAIL: rank %d: %v\n", r, err)
		c.Abort(err)
		return 1
	}
	p, err := newSolverProblem(c)
	if err != nil {
		return fail(err)
	}
	alone, err := newSolverProblem(nil)
	if err != nil {
		return fail(err)
	}
	start := append([]float64(nil), p.w...)
	half := spBatch / n
	for k := range spSteps {
		if err := p.step(k, r*half, (r+1)*half); err != nil {
			return fail(err)
		}
		if err := alone.step(k, 0, spBatch); err != nil {
			return fail(err)
		}
	}
	got := append(append([]float64(nil), p.w...), p.c...)
	root := append([]float64(nil), got...)
	if err := c.Broadcast64(root, 0); err != nil {
		return fail(err)
	}
	diff, moved := 0.0, 0.0
	for i, v := range append(append([]float64(nil), alone.w...), alone.c...) {
		if math.Float64bits(got[i]) != math.Float64bits(root[i]) {
			return fail(fmt.Errorf("weight %d is %v here, %v on rank 0", i, got[i], root[i]))
		}
		diff = max(diff, math.Abs(got[i]-v))
	}
	for i, v := range start {
		moved = max(moved, math.Abs(p.w[i]-v))
	}
	if !(diff <= spTol) || moved < 1e-2 {
		return fail(fmt.Errorf("%.3g from one process (want <= %.3g), the weight moved by %.3g", diff, spTol, moved))
	}
	if err := c.Close(); err != nil {
		return fail(err)
	}
	fmt.Printf("rank %d of %d: ok, %.3g from one process, same bits as rank 0\n", r, n, diff)
	return 0
}
