// Package standin is a strict host model of an NVIDIA GPU and the libraries
// orthonet's CUDA backend loads: C functions with the names and signatures
// of the CUDA driver, NVRTC, cuBLAS and cuSOLVER (internal/cudak/cuapi.h),
// implemented on the host, so that backend/cuda runs, and is tested,
// without a GPU. It is harsher than a GPU where it can be: memory is
// poisoned when allocated and when freed, streams run their work only when
// the host waits for it, kernels' blocks and threads run in forward,
// reverse and random orders, and a divergent __syncthreads aborts.
//
// Configure sets what the model pretends to be (driver and library
// versions, devices); Open and Sym stand in for dlopen and dlsym. The model
// needs cgo and a C++20 compiler; without cgo the package builds but has no
// model (Available is false).
package standin
