package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// median returns the median of d seconds.
func median(d []float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// timeIt runs f reps times after one warm-up call and returns each call's
// seconds.
func timeIt(reps int, f func() error) ([]float64, error) {
	if err := f(); err != nil {
		return nil, err
	}
	d := make([]float64, reps)
	for i := range d {
		t := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		d[i] = time.Since(t).Seconds()
	}
	return d, nil
}

// rsdmFlops is the floating-point operation count of one RSDM-P step with
// QR retraction: the r x r product Gs Xs^T (2r^2 p), the update Y Xs
// (2r^2 p), and a Householder QR of an r x r matrix with Q formed
// (4/3 r^3 + 4/3 r^3).
func rsdmFlops(p, r int) float64 {
	fr, fp := float64(r), float64(p)
	return 4*fr*fr*fp + 8.0/3*fr*fr*fr
}

// kernels times the sgemm rate and one RSDM-P and one RGD-QR step on a
// float32 weight, all in one run, and prints the ratios that the README
// quotes.
func kernels(w io.Writer, size string) error {
	n, r, reps := 1024, 300, 30
	if size == "small" {
		n, r, reps = 256, 75, 10
	}
	p := n
	rng := rand.New(rand.NewPCG(1, 2))
	a := make([]float32, n*n)
	b := make([]float32, n*n)
	c := make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	gemm, _ := timeIt(reps, func() error {
		linalg.Mul(false, false, n, n, n, a, b, c)
		return nil
	})
	rate := 2 * float64(n) * float64(n) * float64(n) / median(gemm)

	st, err := manifold.NewStiefel[float32](n, p)
	if err != nil {
		return err
	}
	x := make([]float32, n*p)
	if err := st.Random(x, rng); err != nil {
		return err
	}
	g := a // any finite gradient
	rsdm, err := optim.NewRSDM(st, optim.RSDMConfig{LR: 1e-3, SubmanifoldSize: r, Seed: 1, ReorthEvery: -1})
	if err != nil {
		return err
	}
	rs, err := timeIt(reps*3, func() error { return rsdm.Step(x, g) })
	if err != nil {
		return err
	}
	rgd, err := optim.NewRGD(st, optim.RGDConfig{LR: 1e-3})
	if err != nil {
		return err
	}
	rg, err := timeIt(max(reps/3, 3), func() error { return rgd.Step(x, g) })
	if err != nil {
		return err
	}
	flops := rsdmFlops(p, r)
	tRSDM, tRGD := median(rs), median(rg)
	fmt.Fprintf(w, "step kernels, float32 weight %d x %d, median of repeated calls:\n", n, p)
	fmt.Fprintf(w, "  sgemm %d^3:                 %8.2f ms  (%.1f GFLOP/s)\n", n, median(gemm)*1e3, rate/1e9)
	fmt.Fprintf(w, "  RSDM-P step, r = %d:       %8.2f ms  (%.3f GFLOP; %.2fx the time at the sgemm rate)\n", r, tRSDM*1e3, flops/1e9, tRSDM/(flops/rate))
	fmt.Fprintf(w, "  RGD step, QR retraction:    %8.2f ms  (%.1fx the RSDM-P step)\n", tRGD*1e3, tRGD/tRSDM)
	fmt.Fprintf(w, "  feasibility after the steps: %.1e\n\n", st.Feasibility(x))
	return nil
}
