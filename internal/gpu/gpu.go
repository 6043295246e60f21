// Package gpu says whether this binary can run Gorgonia graphs on a CUDA GPU
// and which one. Only a binary built by `make cuda-legacy` (build tag cuda) can; a
// plain build reports that it has no CUDA support.
package gpu

import (
	"errors"

	G "gorgonia.org/gorgonia"
)

// Device describes the GPU a cuda build runs on.
type Device struct {
	Name          string // as the driver names it, e.g. "NVIDIA H100 80GB HBM3"
	Count         int    // number of CUDA devices; Gorgonia uses device 0
	Major, Minor  int    // compute capability
	TotalMemory   int64  // bytes
	DriverVersion int    // e.g. 13000 for CUDA 13.0
}

// ErrNotBuilt is Probe's error in a build without the cuda tag.
var ErrNotBuilt = errors.New("this build has no Gorgonia CUDA support (build it with make cuda-legacy)")

// GradOptions returns the tape-machine options that make each node's
// gradient readable through Node.Grad after a run, as optim.Solver reads it.
// On the CPU that is G.BindDualValues. In the cuda build Gorgonia 0.9.18's
// binding of GPU-computed gradients to dual values leaves them zero, so there
// no option is given and Node.Grad returns the gradient node's own value.
func GradOptions(nodes ...*G.Node) []G.VMOpt {
	if Built {
		return nil
	}
	return []G.VMOpt{G.BindDualValues(nodes...)}
}
