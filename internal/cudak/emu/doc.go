// Package emu runs orthonet's CUDA kernels on the host: the kernel source
// of package cudak compiled by the C++ compiler, each block's threads as
// host threads, and a plain loop in place of cuBLAS. Its Backend plans
// kernels as the CUDA backend does, so that tests check the kernels and
// the planning against the CPU backend on a machine without a GPU. It is
// slow, and meant for nothing else. It needs cgo and a C++20 compiler.
package emu
