// The host model's cuBLAS and cuSOLVER: the handles, strided batched GEMM,
// triangular solves and the Cholesky factorization orthonet calls, checked
// as the libraries' documentation states (stricter than the real libraries
// where the model can be: pointers must lie in device memory for the whole
// extent a call reads or writes, outputs must not overlap inputs), with the
// arithmetic run on the handle's stream (model::enqueue) in the element
// type, column-major, in the order of the older emulator's loops.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "model.h"

// No contraction of a*b+c into fused multiply-adds: results must round as
// the reference loops do.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace model_blas {

typedef long long i64;
typedef __int128 i128;

// ---- handles ----------------------------------------------------------------

// A handle is an object on the heap, live from Create to Destroy; the
// registries tell live handles from null, destroyed and foreign ones (a
// cuBLAS handle passed to cuSOLVER is not a cuSOLVER handle).
struct Handle {
  CUstream stream = nullptr; // null: the default stream
};

static std::mutex mu;
static std::unordered_map<const void *, Handle *> &blas_handles() {
  static auto *m = new std::unordered_map<const void *, Handle *>;
  return *m;
}
static std::unordered_map<const void *, Handle *> &solver_handles() {
  static auto *m = new std::unordered_map<const void *, Handle *>;
  return *m;
}

static Handle *create(std::unordered_map<const void *, Handle *> &reg) {
  auto *h = new Handle;
  std::lock_guard<std::mutex> l(mu);
  reg[h] = h;
  return h;
}

static bool destroy(std::unordered_map<const void *, Handle *> &reg, const void *p) {
  Handle *h;
  {
    std::lock_guard<std::mutex> l(mu);
    auto it = reg.find(p);
    if (it == reg.end()) return false;
    h = it->second;
    reg.erase(it);
  }
  delete h;
  return true;
}

static bool set_stream(std::unordered_map<const void *, Handle *> &reg, const void *p, CUstream s) {
  std::lock_guard<std::mutex> l(mu);
  auto it = reg.find(p);
  if (it == reg.end()) return false;
  it->second->stream = s;
  return true;
}

// stream_of reports whether p is a live handle of reg, and its stream.
static bool stream_of(std::unordered_map<const void *, Handle *> &reg, const void *p, CUstream *s) {
  std::lock_guard<std::mutex> l(mu);
  auto it = reg.find(p);
  if (it == reg.end()) return false;
  *s = it->second->stream;
  return true;
}

// ---- memory checks ------------------------------------------------------------

static const i128 max_bytes = (i128)1 << 62; // no device allocation is larger

// Mat is a column-major matrix in device memory, in bytes: cols columns of
// rowbytes each, ld apart, the first at base; a strided batch of count
// matrices, stride bytes apart.
struct Mat {
  i128 base = 0;
  i128 rowbytes = 0, ld = 0;
  i64 cols = 0;
  i128 stride = 0;
  i64 count = 0;

  bool empty() const { return rowbytes == 0 || cols == 0 || count == 0; }
  // extent is the bytes from one matrix's first element to past its last.
  i128 extent() const { return empty() ? 0 : (i128)(cols - 1) * ld + rowbytes; }
  i128 at(i64 p) const { return base + (i128)p * stride; }
};

// mat describes the batch of rows x cols matrices of elements of size sz
// at p, ld and stride elements apart.
static Mat mat(const void *p, i64 rows, i64 cols, i64 ld, i64 stride, i64 count, size_t sz) {
  Mat m;
  m.base = (i128)(uintptr_t)p;
  m.rowbytes = (i128)rows * (i128)sz;
  m.ld = (i128)ld * (i128)sz;
  m.cols = cols;
  m.stride = (i128)stride * (i128)sz;
  m.count = count;
  return m;
}

// in_device reports whether every matrix of the batch lies, whole, inside
// one live device allocation, aligned to its elements (an empty batch or
// empty matrices read and write nothing).
static bool in_device(const Mat &m, size_t sz) {
  if (m.empty()) return true;
  i128 ext = m.extent();
  if (ext > max_bytes) return false;
  if (m.base % (i128)sz != 0) return false;
  i64 n = m.stride == 0 ? 1 : m.count;
  for (i64 p = 0; p < n; p++) {
    i128 at = m.at(p);
    if (at <= 0 || at + ext > ((i128)1 << 64)) return false;
    if (!model::device_range((CUdeviceptr)(uint64_t)at, (size_t)ext)) return false;
  }
  return true;
}

