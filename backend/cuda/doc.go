// Package cuda is the backend that runs orthonet's compiled programs on an
// NVIDIA GPU: device memory from cuMemAlloc, one stream, matrix products
// on cuBLAS, Q factors with cuSOLVER, and every other kernel from
// orthonet's own CUDA C++ source (package cudak), compiled by NVRTC for the
// device when the backend starts. Kernels only enqueue work; CopyOut and
// Sync wait for it.
//
// The NVIDIA libraries are loaded when a backend starts, not linked: the
// driver (libcuda.so.1, from the loader's path, /usr/local/nvidia/lib64 or
// the system's library folders) and CUDA 12 or 13's NVRTC, cuBLAS and
// cuSOLVER, from the loader's path, CUDA_HOME or CUDA_PATH,
// /usr/local/cuda, a conda environment, or NVIDIA's Python wheels (a
// library's own dependencies from its own folder first). Building the package needs cgo
// but no CUDA header, library or build tag, so one binary runs on a GPU
// where there is one and on the CPU elsewhere. With ORTHONET_CUDA_STANDIN=1
// the package loads the host model of the device (internal/cudak/standin)
// instead, which is how its tests run without a GPU.
package cuda
