package program

import (
	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/internal/linalg"
)

// The tape machine, the reference of the benchmarks, multiplies through the
// BLAS the compiled programs use (linalg.Backend), as package training's does.
func init() { G.Use(linalg.Implementation()) }