// host_scalar reports whether p points to a T in host memory (cuBLAS's
// default pointer mode): not null, and not in device memory.
template <typename T> static bool host_scalar(const T *p) {
  return p != nullptr && !model::device_range((CUdeviceptr)(uintptr_t)p, sizeof(T));
}

// overlap reports whether the matrices at xb and yb (one of each, shaped as
// x and y) share a byte: their columns are sorted and disjoint, so a merge
// of the two lists of columns finds any that intersect.
static bool overlap(const Mat &x, i128 xb, const Mat &y, i128 yb) {
  if (x.empty() || y.empty()) return false;
  if (xb + x.extent() <= yb || yb + y.extent() <= xb) return false;
  i64 i = 0, j = 0;
  while (i < x.cols && j < y.cols) {
    i128 xs = xb + (i128)i * x.ld, xe = xs + x.rowbytes;
    i128 ys = yb + (i128)j * y.ld, ye = ys + y.rowbytes;
    if (xe <= ys)
      i++;
    else if (ye <= xs)
      j++;
    else
      return true;
  }
  return false;
}

static i128 floor_div(i128 a, i128 b) { // b > 0
  i128 q = a / b;
  if (a % b != 0 && a < 0) q--;
  return q;
}

// overlaps_out reports whether any matrix of the batch x shares a byte with
// any matrix of the output batch c, whose matrices are disjoint (its stride
// at least its extent): for each matrix of x, only the matrices of c whose
// extent meets it are compared column by column.
static bool overlaps_out(const Mat &x, const Mat &c) {
  if (x.empty() || c.empty()) return false;
  i128 c0 = c.base, s = c.stride;
  i64 nc = c.count;
  if (nc == 1 || s == 0) {
    s = 1;
    nc = 1;
  } else if (s < 0) {
    c0 = c.at(nc - 1);
    s = -s;
  }
  i128 cext = c.extent(), xext = x.extent();
  i64 nx = x.stride == 0 ? 1 : x.count;
  for (i64 p = 0; p < nx; p++) {
    i128 xs = x.at(p), xe = xs + xext;
    // c's matrix q meets [xs, xe) when c0 + q s < xe and c0 + q s + cext > xs.
    i128 lo = floor_div(xs - cext - c0, s) + 1, hi = floor_div(xe - c0 - 1, s);
    if (lo < 0) lo = 0;
    if (hi > nc - 1) hi = nc - 1;
    for (i128 q = lo; q <= hi; q++)
      if (overlap(x, xs, c, c0 + q * s)) return true;
  }
  return false;
}

// ---- arithmetic -----------------------------------------------------------------

// gemm_run is C = alpha op(A) op(B) + beta C over a strided batch,
// column-major, accumulating in T in increasing l (as the older emulator
// did); with beta = 0, C is not read.
template <typename T>
static void gemm_run(int ta, int tb, i64 m, i64 n, i64 k, T alpha, const T *a, i64 lda, i64 sa, const T *b, i64 ldb,
                     i64 sb, T beta, T *c, i64 ldc, i64 sc, i64 batch) {
  // op(A)(i, l) = a[i*ai + l*al]; op(B)(l, j) = b[l*bl + j*bj].
  const i64 ai = ta == CUBLAS_OP_N ? 1 : lda, al = ta == CUBLAS_OP_N ? lda : 1;
  const i64 bl = tb == CUBLAS_OP_N ? 1 : ldb, bj = tb == CUBLAS_OP_N ? ldb : 1;
  for (i64 p = 0; p < batch; p++) {
    const T *A = a + p * sa, *B = b + p * sb;
    T *C = c + p * sc;
    for (i64 j = 0; j < n; j++)
      for (i64 i = 0; i < m; i++) {
        const T *x = A + i * ai, *y = B + j * bj;
        T s = 0;
        for (i64 l = 0; l < k; l++) s += x[l * al] * y[l * bl];
        T v = k == 0 ? T(0) : alpha * s; // k == 0: C = beta C, whatever alpha is
        if (beta != 0) v += beta * C[i + j * ldc];
        C[i + j * ldc] = v;
      }
  }
}

