// Kernels of the model's own tests (not of kernels.cu), compiled with the
// same host definitions: cuModuleGetFunction finds them only after
// standin_enable_test_kernels(1).
#include "model_internal.h"

namespace {

// on_test_order records the order in which the launch's threads ran: the
// i-th thread to run writes its global index to out[i].
struct OrderArgs {
  u64 *next;
  i64 *out;
};
MODEL_KERNEL(on_test_order, OrderArgs, false, true) {
  a.out[(*a.next)++] = (i64)blockIdx.x * blockDim.x + threadIdx.x;
}

// on_test_diverge calls __syncthreads in its first k threads only: a
// divergent barrier.
struct DivergeArgs {
  i64 k;
};
MODEL_KERNEL(on_test_diverge, DivergeArgs, true, true) {
  if ((i64)threadIdx.x < a.k) __syncthreads();
}

// on_test_plain_sync calls __syncthreads in a kernel not defined KERNEL_SYNC.
MODEL_KERNEL(on_test_plain_sync, DivergeArgs, false, true) {
  if ((i64)threadIdx.x < a.k) __syncthreads();
}

// on_test_shared writes, for each block, whether its SHARED array started
// poisoned (all 0xFF bytes) to out[block], then dirties it.
struct SharedArgs {
  i64 *out;
};
MODEL_KERNEL(on_test_shared, SharedArgs, true, true) {
  SHARED(u64, sh, 4);
  if (threadIdx.x == 0) {
    bool poisoned = true;
    for (int i = 0; i < 4; i++) poisoned = poisoned && sh[i] == ~0ULL;
    a.out[blockIdx.x] = poisoned;
  }
  __syncthreads();
  if (threadIdx.x < 4) sh[threadIdx.x] = 7;
  __syncthreads();
}

} // namespace

extern "C" void standin_enable_test_kernels(int on) { model::test_kernels_enabled = on != 0; }

// standin_test_fail enqueues on s an item that fails with r, as a faulting
// kernel would.
extern "C" CUresult standin_test_fail(CUstream s, CUresult r) {
  return model::enqueue(s, [r] { return r; });
}
