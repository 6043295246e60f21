//go:build openblas && cgo

package main

import (
	"gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"
)

// Gorgonia keeps its own BLAS choice; point it at OpenBLAS too.
func init() { G.Use(netlib.Implementation{}) }