// trsm_run solves op(A) X = alpha B (side left) or X op(A) = alpha B (side
// right) in place of B, column-major, substituting row by row with the
// sums in T in increasing order of the index (as the older emulator did).
template <typename T>
static void trsm_run(int side, int uplo, int trans, int diag, i64 m, i64 n, T alpha, const T *a, i64 lda, T *b,
                     i64 ldb) {
  if (alpha == 0) { // A is not read and B need not be set (BLAS)
    for (i64 j = 0; j < n; j++)
      for (i64 i = 0; i < m; i++) b[i + j * ldb] = 0;
    return;
  }
  const bool unit = diag == CUBLAS_DIAG_UNIT;
  // op(A)(i, j), which reads only A's uplo triangle when i, j lie in op(A)'s.
  auto op = [&](i64 i, i64 j) { return trans == CUBLAS_OP_N ? a[i + j * lda] : a[j + i * lda]; };
  const bool op_lower = (uplo == CUBLAS_FILL_MODE_LOWER) == (trans == CUBLAS_OP_N);
  // solve: M x = alpha x for the order-N triangular M (lower or not) given by
  // M(i, k), x's elements inc apart.
  auto solve = [&](auto M, bool lower, i64 N, T *x, i64 inc) {
    if (lower) {
      for (i64 i = 0; i < N; i++) {
        T s = alpha == 1 ? x[i * inc] : alpha * x[i * inc];
        for (i64 k = 0; k < i; k++) s -= M(i, k) * x[k * inc];
        x[i * inc] = unit ? s : s / M(i, i);
      }
    } else {
      for (i64 i = N - 1; i >= 0; i--) {
        T s = alpha == 1 ? x[i * inc] : alpha * x[i * inc];
        for (i64 k = i + 1; k < N; k++) s -= M(i, k) * x[k * inc];
        x[i * inc] = unit ? s : s / M(i, i);
      }
    }
  };
  if (side == CUBLAS_SIDE_LEFT) {
    for (i64 j = 0; j < n; j++) solve(op, op_lower, m, b + j * ldb, 1);
  } else { // X op(A) = alpha B: op(A)^T X^T = alpha B^T, row by row of B
    auto opt = [&](i64 i, i64 k) { return op(k, i); };
    for (i64 i = 0; i < m; i++) solve(opt, !op_lower, n, b + i, ldb);
  }
}

// potrf_run factors the uplo triangle of the order-n matrix at a: A = L L^T
// (lower) or U^T U (upper, U = L^T), writing info as cuSOLVER does: 0, or
// the order of the first leading minor that is not positive (where it stops).
template <typename T> static void potrf_run(int uplo, i64 n, T *a, i64 lda, int *info) {
  const bool lower = uplo == CUBLAS_FILL_MODE_LOWER;
  auto L = [&](i64 i, i64 j) -> T & { return lower ? a[i + j * lda] : a[j + i * lda]; };
  *info = 0;
  for (i64 j = 0; j < n; j++) {
    T d = L(j, j);
    for (i64 k = 0; k < j; k++) d -= L(j, k) * L(j, k);
    if (!(d > 0)) {
      *info = (int)(j + 1);
      return;
    }
    d = std::sqrt(d);
    L(j, j) = d;
    for (i64 i = j + 1; i < n; i++) {
      T s = L(i, j);
      for (i64 k = 0; k < j; k++) s -= L(i, k) * L(j, k);
      L(i, j) = s / d;
    }
  }
}

// ---- cuBLAS -------------------------------------------------------------------------

static bool op_ok(int t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }

