// The emulator's launcher and its stand-in for cuBLAS's strided batched GEMM.
#include "emu.h"

#include <mutex>
#include <thread>
#include <vector>

#include "../kernels.cu"
#include "emu_c.h"

static std::mutex launch_mu; // kernels' __shared__ statics allow one launch at a time

extern "C" int emu_launch(const char *name, int grid, int threads, const void *args) {
  auto it = emu::registry().find(name);
  if (it == emu::registry().end()) return 1;
  emu::Thunk fn = it->second.fn;
  std::lock_guard<std::mutex> lock(launch_mu);
  emu::block_dim = emu::dim3{(unsigned)threads, 1, 1};
  emu::grid_dim = emu::dim3{(unsigned)grid, 1, 1};
  if (!it->second.sync) {
    emu::bar = nullptr;
    for (int b = 0; b < grid; b++) {
      emu::block_idx = emu::dim3{(unsigned)b, 0, 0};
      for (int t = 0; t < threads; t++) {
        emu::thread_idx = emu::dim3{(unsigned)t, 0, 0};
        fn(args);
      }
    }
    return 0;
  }
  std::barrier<> bar(threads);
  std::vector<std::thread> ts;
  ts.reserve(threads);
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      emu::bar = &bar;
      emu::thread_idx = emu::dim3{(unsigned)t, 0, 0};
      for (int b = 0; b < grid; b++) {
        emu::block_idx = emu::dim3{(unsigned)b, 0, 0};
        fn(args);
        bar.arrive_and_wait();
      }
    });
  }
  for (auto &t : ts) t.join();
  return 0;
}

// gemm is cuBLAS's column-major C = alpha op(A) op(B) + beta C over a strided
// batch; with beta = 0, C is not read.
template <typename T>
static void gemm(int ta, int tb, i64 m, i64 n, i64 k, double alpha, const T *a, i64 lda, i64 sa, const T *b, i64 ldb,
                 i64 sb, double beta, T *c, i64 ldc, i64 sc, i64 batch) {
  for (i64 p = 0; p < batch; p++) {
    const T *A = a + p * sa, *B = b + p * sb;
    T *C = c + p * sc;
    for (i64 j = 0; j < n; j++)
      for (i64 i = 0; i < m; i++) {
        T s = 0;
        for (i64 l = 0; l < k; l++) {
          T x = ta ? A[l + i * lda] : A[i + l * lda];
          T y = tb ? B[j + l * ldb] : B[l + j * ldb];
          s += x * y;
        }
        T v = (T)alpha * s;
        if (beta != 0) v += (T)beta * C[i + j * ldc];
        C[i + j * ldc] = v;
      }
  }
}

extern "C" void emu_gemm(int f64, int ta, int tb, i64 m, i64 n, i64 k, double alpha, u64 a, i64 lda, i64 sa, u64 b,
                         i64 ldb, i64 sb, double beta, u64 c, i64 ldc, i64 sc, i64 batch) {
  if (f64)
    gemm(ta, tb, m, n, k, alpha, (const double *)a, lda, sa, (const double *)b, ldb, sb, beta, (double *)c, ldc, sc,
         batch);
  else
    gemm(ta, tb, m, n, k, alpha, (const float *)a, lda, sa, (const float *)b, ldb, sb, beta, (float *)c, ldc, sc,
         batch);
}
