//go:build openblas

package program

import (
	"gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"
)

// The tape machine, the reference of the benchmarks, multiplies through
// OpenBLAS too in this build, as cmd/train's does.
func init() { G.Use(netlib.Implementation{}) }