template <typename T>
static cublasStatus_t gemm(cublasHandle_t h, int ta, int tb, int m, int n, int k, const T *alpha, const T *a, int lda,
                           long long sa, const T *b, int ldb, long long sb, const T *beta, T *c, int ldc, long long sc,
                           int batch) {
  CUstream stream;
  if (!stream_of(blas_handles(), h, &stream) || !model::context_current()) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!op_ok(ta) || !op_ok(tb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  // A and B as stored: op(A) is m x k, op(B) k x n.
  const i64 ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
  const i64 rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
  if (lda < std::max<i64>(1, ra) || ldb < std::max<i64>(1, rb) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!host_scalar(alpha) || !host_scalar(beta)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  const T al = *alpha, be = *beta;
  const size_t sz = sizeof(T);
  Mat A = mat(a, ra, ca, lda, sa, batch, sz), B = mat(b, rb, cb, ldb, sb, batch, sz);
  Mat C = mat(c, m, n, ldc, sc, batch, sz);
  // C's matrices must not overlap one another: each would race the others.
  if (batch > 1 && (i128)(sc < 0 ? -(i128)sc : (i128)sc) * (i128)sz < C.extent()) return CUBLAS_STATUS_INVALID_VALUE;
  if (!in_device(A, sz) || !in_device(B, sz) || !in_device(C, sz)) return CUBLAS_STATUS_INVALID_VALUE;
  if (overlaps_out(A, C) || overlaps_out(B, C)) return CUBLAS_STATUS_INVALID_VALUE;
  CUresult r = model::enqueue(stream, [=]() -> CUresult {
    gemm_run<T>(ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch);
    return CUDA_SUCCESS;
  });
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

template <typename T>
static cublasStatus_t trsm(cublasHandle_t h, int side, int uplo, int trans, int diag, int m, int n, const T *alpha,
                           const T *a, int lda, T *b, int ldb) {
  CUstream stream;
  if (!stream_of(blas_handles(), h, &stream) || !model::context_current()) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (side != CUBLAS_SIDE_LEFT && side != CUBLAS_SIDE_RIGHT) return CUBLAS_STATUS_INVALID_VALUE;
  if (uplo != CUBLAS_FILL_MODE_LOWER && uplo != CUBLAS_FILL_MODE_UPPER) return CUBLAS_STATUS_INVALID_VALUE;
  if (!op_ok(trans)) return CUBLAS_STATUS_INVALID_VALUE;
  if (diag != CUBLAS_DIAG_NON_UNIT && diag != CUBLAS_DIAG_UNIT) return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const i64 ka = side == CUBLAS_SIDE_LEFT ? m : n; // A is ka x ka
  if (lda < std::max<i64>(1, ka) || ldb < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!host_scalar(alpha)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const T al = *alpha;
  const size_t sz = sizeof(T);
  Mat A = mat(a, ka, ka, lda, 0, 1, sz), B = mat(b, m, n, ldb, 0, 1, sz);
  if (!in_device(A, sz) || !in_device(B, sz)) return CUBLAS_STATUS_INVALID_VALUE;
  if (overlaps_out(A, B)) return CUBLAS_STATUS_INVALID_VALUE;
  CUresult r = model::enqueue(stream, [=]() -> CUresult {
    trsm_run<T>(side, uplo, trans, diag, m, n, al, a, lda, b, ldb);
    return CUDA_SUCCESS;
  });
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

// ---- cuSOLVER ---------------------------------------------------------------------------

// potrf_lwork is the workspace, in elements, potrf asks for an order-n
// matrix: a panel of up to 128 columns, and at least one element.
static int potrf_lwork(int n) {
  i64 w = (i64)n * std::min<i64>(n, 128);
  return (int)std::min<i64>(std::max<i64>(w, 1), INT_MAX);
}

static bool uplo_ok(int u) { return u == CUBLAS_FILL_MODE_LOWER || u == CUBLAS_FILL_MODE_UPPER; }

template <typename T>
static cusolverStatus_t potrf_size(cusolverDnHandle_t h, int uplo, int n, const T *a, int lda, int *lwork) {
  CUstream stream;
  if (!stream_of(solver_handles(), h, &stream) || !model::context_current()) return CUSOLVER_STATUS_NOT_INITIALIZED;
  if (!uplo_ok(uplo) || n < 0 || lda < std::max(1, n) || lwork == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
  if (!in_device(mat(a, n, n, lda, 0, 1, sizeof(T)), sizeof(T))) return CUSOLVER_STATUS_INVALID_VALUE;
  *lwork = potrf_lwork(n);
  return CUSOLVER_STATUS_SUCCESS;
}

template <typename T>
static cusolverStatus_t potrf(cusolverDnHandle_t h, int uplo, int n, T *a, int lda, T *work, int lwork, int *info) {
  CUstream stream;
  if (!stream_of(solver_handles(), h, &stream) || !model::context_current()) return CUSOLVER_STATUS_NOT_INITIALIZED;
  if (!uplo_ok(uplo) || n < 0 || lda < std::max(1, n)) return CUSOLVER_STATUS_INVALID_VALUE;
  if (lwork < potrf_lwork(n)) return CUSOLVER_STATUS_INVALID_VALUE;
  const size_t sz = sizeof(T);
  Mat A = mat(a, n, n, lda, 0, 1, sz), W = mat(work, lwork, 1, lwork, 0, 1, sz);
  Mat I = mat(info, 1, 1, 1, 0, 1, sizeof(int));
  if (!in_device(A, sz) || !in_device(W, sz) || !in_device(I, sizeof(int))) return CUSOLVER_STATUS_INVALID_VALUE;
  if (overlaps_out(A, W) || overlaps_out(A, I) || overlaps_out(W, I)) return CUSOLVER_STATUS_INVALID_VALUE;
  CUresult r = model::enqueue(stream, [=]() -> CUresult {
    std::memset((void *)work, 0xFF, (size_t)lwork * sz); // nothing may rely on the workspace's contents
    potrf_run<T>(uplo, n, a, lda, info);
    return CUDA_SUCCESS;
  });
  return r == CUDA_SUCCESS ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_EXECUTION_FAILED;
}

// property answers ?GetProperty: the major version, minor and patch 0.
static int property(int type, int *value, int major) {
  if (value == nullptr) return 1;
  switch (type) {
  case MAJOR_VERSION: *value = major; return 0;
  case MINOR_VERSION:
  case PATCH_LEVEL: *value = 0; return 0;
  }
  return 1;
}

} // namespace model_blas

using namespace model_blas;

extern "C" {

cublasStatus_t cublasGetProperty(int type, int *value) {
  return property(type, value, model::config().cublas_major) ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (!model::context_current()) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = reinterpret_cast<cublasHandle_t>(create(blas_handles()));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  return destroy(blas_handles(), handle) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, CUstream stream) {
  return set_stream(blas_handles(), handle, stream) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, int mode) {
  CUstream s;
  if (!stream_of(blas_handles(), handle, &s)) return CUBLAS_STATUS_NOT_INITIALIZED;
  return mode == CUBLAS_DEFAULT_MATH ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                                         const float *alpha, const float *a, int lda, long long stridea,
                                         const float *b, int ldb, long long strideb, const float *beta, float *c,
                                         int ldc, long long stridec, int batch) {
  return gemm<float>(handle, transa, transb, m, n, k, alpha, a, lda, stridea, b, ldb, strideb, beta, c, ldc, stridec,
                     batch);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                                         const double *alpha, const double *a, int lda, long long stridea,
                                         const double *b, int ldb, long long strideb, const double *beta, double *c,
                                         int ldc, long long stridec, int batch) {
  return gemm<double>(handle, transa, transb, m, n, k, alpha, a, lda, stridea, b, ldb, strideb, beta, c, ldc, stridec,
                      batch);
}

cublasStatus_t cublasStrsm_v2(cublasHandle_t handle, int side, int uplo, int trans, int diag, int m, int n,
                              const float *alpha, const float *a, int lda, float *b, int ldb) {
  return trsm<float>(handle, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb);
}

cublasStatus_t cublasDtrsm_v2(cublasHandle_t handle, int side, int uplo, int trans, int diag, int m, int n,
                              const double *alpha, const double *a, int lda, double *b, int ldb) {
  return trsm<double>(handle, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb);
}

cusolverStatus_t cusolverGetProperty(int type, int *value) {
  return property(type, value, model::config().cusolver_major) ? CUSOLVER_STATUS_INVALID_VALUE
                                                                : CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle) {
  if (handle == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
  if (!model::context_current()) return CUSOLVER_STATUS_NOT_INITIALIZED;
  *handle = reinterpret_cast<cusolverDnHandle_t>(create(solver_handles()));
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle) {
  return destroy(solver_handles(), handle) ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_NOT_INITIALIZED;
}

cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, CUstream stream) {
  return set_stream(solver_handles(), handle, stream) ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_NOT_INITIALIZED;
}

cusolverStatus_t cusolverDnSpotrf_bufferSize(cusolverDnHandle_t handle, int uplo, int n, float *a, int lda,
                                             int *lwork) {
  return potrf_size<float>(handle, uplo, n, a, lda, lwork);
}

cusolverStatus_t cusolverDnDpotrf_bufferSize(cusolverDnHandle_t handle, int uplo, int n, double *a, int lda,
                                             int *lwork) {
  return potrf_size<double>(handle, uplo, n, a, lda, lwork);
}

cusolverStatus_t cusolverDnSpotrf(cusolverDnHandle_t handle, int uplo, int n, float *a, int lda, float *work,
                                  int lwork, int *info) {
  return potrf<float>(handle, uplo, n, a, lda, work, lwork, info);
}

cusolverStatus_t cusolverDnDpotrf(cusolverDnHandle_t handle, int uplo, int n, double *a, int lda, double *work,
                                  int lwork, int *info) {
  return potrf<double>(handle, uplo, n, a, lda, work, lwork, info);
}

} // extern "C"
