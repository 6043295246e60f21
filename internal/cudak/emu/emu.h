// Host definitions of the CUDA constructs kernels.cu uses, so that the C++
// compiler builds the kernels for the emulator. Blocks run one after
// another, so that a kernel's __shared__ arrays can be function statics.
// The threads of a block run one after another too; in a kernel defined
// with KERNEL_SYNC each thread is a fiber (ucontext) that yields at
// __syncthreads until every thread of the block has reached it.
#ifndef ORTHONET_EMU_H
#define ORTHONET_EMU_H
#define ORTHONET_EMU 1

#include <setjmp.h>
#include <ucontext.h>
#include <cmath>
#include <math.h> // the float functions (expf, ...) in the global namespace
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

typedef long long i64;
typedef unsigned long long u64;

namespace emu {
struct dim3 {
  unsigned x, y, z;
};
inline dim3 thread_idx{0, 0, 0}, block_idx{0, 0, 0};
inline dim3 block_dim{1, 1, 1}, grid_dim{1, 1, 1};
// The fibers of a KERNEL_SYNC block: where a yield returns to (the
// scheduler), and where the running thread resumes (nullptr outside such a
// kernel). Fibers start once through makecontext/swapcontext and switch
// after that by _setjmp/_longjmp, which save no signal mask (no system call).
inline jmp_buf scheduler;
inline jmp_buf *fiber = nullptr;

typedef void (*Thunk)(const void *);
struct Kernel {
  Thunk fn;
  bool sync;   // its threads meet at __syncthreads
  size_t size; // of its argument struct
};
inline std::map<std::string, Kernel> &registry() {
  static std::map<std::string, Kernel> r;
  return r;
}
struct Reg {
  Reg(const char *name, Thunk f, bool sync, size_t size) { registry()[name] = Kernel{f, sync, size}; }
};
// sync is __syncthreads; a kernel not declared KERNEL_SYNC runs its
// threads one after another and must not call it.
inline void sync() {
  if (fiber == nullptr) {
    std::fprintf(stderr, "emu: __syncthreads in a kernel not defined with KERNEL_SYNC\n");
    std::abort();
  }
  if (!_setjmp(*fiber)) _longjmp(scheduler, 1);
}
} // namespace emu

#define threadIdx emu::thread_idx
#define blockIdx emu::block_idx
#define blockDim emu::block_dim
#define gridDim emu::grid_dim
#define __syncthreads() emu::sync()
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define SHARED(T, name, n) static T name[n]

#define EMU_KERNEL(name, Args, sync)                                                                   \
  extern "C" void name(Args a);                                                                        \
  static emu::Reg emu_reg_##name(#name, [](const void *p) { name(*static_cast<const Args *>(p)); }, sync, sizeof(Args)); \
  extern "C" void name(Args a)
#define KERNEL(name, Args) EMU_KERNEL(name, Args, false)
#define KERNEL_SYNC(name, Args) EMU_KERNEL(name, Args, true)

inline bool finite_bits(double x) { return std::isfinite(x); }
inline bool finite_bits(float x) { return std::isfinite(x); }
inline u64 abs_bits(double x) {
  u64 b;
  std::memcpy(&b, &x, 8);
  return b & 0x7fffffffffffffffULL;
}
inline u64 abs_bits(float x) {
  unsigned b;
  std::memcpy(&b, &x, 4);
  return b & 0x7fffffffu;
}
inline double bits_value(u64 b, double) {
  double x;
  std::memcpy(&x, &b, 8);
  return x;
}
inline double bits_value(u64 b, float) {
  unsigned u = (unsigned)b;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// The emulator runs one thread at a time: atomics are plain.
inline u64 atomicMax(u64 *p, u64 v) {
  u64 old = *p;
  if (v > old) *p = v;
  return old;
}
inline u64 atomicCAS(u64 *p, u64 cmp, u64 v) {
  u64 old = *p;
  if (old == cmp) *p = v;
  return old;
}
using std::ceil;
using std::cos;
using std::exp;
using std::expm1;
using std::fabs;
using std::floor;
using std::fmax;
using std::log;
using std::log1p;
using std::log2;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;
#endif
