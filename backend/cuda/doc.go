// Package cuda is the backend that runs orthonet's compiled programs on an
// NVIDIA GPU: device memory from cuMemAlloc, one stream, matrix products
// on cuBLAS, and every other kernel from orthonet's own CUDA C++ source
// (package cudak), compiled by NVRTC for the device when the backend
// starts. Kernels only enqueue work; CopyOut and Sync wait for it.
//
// The backend is built with the cuda build tag against a CUDA 12 or 13
// toolkit (see the README's CUDA section); without the tag, New reports
// that this binary has no CUDA support.
package cuda
