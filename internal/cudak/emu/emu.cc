#undef _FORTIFY_SOURCE // longjmp between the fibers' stacks
// The emulator's launcher and its stand-in for cuBLAS's strided batched GEMM.
#include "emu.h"

#include <mutex>
#include <vector>

#include "../kernels.cu"
#include "emu_c.h"

static std::mutex launch_mu; // kernels' __shared__ statics allow one launch at a time

// The fibers of a KERNEL_SYNC block, reused across launches.
static const size_t stack_bytes = 64 << 10;
static std::vector<ucontext_t> starts;
struct Resume {
  jmp_buf at;
};
static std::vector<Resume> resumes;
static std::vector<std::vector<char>> stacks;
static std::vector<char> started, finished;
static emu::Thunk fiber_fn;
static const void *fiber_args;

// fiber_main runs a thread of the block, then returns to the scheduler by
// the jump a yield takes: it never returns from its own frame.
static void fiber_main(int t) {
  fiber_fn(fiber_args);
  finished[t] = 1;
  _longjmp(emu::scheduler, 1);
}

// run_block runs the threads of one block as fibers, each until it yields
// at __syncthreads or ends, round after round until all have ended.
static void run_block(int threads) {
  if ((int)starts.size() < threads) {
    starts.resize(threads);
    resumes.resize(threads);
    stacks.resize(threads);
    started.resize(threads);
    finished.resize(threads);
  }
  for (int t = 0; t < threads; t++) {
    stacks[t].resize(stack_bytes);
    getcontext(&starts[t]);
    starts[t].uc_stack.ss_sp = stacks[t].data();
    starts[t].uc_stack.ss_size = stack_bytes;
    starts[t].uc_link = nullptr;
    makecontext(&starts[t], (void (*)())fiber_main, 1, t);
    started[t] = finished[t] = 0;
  }
  ucontext_t here;
  for (bool running = true; running;) {
    running = false;
    for (int t = 0; t < threads; t++) {
      if (finished[t]) continue;
      running = true;
      emu::thread_idx = emu::dim3{(unsigned)t, 0, 0};
      emu::fiber = &resumes[t].at;
      if (!_setjmp(emu::scheduler)) {
        if (!started[t]) {
          started[t] = 1;
          swapcontext(&here, &starts[t]);
        } else {
          _longjmp(resumes[t].at, 1);
        }
      }
    }
  }
  emu::fiber = nullptr;
}

extern "C" int emu_launch(const char *name, int grid, int threads, const void *args, long long words) {
  auto it = emu::registry().find(name);
  if (it == emu::registry().end()) return 1;
  if ((size_t)words * 8 != it->second.size) return 2; // the planner's words do not fill the struct
  emu::Thunk fn = it->second.fn;
  std::lock_guard<std::mutex> lock(launch_mu);
  emu::block_dim = emu::dim3{(unsigned)threads, 1, 1};
  emu::grid_dim = emu::dim3{(unsigned)grid, 1, 1};
  for (int b = 0; b < grid; b++) {
    emu::block_idx = emu::dim3{(unsigned)b, 0, 0};
    if (it->second.sync) {
      fiber_fn = fn;
      fiber_args = args;
      run_block(threads);
      continue;
    }
    for (int t = 0; t < threads; t++) {
      emu::thread_idx = emu::dim3{(unsigned)t, 0, 0};
      fn(args);
    }
  }
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

// potrf is cuSOLVER's ?potrf with the lower triangle of the column-major
// n x n matrix a: a = L L^T in place, info the order of the first minor
// that is not positive (0 if none), in the matrix's type.
template <typename T> static void potrf(i64 n, T *a, int *info) {
  *info = 0;
  for (i64 j = 0; j < n; j++) {
    T d = a[j + j * n];
    for (i64 k = 0; k < j; k++) d -= a[j + k * n] * a[j + k * n];
    if (!(d > 0)) {
      *info = (int)(j + 1);
      return;
    }
    d = std::sqrt(d);
    a[j + j * n] = d;
    for (i64 i = j + 1; i < n; i++) {
      T s = a[i + j * n];
      for (i64 k = 0; k < j; k++) s -= a[i + k * n] * a[j + k * n];
      a[i + j * n] = s / d;
    }
  }
}

extern "C" void emu_potrf(int f64, long long n, u64 a, u64 info) {
  if (f64)
    potrf(n, (double *)a, (int *)info);
  else
    potrf(n, (float *)a, (int *)info);
}

// trsm is cuBLAS's ?trsm(left, lower, no transpose, non-unit) on column-major
// data: b (m x n) = L^-1 b for the lower m x m L at a.
template <typename T> static void trsm(i64 m, i64 n, const T *a, T *b) {
  for (i64 j = 0; j < n; j++) {
    T *x = b + j * m;
    for (i64 i = 0; i < m; i++) {
      T s = x[i];
      for (i64 k = 0; k < i; k++) s -= a[i + k * m] * x[k];
      x[i] = s / a[i + i * m];
    }
  }
}

extern "C" void emu_trsm(int f64, long long m, long long n, u64 a, u64 b) {
  if (f64)
    trsm(m, n, (const double *)a, (double *)b);
  else
    trsm(m, n, (const float *)a, (float *)b);
}
