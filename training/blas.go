package training

import (
	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/internal/linalg"
)

// Gorgonia's tape machine (the "tape" engine) multiplies through the BLAS
// that orthonet's compiled programs and optimizers use (linalg.Backend: a
// CBLAS loaded at run time where one is installed), not its own pure-Go
// default. The library is chosen at the first product, not here.
func init() { G.Use(linalg.Implementation()) }
