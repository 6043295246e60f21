// Host definitions of the CUDA constructs kernels.cu uses, for the host
// model (derived from the old emulator's emu.h, with the model's own names
// so that both link into one binary). A file that includes this header and
// then kernels.cu (inside an anonymous namespace) turns every kernel into a
// static function registered by name with model::Reg; model_launch.cc runs
// them. Everything here is in namespace model or has internal linkage.
#ifndef ORTHONET_STANDIN_HOST_H
#define ORTHONET_STANDIN_HOST_H
#define ORTHONET_EMU 1

#include <math.h> // the float functions (expf, ...) in the global namespace
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

typedef long long i64;
typedef unsigned long long u64;

namespace model {

struct dim3 {
  unsigned x, y, z;
};
// The running thread's coordinates and the launch's shape (one launch runs
// at a time; model_launch.cc sets them before every thread it runs).
extern dim3 thread_idx, block_idx, block_dim, grid_dim;
// block_epoch changes at the start of every block, so that SHARED arrays
// know to poison themselves again.
extern u64 block_epoch;

typedef void (*Thunk)(const void *);
struct Kernel {
  const char *name;
  Thunk fn;
  bool sync;        // defined with KERNEL_SYNC: its threads meet at __syncthreads
  size_t size;      // of its argument struct
  bool test_only;   // a kernel of the model's own tests, not of kernels.cu
};
// register_kernel adds a kernel to the registry that cuModuleGetFunction reads.
void register_kernel(const Kernel &k);
// find_kernel returns the registered kernel of that name, or nullptr.
const Kernel *find_kernel(const char *name);

struct Reg {
  Reg(const char *name, Thunk fn, bool sync, size_t size, bool test_only) {
    register_kernel(Kernel{name, fn, sync, size, test_only});
  }
};

// sync is __syncthreads, called from the source line line: it yields the
// running fiber until every thread of the block is waiting at the same
// barrier, and aborts the process in a kernel not defined KERNEL_SYNC.
void sync(int line);

// Shared is a SHARED array: a heap block of n elements, filled with 0xFF
// bytes again at the start of every block that uses it.
template <typename T> struct Shared {
  size_t n;
  T *p;
  u64 epoch;
  explicit Shared(size_t n) : n(n), p(static_cast<T *>(::operator new(n * sizeof(T)))), epoch(~0ULL) {}
  T *get() {
    if (epoch != block_epoch) {
      std::memset(static_cast<void *>(p), 0xFF, n * sizeof(T));
      epoch = block_epoch;
    }
    return p;
  }
};

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

// The model runs one device thread at a time: atomics are plain.
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
// atomicAdd for the types CUDA has it for; v converts to *p's type, as
// it does to the argument of CUDA's overload.
template <class T>
  requires std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, int> || std::is_same_v<T, u64>
inline T atomicAdd(T *p, std::type_identity_t<T> v) {
  T old = *p;
  *p = old + v;
  return old;
}

} // namespace model

using model::abs_bits;
using model::atomicAdd;
using model::atomicCAS;
using model::atomicMax;
using model::bits_value;
using model::finite_bits;
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

#define threadIdx model::thread_idx
#define blockIdx model::block_idx
#define blockDim model::block_dim
#define gridDim model::grid_dim
#define __syncthreads() model::sync(__LINE__)
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define SHARED(T, name, n)                                                                                           \
  static model::Shared<T> name##_model_shared((n));                                                                  \
  T *const name = name##_model_shared.get()

#define MODEL_KERNEL(name, Args, sync, test_only)                                                                    \
  static void name(Args a);                                                                                          \
  static model::Reg model_reg_##name(                                                                                \
      #name, [](const void *p) { name(*static_cast<const Args *>(p)); }, sync, sizeof(Args), test_only);            \
  static void name(Args a)
#define KERNEL(name, Args) MODEL_KERNEL(name, Args, false, false)
#define KERNEL_SYNC(name, Args) MODEL_KERNEL(name, Args, true, false)

#endif
