// Command bench runs the paper's test problems (Procrustes, PCA, quadratic
// assignment; section 6) with RGD, RSDM-P and RSDM-O (and, on request, the
// paper's baselines, momentum variants and Riemannian Adam) on this
// machine, and measures the cost of one optimizer step against the
// machine's gemm rate.
//
// For each problem and method it prints the iterations and seconds taken to
// reach optimality gaps 1e-2, 1e-4 and 1e-6, the time per iteration and the
// final ||X^T X - I||_F, and writes every iteration to a CSV file and a
// semilog plot of gap against time to a PNG file in the run's own new
// folder under -out, run-YYYYMMDD-HHMMSS: the files are written into a
// temporary folder beside it and renamed into place when complete, so that
// no earlier run's file, and no file of the user's, is ever replaced or
// removed. A bad setting (a flag, an -out that is not a folder bench can
// write in) exits 2, a failed run 1.
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
	err := run(os.Args[1:], os.Stdout)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

type options struct {
	size      string
	problems  []string
	methods   map[string]bool
	out       string
	dir       string // the run's folder while it runs (runDir's temporary one)
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
	fs.StringVar(&o.out, "out", "out/bench", "folder under which each run writes its own new folder run-YYYYMMDD-HHMMSS (CSV, PNG, report.md); nothing else in it is touched")
	fs.DurationVar(&o.timeLimit, "time-limit", 0, "wall-time budget of one method on one problem (0: 120s small, a safety net behind -max-iter; 240s paper)")
	fs.IntVar(&o.maxIter, "max-iter", 0, "iteration cap of one method on one problem (0: 4000 small, 5000 paper)")
	fs.Uint64Var(&o.seed, "seed", 42, "seed of the problem data, the starting point and the samplers")
	fs.BoolVar(&o.kernels, "kernels", true, "also time one RSDM-P and one RGD step on a 1024 x 1024 float32 weight against the gemm rate")
	fs.BoolVar(&o.onlyKern, "kernels-only", false, "time the steps only, run no problem")
	fs.BoolVar(&o.float32, "float32", false, "solve the problems in float32 instead of float64")
	fs.BoolVar(&o.paper, "paper", false, "run the paper's experiments and write report.md with plots and time-to-gap tables into the run's folder under -out")
	fs.Float64Var(&o.scale, "scale", 1, "with -paper: multiply the paper's n, p and r by this")
	fs.StringVar(&o.only, "only", "", "with -paper: run only the experiments whose id contains this (fig1a, fig3, psweep, ...)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return o, err
	} else if err != nil {
		return o, &usageError{err}
	}
	if err := check(&o, problems, methods, fs); err != nil {
		return o, &usageError{err}
	}
	return o, nil
}

// check checks and completes the parsed flags.
func check(o *options, problems, methods string, fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.size != "small" && o.size != "paper" {
		return fmt.Errorf("-size %q: want small or paper", o.size)
	}
	for _, p := range strings.Split(problems, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case "procrustes", "pca", "qap":
			o.problems = append(o.problems, p)
		case "":
		default:
			return fmt.Errorf("-problems: unknown problem %q (want procrustes, pca or qap)", p)
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
			return fmt.Errorf("-methods: unknown method %q (want one of %s)", m, strings.Join(methodNames(), ", "))
		}
	}
	if o.timeLimit < 0 || o.maxIter < 0 {
		return errors.New("-time-limit and -max-iter must not be negative")
	}
	if !(o.scale > 0 && o.scale <= 1) {
		return fmt.Errorf("-scale %v: want 0 < scale <= 1", o.scale)
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
	return nil
}

func run(args []string, w io.Writer) (err error) {
	o, err := parse(args, os.Stderr)
	if err != nil {
		return err
	}
	if o.onlyKern {
		fmt.Fprintf(w, "orthonet bench: BLAS %s, size %s\n\n", linalg.Backend(), o.size)
		return kernels(w, o.size)
	}
	d, err := newRunDir(o.out, time.Now())
	if err != nil {
		return err
	}
	o.dir = d.tmp
	defer func() {
		// A run whose files were all written is kept, its checks failed or
		// not; any other failure leaves nothing behind.
		var failedChecks *checksError
		if err != nil && !errors.As(err, &failedChecks) {
			d.discard()
			return
		}
		dir, ferr := d.finish()
		if ferr != nil {
			err = errors.Join(err, ferr)
			return
		}
		fmt.Fprintf(w, "results: %s\n", dir)
	}()
	if o.paper {
		fmt.Fprintf(w, "orthonet bench -paper: BLAS %s, scale %g, %v a method\n\n", linalg.Backend(), o.scale, o.timeLimit)
		return paper(w, o)
	}
	fmt.Fprintf(w, "orthonet bench: BLAS %s, size %s\n\n", linalg.Backend(), o.size)
	if o.kernels {
		if err := kernels(w, o.size); err != nil {
			return err
		}
	}
	if o.float32 {
		return problems[float32](w, o)
	}
	return problems[float64](w, o)
}
