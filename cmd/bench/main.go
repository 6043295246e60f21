// Command bench runs the paper's test problems (Procrustes, PCA, quadratic
// assignment; section 6) with RGD, RSDM-P and RSDM-O (and, on request, the
// paper's baselines, momentum variants and Riemannian Adam) on this
// machine, and measures the cost of one optimizer step against the
// machine's gemm rate.
//
// For each problem and method it prints the iterations and seconds taken to
// reach optimality gaps 1e-2, 1e-4 and 1e-6, the time per iteration and the
// final ||X^T X - I||_F, and writes every iteration to a CSV file and a
// semilog plot of gap against time to a PNG file in -out.
//
// Usage:
//
//	bench [-size small|paper] [-problems procrustes,pca,qap] [-methods rgd,rsdm-p,rsdm-o,radam,...] [-out DIR] [-time-limit 240s]
//	bench -kernels-only
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/orthonet/orthonet/internal/linalg"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	size      string
	problems  []string
	methods   map[string]bool
	out       string
	timeLimit time.Duration
	maxIter   int
	seed      uint64
	kernels   bool
	onlyKern  bool
	float32   bool
	paper     bool
	scale     float64
	only      string
	tunedLR   map[string]float64 // -paper: step sizes tuned per method and problem
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var problems, methods string
	fs.StringVar(&o.size, "size", "paper", "problem sizes: small (seconds, run by make test) or paper (the paper's settings)")
	fs.StringVar(&problems, "problems", "procrustes,pca,qap", "comma-separated problems to run: procrustes, pca, qap")
	fs.StringVar(&methods, "methods", "rgd,rsdm-p,rsdm-o", "comma-separated methods to run: "+strings.Join(methodNames(), ", "))
	fs.StringVar(&o.out, "out", "out/bench", "folder for the CSV and PNG files")
	fs.DurationVar(&o.timeLimit, "time-limit", 0, "wall-time budget of one method on one problem (0: 120s small, a safety net behind -max-iter; 240s paper)")
	fs.IntVar(&o.maxIter, "max-iter", 0, "iteration cap of one method on one problem (0: 4000 small, 5000 paper)")
	fs.Uint64Var(&o.seed, "seed", 42, "seed of the problem data, the starting point and the samplers")
	fs.BoolVar(&o.kernels, "kernels", true, "also time one RSDM-P and one RGD step on a 1024 x 1024 float32 weight against the gemm rate")
	fs.BoolVar(&o.onlyKern, "kernels-only", false, "time the steps only, run no problem")
	fs.BoolVar(&o.float32, "float32", false, "solve the problems in float32 instead of float64")
	fs.BoolVar(&o.paper, "paper", false, "run the paper's experiments and write report.md with plots and time-to-gap tables into -out")
	fs.Float64Var(&o.scale, "scale", 1, "with -paper: multiply the paper's n, p and r by this")
	fs.StringVar(&o.only, "only", "", "with -paper: run only the experiments whose id contains this (fig1a, fig3, psweep, ...)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.size != "small" && o.size != "paper" {
		return o, fmt.Errorf("-size %q: want small or paper", o.size)
	}
	for _, p := range strings.Split(problems, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case "procrustes", "pca", "qap":
			o.problems = append(o.problems, p)
		case "":
		default:
			return o, fmt.Errorf("-problems: unknown problem %q (want procrustes, pca or qap)", p)
		}
	}
	o.methods = map[string]bool{}
	for _, m := range strings.Split(methods, ",") {
		m = strings.TrimSpace(m)
		switch {
		case knownMethod(m):
			o.methods[m] = true
		case m == "":
		default:
			return o, fmt.Errorf("-methods: unknown method %q (want one of %s)", m, strings.Join(methodNames(), ", "))
		}
	}
	if o.timeLimit < 0 || o.maxIter < 0 {
		return o, errors.New("-time-limit and -max-iter must not be negative")
	}
	if !(o.scale > 0 && o.scale <= 1) {
		return o, fmt.Errorf("-scale %v: want 0 < scale <= 1", o.scale)
	}
	switch {
	case o.timeLimit == 0 && o.paper:
		o.timeLimit = 30 * time.Second
	case o.timeLimit == 0:
		o.timeLimit = map[string]time.Duration{"small": 120 * time.Second, "paper": 240 * time.Second}[o.size]
	}
	switch {
	case o.maxIter == 0 && o.paper:
		o.maxIter = 1_000_000
	case o.maxIter == 0:
		o.maxIter = map[string]int{"small": 4000, "paper": 5000}[o.size]
	}
	return o, nil
}

func run(args []string, w io.Writer) error {
	o, err := parse(args, os.Stderr)
	if err != nil {
		return err
	}
	if o.paper {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", o.out, err)
		}
		fmt.Fprintf(w, "orthonet bench -paper: BLAS %s, scale %g, %v a method\n\n", linalg.Backend(), o.scale, o.timeLimit)
		return paper(w, o)
	}
	fmt.Fprintf(w, "orthonet bench: BLAS %s, size %s\n\n", linalg.Backend(), o.size)
	if o.kernels || o.onlyKern {
		if err := kernels(w, o.size); err != nil {
			return err
		}
	}
	if o.onlyKern {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.out, err)
	}
	if o.float32 {
		return problems[float32](w, o)
	}
	return problems[float64](w, o)
}
