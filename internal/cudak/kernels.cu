// orthonet's CUDA kernels: every backend kernel that is not a matrix product.
//
// Each kernel takes one argument, a struct of 8-byte fields (pointers, long
// long, double), which package cudak fills as 64-bit words: the layout needs
// no padding rules on either side. A struct or #define whose line ends "from
// backend/gen/args_table.go" is written by go generate ./backend from that
// table, which also writes the Go struct a kernel's Device method launches
// with and the constant of each length (backend/kernel_args.go): edit the
// table, not the line. Kernels are compiled by NVRTC for the GPU
// and, with the host definitions of standin/host.h (ORTHONET_EMU), by the C++
// compiler into the host model of the device, so that the same source is
// tested without a GPU.
//
// A kernel whose threads meet at __syncthreads is defined with KERNEL_SYNC
// (the host model runs the threads of its blocks as fibers that meet there,
// and those of other kernels one after another; both in forward, reverse and
// random orders). Every thread of a block reaches every barrier.
//
// Launch shapes are cudak's: every block has NT threads along x; the
// elementwise kernels stride over the grid, the per-row kernels over rows.
//
// After the shared definitions, each section holds the kernels of one family
// file of package backend, which its header names, in the order that file
// launches them (cudak's TestSectionsFollowGoFiles checks it).

#ifndef ORTHONET_EMU
#define KERNEL(name, Args) extern "C" __global__ void name(Args a)
#define KERNEL_SYNC(name, Args) KERNEL(name, Args)
// SHARED declares a block's shared array (the host model gives each block a
// fresh, poisoned one).
#define SHARED(T, name, n) __shared__ T name[n]
typedef long long i64;
typedef unsigned long long u64;
__device__ __forceinline__ bool finite_bits(double x) {
  return (__double_as_longlong(x) & 0x7ff0000000000000LL) != 0x7ff0000000000000LL;
}
__device__ __forceinline__ bool finite_bits(float x) {
  return (__float_as_int(x) & 0x7f800000) != 0x7f800000;
}
__device__ __forceinline__ u64 abs_bits(double x) { return (u64)__double_as_longlong(x) & 0x7fffffffffffffffULL; }
__device__ __forceinline__ u64 abs_bits(float x) { return (u64)((unsigned)__float_as_int(x) & 0x7fffffffu); }
__device__ __forceinline__ double bits_value(u64 b, double) { return __longlong_as_double((i64)b); }
__device__ __forceinline__ double bits_value(u64 b, float) { return (double)__int_as_float((int)b); }
#endif

#define NT 256
// GRID_LOOP_T strides index i, of type I, over [0, n) across the grid.
#define GRID_LOOP_T(I, i, n) for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)(n); i += (I)blockDim.x * gridDim.x)
#define GRID_LOOP(i, n) GRID_LOOP_T(i64, i, n)

// The kernels that divide indices per element (strided copies, rows, bias,
// column reductions, softmax lanes, r x r steps) come in two instances: one
// with 64-bit index arithmetic, and one named _x32 (before the type's
// suffix) with 32-bit arithmetic (unsigned for indices, int for signed
// offsets), several times cheaper on a GPU, which the planner picks where
// every index the kernel computes is below 2^31. Both compute the same
// indices, so their results are the same.
typedef unsigned u32;

// ---- scalar functions (the CPU backend's definitions) ----------------------

enum { ACT_IDENTITY = 0, ACT_RELU, ACT_GELU };

// The math functions in the element type: float arithmetic for float32 data
// (within 2 ulp of the CPU backend's correctly rounded results, and many
// times faster on a GPU than double), double for float64.
#define MATH1(name, f, d) \
  __device__ __forceinline__ float name(float x) { return f(x); } \
  __device__ __forceinline__ double name(double x) { return d(x); }
MATH1(m_abs, fabsf, fabs)
MATH1(m_exp, expf, exp)
MATH1(m_log, logf, log)
MATH1(m_log1p, log1pf, log1p)
MATH1(m_expm1, expm1f, expm1)
MATH1(m_sqrt, sqrtf, sqrt)
MATH1(m_tanh, tanhf, tanh)
MATH1(m_ceil, ceilf, ceil)
MATH1(m_floor, floorf, floor)
MATH1(m_sin, sinf, sin)
MATH1(m_cos, cosf, cos)
MATH1(m_log2, log2f, log2)
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

#define GELU_C 0.7978845608028654 // sqrt(2/pi)

template <typename T> __device__ __forceinline__ T gelu(T x) {
  return (T)0.5 * x * ((T)1 + m_tanh((T)GELU_C * (x + (T)0.044715 * x * x * x)));
}

template <typename T> __device__ __forceinline__ T gelu_deriv(T x) {
  T t = m_tanh((T)GELU_C * (x + (T)0.044715 * x * x * x));
  return (T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * (T)GELU_C * ((T)1 + (T)3 * (T)0.044715 * x * x);
}

// BEGIN UNARY_OPS: written by go generate ./backend from backend/gen/table.go; edit the table, not these lines.
// UNARY_OPS lists backend.UnaryOp's functions, in the order of its
// constants: each is its name and its value at x.
#define UNARY_OPS(X)                                     \
  X(NEG, -x)                                             \
  X(ABS, m_abs(x))                                       \
  X(SIGN, x > 0 ? (T)1 : (x < 0 ? (T)-1 : x))            \
  X(EXP, m_exp(x))                                       \
  X(LOG, m_log(x))                                       \
  X(LOG1P, m_log1p(x))                                   \
  X(EXPM1, m_expm1(x))                                   \
  X(SQRT, m_sqrt(x))                                     \
  X(SQUARE, x * x)                                       \
  X(CUBE, x * x * x)                                     \
  X(TANH, m_tanh(x))                                     \
  X(SIGMOID, (T)1 / ((T)1 + m_exp(-x)))                  \
  X(INVERSE, (T)1 / x)                                   \
  X(INVERSESQRT, (T)1 / m_sqrt(x))                       \
  X(CEIL, m_ceil(x))                                     \
  X(FLOOR, m_floor(x))                                   \
  X(RELU, x < 0 ? (T)0 : x)                              \
  X(SOFTPLUS, x > (T)36 ? x : m_log1p(m_exp(x)))         \
  X(IDENTITY, x)                                         \
  X(SIN, m_sin(x))                                       \
  X(COS, m_cos(x))                                       \
  X(LOG2, m_log2(x))                                     \
  X(GELU, gelu(x))                                       \
  X(SILU, x < (T)-1e30 ? -(T)0 : x / ((T)1 + m_exp(-x)))
// END UNARY_OPS

#define UNARY_ENUM(name, value) name,
enum { UNARY_NONE, UNARY_OPS(UNARY_ENUM) };
#undef UNARY_ENUM

template <typename T> __device__ __forceinline__ T unary(int op, T x) {
  switch (op) {
#define UNARY_CASE(name, value) \
  case name: return value;
    UNARY_OPS(UNARY_CASE)
#undef UNARY_CASE
  }
  return x;
}

// BEGIN BINARY_OPS: written by go generate ./backend from backend/gen/table.go; edit the table, not these lines.
// BINARY_OPS lists backend.BinaryOp's functions, in the order of its
// constants: each is its name and its value at x and y.
#define BINARY_OPS(X)                \
  X(ADD, x + y)                      \
  X(SUB, x - y)                      \
  X(MUL, x * y)                      \
  X(DIV, x / y)                      \
  X(POW, m_pow(x, y))                \
  X(LT, x < y ? (T)1 : (T)0)         \
  X(GT, x > y ? (T)1 : (T)0)         \
  X(LE, x <= y ? (T)1 : (T)0)        \
  X(GE, x >= y ? (T)1 : (T)0)        \
  X(EQ, x == y ? (T)1 : (T)0)        \
  X(NE, x != y ? (T)1 : (T)0)        \
  X(MAX2, (x > y || x != x) ? x : y) \
  X(MIN2, (x < y || x != x) ? x : y) \
  X(GELUGRAD, y * gelu_deriv(x))
// END BINARY_OPS

#define BINARY_ENUM(name, value) name,
enum { BINARY_NONE, BINARY_OPS(BINARY_ENUM) };
#undef BINARY_ENUM

template <typename T> __device__ __forceinline__ T binary(int op, T x, T y) {
  switch (op) {
#define BINARY_CASE(name, value) \
  case name: return value;
    BINARY_OPS(BINARY_CASE)
#undef BINARY_CASE
  }
  return x;
}

// max that keeps NaN, as the CPU backend's reductions do
template <typename T> __device__ __forceinline__ T nanmax(T m, T v) { return m != m ? m : ((v > m || v != v) ? v : m); }

struct AddOp {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return nanmax(a, b); }
};

// block_reduce returns op over every thread's v to every thread of the
// block, through the NT elements of sh; its closing barrier lets any thread
// write sh again at once.
template <typename T, typename Op> __device__ T block_reduce(T v, T *sh, Op op) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = NT / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  T r = sh[0];
  __syncthreads();
  return r;
}

__device__ double block_sum(double v, double *sh) { return block_reduce(v, sh, AddOp()); }
template <typename T> __device__ T block_max(T v, T *sh) { return block_reduce(v, sh, MaxOp()); }

// ---- elementwise (backend/elementwise.go, backend/chain.go) ------------------------------------

template <typename T> struct MapArgs { i64 op, n; const T *src; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void map_k(const MapArgs<T> &a) {
  int op = (int)a.op;
  GRID_LOOP(i, a.n) a.dst[i] = unary(op, a.src[i]);
}
KERNEL(on_map_f32, MapArgs<float>) { map_k(a); }
KERNEL(on_map_f64, MapArgs<double>) { map_k(a); }

template <typename T> struct ZipArgs { i64 op, n; i64 ascalar, bscalar; const T *a; const T *b; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void zip_k(const ZipArgs<T> &a) {
  int op = (int)a.op;
  GRID_LOOP(i, a.n) {
    T x = a.a[a.ascalar ? 0 : i], y = a.b[a.bscalar ? 0 : i];
    a.dst[i] = binary(op, x, y);
  }
}
KERNEL(on_zip_f32, ZipArgs<float>) { zip_k(a); }
KERNEL(on_zip_f64, ZipArgs<double>) { zip_k(a); }

template <typename T> struct FillArgs { i64 n; double v; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void fill_k(const FillArgs<T> &a) {
  T v = (T)a.v;
  GRID_LOOP(i, a.n) a.dst[i] = v;
}
KERNEL(on_fill_f32, FillArgs<float>) { fill_k(a); }
KERNEL(on_fill_f64, FillArgs<double>) { fill_k(a); }
KERNEL(on_fill_i32, FillArgs<int>) { fill_k(a); }

// Compare: binary()'s comparisons, as 0/1 ints.
template <typename T> struct CompareArgs { i64 op, n; i64 ascalar, bscalar; const T *a; const T *b; int *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void compare_k(const CompareArgs<T> &a) {
  int op = (int)a.op;
  GRID_LOOP(i, a.n) {
    T x = a.a[a.ascalar ? 0 : i], y = a.b[a.bscalar ? 0 : i];
    a.dst[i] = binary(op, x, y) != (T)0 ? 1 : 0;
  }
}
KERNEL(on_compare_f32, CompareArgs<float>) { compare_k(a); }
KERNEL(on_compare_f64, CompareArgs<double>) { compare_k(a); }

// Chain: up to CHAIN_STEPS of unary() and binary() on CHAIN_INPUTS inputs,
// each step's result a register of the element type (backend/chain.go);
// code[s] is step s: binary op | unary op << 8 | register A << 16 | register B << 24.
#define CHAIN_INPUTS 8 // from backend/gen/args_table.go
#define CHAIN_STEPS 16 // from backend/gen/args_table.go
template <typename T> struct ChainArgs { i64 n, steps, scalars; i64 code[CHAIN_STEPS]; const T *in[CHAIN_INPUTS]; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void chain_k(const ChainArgs<T> &a) {
  int steps = (int)a.steps;
  GRID_LOOP(i, a.n) {
    T r[CHAIN_INPUTS + CHAIN_STEPS];
    for (int j = 0; j < CHAIN_INPUTS; j++) r[j] = a.in[j] ? a.in[j][(a.scalars >> j & 1) ? 0 : i] : (T)0;
    for (int s = 0; s < steps; s++) {
      i64 c = a.code[s];
      int bop = (int)(c & 255), uop = (int)(c >> 8 & 255);
      T x = r[c >> 16 & 255];
      r[CHAIN_INPUTS + s] = bop ? binary(bop, x, r[c >> 24 & 255]) : unary(uop, x);
    }
    a.dst[i] = r[CHAIN_INPUTS + steps - 1];
  }
}
KERNEL(on_chain_f32, ChainArgs<float>) { chain_k(a); }
KERNEL(on_chain_f64, ChainArgs<double>) { chain_k(a); }

// ---- copies (backend/copies.go) -----------------------------------------------------------------

// Copy: a strided view into a strided view, axes simplified by the planner.
template <typename T> struct CopyArgs { i64 nd, n; i64 add; i64 shape[8], ss[8], ds[8]; const T *src; T *dst; }; // from backend/gen/args_table.go
// U is the index type, S that of the (signed) offsets.
template <typename T, typename U, typename S> __device__ void copy_k(const CopyArgs<T> &a) {
  GRID_LOOP_T(U, i, a.n) {
    U r = i;
    S so = 0, dof = 0;
    for (int ax = (int)a.nd - 1; ax >= 0; ax--) {
      U len = (U)a.shape[ax], c = r % len;
      r /= len;
      so += (S)c * (S)a.ss[ax];
      dof += (S)c * (S)a.ds[ax];
    }
    if (a.add) a.dst[dof] += a.src[so];
    else a.dst[dof] = a.src[so];
  }
}
KERNEL(on_copy_f32, CopyArgs<float>) { copy_k<float, i64, i64>(a); }
KERNEL(on_copy_f64, CopyArgs<double>) { copy_k<double, i64, i64>(a); }
KERNEL(on_copy_x32_f32, CopyArgs<float>) { copy_k<float, u32, int>(a); }
KERNEL(on_copy_x32_f64, CopyArgs<double>) { copy_k<double, u32, int>(a); }

// fault records the first bad row index: fault[0] = 1, then the index, its
// entry and the number of rows; the backend reports it at the next sync.
__device__ void fault_row(u64 *fault, i64 r, i64 entry, i64 limit) {
  if (atomicCAS(&fault[0], 0ULL, 1ULL) == 0ULL) {
    fault[1] = (u64)r;
    fault[2] = (u64)entry;
    fault[3] = (u64)limit;
  }
}

template <typename T> struct RowsArgs { i64 n, width, limit; i64 gather; const int *rows; const T *src; T *dst; u64 *fault; }; // from backend/gen/args_table.go
template <typename T, typename U> __device__ void rows_k(const RowsArgs<T> &a) {
  U width = (U)a.width;
  GRID_LOOP_T(U, i, a.n * a.width) {
    U e = i / width, c = i % width;
    i64 r = a.rows[e];
    if (r < 0 || r >= a.limit) {
      fault_row(a.fault, r, (i64)e, a.limit);
      continue;
    }
    U at = (U)r * width + c;
    if (a.gather) a.dst[i] = a.src[at];
    else a.dst[at] = a.src[i];
  }
}
KERNEL(on_rows_f32, RowsArgs<float>) { rows_k<float, i64>(a); }
KERNEL(on_rows_f64, RowsArgs<double>) { rows_k<double, i64>(a); }
KERNEL(on_rows_x32_f32, RowsArgs<float>) { rows_k<float, u32>(a); }
KERNEL(on_rows_x32_f64, RowsArgs<double>) { rows_k<double, u32>(a); }

// Take: a thread per destination element (o, i, in) of an (outer, n, inner)
// array, from src[o, idx[i], in]; a bad index records fault 1 and is skipped.
template <typename T> struct TakeArgs { i64 outer, axis, inner, n; const int *idx; const T *src; T *dst; u64 *fault; }; // from backend/gen/args_table.go
template <typename T> __device__ void take_k(const TakeArgs<T> &a) {
  GRID_LOOP(e, a.outer * a.n * a.inner) {
    i64 in = e % a.inner, row = e / a.inner, i = row % a.n, o = row / a.n;
    i64 r = a.idx[i];
    if (r < 0 || r >= a.axis) {
      fault_row(a.fault, r, i, a.axis);
      continue;
    }
    a.dst[e] = a.src[(o * a.axis + r) * a.inner + in];
  }
}
KERNEL(on_take_f32, TakeArgs<float>) { take_k(a); }
KERNEL(on_take_f64, TakeArgs<double>) { take_k(a); }

// TakeGrad, first half (one block): the entries sorted by index, stably:
// order[offsets[r] .. offsets[r+1]) are the entries of index r in
// increasing order. Counts by integer atomics, an exclusive prefix sum in
// chunks of NT, then chunk by chunk each entry's place after those of its
// index in earlier chunks (cursor) and earlier in its chunk. A bad index
// records fault 1 and its entry is left out.
template <typename T> struct TakeIndexArgs { i64 axis, n; const int *idx; int *offsets; int *cursor; int *order; u64 *fault; }; // from backend/gen/args_table.go
__device__ void take_index_k(const TakeIndexArgs<int> &a) {
  SHARED(int, sh, NT);
  int tid = (int)threadIdx.x;
  for (i64 r = tid; r < a.axis; r += NT) a.cursor[r] = 0;
  __syncthreads();
  for (i64 i = tid; i < a.n; i += NT) {
    i64 r = a.idx[i];
    if (r < 0 || r >= a.axis) fault_row(a.fault, r, i, a.axis);
    else atomicAdd(&a.cursor[r], 1);
  }
  __syncthreads();
  int carry = 0;
  for (i64 base = 0; base < a.axis; base += NT) {
    int v = base + tid < a.axis ? a.cursor[base + tid] : 0;
    sh[tid] = v;
    __syncthreads();
    for (int s = 1; s < NT; s <<= 1) { // inclusive scan (Hillis and Steele)
      int t = tid >= s ? sh[tid - s] : 0;
      __syncthreads();
      sh[tid] += t;
      __syncthreads();
    }
    if (base + tid < a.axis) a.offsets[base + tid] = carry + sh[tid] - v;
    carry += sh[NT - 1];
    __syncthreads();
  }
  if (tid == 0) a.offsets[a.axis] = carry;
  // Each thread copies the offsets it wrote itself; the first barrier of the
  // loop below orders these writes before any read of the cursors.
  for (i64 r = tid; r < a.axis; r += NT) a.cursor[r] = a.offsets[r];
  for (i64 base = 0; base < a.n; base += NT) {
    i64 i = base + tid;
    int r = i < a.n ? a.idx[i] : -1;
    bool valid = r >= 0 && r < a.axis;
    sh[tid] = valid ? r : -1;
    __syncthreads();
    int rank = 0;
    bool last = true;
    if (valid) {
      for (int t = 0; t < NT; t++) {
        if (sh[t] != r || t == tid) continue;
        if (t < tid) rank++;
        else last = false;
      }
      a.order[a.cursor[r] + rank] = (int)i;
    }
    __syncthreads(); // every read of sh and of the cursors in this chunk is done
    // The cursors move on for the next chunk, whose first barrier orders
    // this before its reads; sh is not read again before that barrier.
    if (valid && last) a.cursor[r] += rank + 1;
  }
}
KERNEL_SYNC(on_take_index_i32, TakeIndexArgs<int>) { take_index_k(a); }

// TakeGrad, second half: a thread per element (o, r, in) of dx adds its
// entries' elements of dy in order, in the element type (as the CPU does).
template <typename T> struct TakeGradArgs { i64 outer, axis, inner, n; const int *offsets; const int *order; const T *dy; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ void take_grad_k(const TakeGradArgs<T> &a) {
  GRID_LOOP(e, a.outer * a.axis * a.inner) {
    i64 in = e % a.inner, row = e / a.inner, r = row % a.axis, o = row / a.axis;
    T s = 0;
    for (i64 p = a.offsets[r]; p < a.offsets[r + 1]; p++) s += a.dy[(o * a.n + a.order[p]) * a.inner + in];
    a.dx[e] = s;
  }
}
KERNEL(on_take_grad_f32, TakeGradArgs<float>) { take_grad_k(a); }
KERNEL(on_take_grad_f64, TakeGradArgs<double>) { take_grad_k(a); }

// ---- reductions and softmax (backend/reductions.go) ---------------------------------------------

// Reduce with Inner == 1: a block per row of Mid elements.
template <typename T> struct ReduceArgs { i64 op, outer, mid, inner; const T *src; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void reduce_rows_k(const ReduceArgs<T> &a) {
  SHARED(double, shd, NT);
  SHARED(T, sht, NT);
  for (i64 o = blockIdx.x; o < a.outer; o += gridDim.x) {
    const T *row = a.src + o * a.mid;
    if (a.op == 1) {
      double s = 0;
      for (i64 j = threadIdx.x; j < a.mid; j += NT) s += (double)row[j];
      s = block_sum(s, shd);
      if (threadIdx.x == 0) a.dst[o] = (T)s;
    } else {
      T m = row[0];
      for (i64 j = threadIdx.x; j < a.mid; j += NT) m = nanmax(m, row[j]);
      m = block_max(m, sht);
      if (threadIdx.x == 0) a.dst[o] = m;
    }
  }
}
KERNEL_SYNC(on_reduce_rows_f32, ReduceArgs<float>) { reduce_rows_k(a); }
KERNEL_SYNC(on_reduce_rows_f64, ReduceArgs<double>) { reduce_rows_k(a); }

// Two-stage column sums (many rows, few columns).

// Reduce (sum) with Inner > 1 over a long middle axis, first stage: block
// (c, b) sums rows [c*mid/chunks, (c+1)*mid/chunks) of columns b*NT.. into
// part[c][o*inner + in], in double.
template <typename T> struct PartialArgs { i64 outer, mid, inner, chunks; const T *src; double *part; }; // from backend/gen/args_table.go
template <typename T> __device__ void sum_partial_k(const PartialArgs<T> &a) {
  i64 cols = a.outer * a.inner, colBlocks = (cols + NT - 1) / NT;
  for (i64 blk = blockIdx.x; blk < colBlocks * a.chunks; blk += gridDim.x) {
    i64 c = blk / colBlocks, col = (blk % colBlocks) * NT + threadIdx.x;
    if (col >= cols) continue;
    i64 o = col / a.inner, in = col % a.inner;
    i64 lo = c * a.mid / a.chunks, hi = (c + 1) * a.mid / a.chunks;
    const T *p = a.src + o * a.mid * a.inner + in;
    double s = 0;
    for (i64 m = lo; m < hi; m++) s += (double)p[m * a.inner];
    a.part[c * cols + col] = s;
  }
}
KERNEL(on_sum_partial_f32, PartialArgs<float>) { sum_partial_k(a); }
KERNEL(on_sum_partial_f64, PartialArgs<double>) { sum_partial_k(a); }

// Second stage: dst[col] = the chunks' partial sums, in order.
template <typename T> struct PartsArgs { i64 cols, chunks; const double *part; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void sum_parts_k(const PartsArgs<T> &a) {
  GRID_LOOP(col, a.cols) {
    double s = 0;
    for (i64 c = 0; c < a.chunks; c++) s += a.part[c * a.cols + col];
    a.dst[col] = (T)s;
  }
}
KERNEL(on_sum_parts_f32, PartsArgs<float>) { sum_parts_k(a); }
KERNEL(on_sum_parts_f64, PartsArgs<double>) { sum_parts_k(a); }

// Reduce with Inner > 1: a thread per output, down the middle axis.
template <typename T, typename U> __device__ void reduce_mid_k(const ReduceArgs<T> &a) {
  U inner = (U)a.inner, mid = (U)a.mid;
  GRID_LOOP_T(U, i, a.outer * a.inner) {
    U o = i / inner, in = i % inner;
    const T *p = a.src + o * mid * inner + in;
    if (a.op == 1) {
      double s = 0;
      for (U m = 0; m < mid; m++) s += (double)p[m * inner];
      a.dst[i] = (T)s;
    } else {
      T m = p[0];
      for (U j = 1; j < mid; j++) m = nanmax(m, p[j * inner]);
      a.dst[i] = m;
    }
  }
}
KERNEL(on_reduce_mid_f32, ReduceArgs<float>) { reduce_mid_k<float, i64>(a); }
KERNEL(on_reduce_mid_f64, ReduceArgs<double>) { reduce_mid_k<double, i64>(a); }
KERNEL(on_reduce_mid_x32_f32, ReduceArgs<float>) { reduce_mid_k<float, u32>(a); }
KERNEL(on_reduce_mid_x32_f64, ReduceArgs<double>) { reduce_mid_k<double, u32>(a); }

// Softmax and its gradient along a middle axis of (outer, axis, inner)
// arrays. With inner == 1 the axis is a row of consecutive elements and a
// block takes each row (the _rows kernels: consecutive threads read
// consecutive elements, block reductions for the maximum and the sums);
// with inner > 1 a thread takes each lane (o, in), whose neighbours read
// the neighbouring elements. Sums are in double; the per-element math is
// in the element type (expf for float32 data: within 2 ulp, where the CPU
// backend rounds exp's double result to float32 in the end).
template <typename T> struct SoftmaxArgs { i64 log; i64 outer, axis, inner; const T *src; T *dst; }; // from backend/gen/args_table.go
template <typename T, typename U> __device__ void softmax_k(const SoftmaxArgs<T> &a) {
  U inner = (U)a.inner, axis = (U)a.axis;
  GRID_LOOP_T(U, lane, a.outer * a.inner) {
    U o = lane / inner, in = lane % inner;
    U base = o * axis * inner + in;
    T m = a.src[base];
    for (U j = 1; j < axis; j++) {
      T v = a.src[base + j * inner];
      if (v > m) m = v;
    }
    double z = 0;
    for (U j = 0; j < axis; j++) z += (double)m_exp(a.src[base + j * inner] - m);
    if (a.log) {
      T lz = (T)log(z);
      for (U j = 0; j < axis; j++) a.dst[base + j * inner] = (a.src[base + j * inner] - m) - lz;
    } else {
      T inv = (T)(1 / z);
      for (U j = 0; j < axis; j++) a.dst[base + j * inner] = m_exp(a.src[base + j * inner] - m) * inv;
    }
  }
}
KERNEL(on_softmax_f32, SoftmaxArgs<float>) { softmax_k<float, i64>(a); }
KERNEL(on_softmax_f64, SoftmaxArgs<double>) { softmax_k<double, i64>(a); }
KERNEL(on_softmax_x32_f32, SoftmaxArgs<float>) { softmax_k<float, u32>(a); }
KERNEL(on_softmax_x32_f64, SoftmaxArgs<double>) { softmax_k<double, u32>(a); }

// Inner == 1: a block per row of axis elements, rows strided over the grid.
template <typename T> __device__ void softmax_rows_k(const SoftmaxArgs<T> &a) {
  SHARED(double, shd, NT);
  SHARED(T, sht, NT);
  for (i64 r = blockIdx.x; r < a.outer; r += gridDim.x) {
    const T *x = a.src + r * a.axis;
    T *y = a.dst + r * a.axis;
    // NaN anywhere makes the row NaN, whichever maximum is taken.
    T m = x[0];
    for (i64 j = threadIdx.x; j < a.axis; j += NT) m = nanmax(m, x[j]);
    m = block_max(m, sht);
    double z = 0;
    for (i64 j = threadIdx.x; j < a.axis; j += NT) z += (double)m_exp(x[j] - m);
    z = block_sum(z, shd);
    if (a.log) {
      T lz = (T)log(z);
      for (i64 j = threadIdx.x; j < a.axis; j += NT) y[j] = (x[j] - m) - lz;
    } else {
      T inv = (T)(1 / z);
      for (i64 j = threadIdx.x; j < a.axis; j += NT) y[j] = m_exp(x[j] - m) * inv;
    }
  }
}
KERNEL_SYNC(on_softmax_rows_f32, SoftmaxArgs<float>) { softmax_rows_k(a); }
KERNEL_SYNC(on_softmax_rows_f64, SoftmaxArgs<double>) { softmax_rows_k(a); }

template <typename T> struct SoftmaxGradArgs { i64 log; i64 outer, axis, inner; const T *y; const T *dy; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ __forceinline__ T softmax_grad_at(bool log, T y, T dy, T dot) {
  return log ? dy - m_exp(y) * dot : y * (dy - dot);
}
template <typename T, typename U> __device__ void softmax_grad_k(const SoftmaxGradArgs<T> &a) {
  U inner = (U)a.inner, axis = (U)a.axis;
  GRID_LOOP_T(U, lane, a.outer * a.inner) {
    U o = lane / inner, in = lane % inner;
    U base = o * axis * inner + in;
    double dot = 0;
    for (U j = 0; j < axis; j++) {
      U i = base + j * inner;
      dot += a.log ? (double)a.dy[i] : (double)(a.dy[i] * a.y[i]);
    }
    T d = (T)dot;
    for (U j = 0; j < axis; j++) {
      U i = base + j * inner;
      a.dx[i] = softmax_grad_at(a.log != 0, a.y[i], a.dy[i], d);
    }
  }
}
KERNEL(on_softmax_grad_f32, SoftmaxGradArgs<float>) { softmax_grad_k<float, i64>(a); }
KERNEL(on_softmax_grad_f64, SoftmaxGradArgs<double>) { softmax_grad_k<double, i64>(a); }
KERNEL(on_softmax_grad_x32_f32, SoftmaxGradArgs<float>) { softmax_grad_k<float, u32>(a); }
KERNEL(on_softmax_grad_x32_f64, SoftmaxGradArgs<double>) { softmax_grad_k<double, u32>(a); }

// Inner == 1: a block per row.
template <typename T> __device__ void softmax_grad_rows_k(const SoftmaxGradArgs<T> &a) {
  SHARED(double, sh, NT);
  for (i64 r = blockIdx.x; r < a.outer; r += gridDim.x) {
    const T *y = a.y + r * a.axis, *dy = a.dy + r * a.axis;
    T *dx = a.dx + r * a.axis;
    double dot = 0;
    for (i64 j = threadIdx.x; j < a.axis; j += NT) dot += a.log ? (double)dy[j] : (double)(dy[j] * y[j]);
    T d = (T)block_sum(dot, sh);
    for (i64 j = threadIdx.x; j < a.axis; j += NT) dx[j] = softmax_grad_at(a.log != 0, y[j], dy[j], d);
  }
}
KERNEL_SYNC(on_softmax_grad_rows_f32, SoftmaxGradArgs<float>) { softmax_grad_rows_k(a); }
KERNEL_SYNC(on_softmax_grad_rows_f64, SoftmaxGradArgs<double>) { softmax_grad_rows_k(a); }

template <typename T> struct FiniteArgs { i64 n; const T *src; int *flag; }; // from backend/gen/args_table.go
template <typename T> __device__ void finite_k(const FiniteArgs<T> &a) {
  bool bad = false;
  GRID_LOOP(i, a.n) bad |= !finite_bits(a.src[i]);
  if (bad) a.flag[0] = 1;
}
KERNEL(on_check_finite_f32, FiniteArgs<float>) { finite_k(a); }
KERNEL(on_check_finite_f64, FiniteArgs<double>) { finite_k(a); }

// CheckProduct, first half: the largest magnitudes of A and B, as the bits of
// |x| (integer order is magnitude order, NaN above +Inf), into ws[0] and ws[1].
// Each block reduces its threads' maxima first, then one thread makes the
// block's one atomicMax on each word.
template <typename T> struct AbsMaxArgs { i64 na, nb; const T *a; const T *b; u64 *ws; }; // from backend/gen/args_table.go
template <typename T> __device__ void absmax_k(const AbsMaxArgs<T> &a) {
  SHARED(u64, sh, NT);
  u64 ma = 0, mb = 0;
  GRID_LOOP(i, a.na + a.nb) {
    if (i < a.na) { u64 b = abs_bits(a.a[i]); ma = b > ma ? b : ma; }
    else { u64 b = abs_bits(a.b[i - a.na]); mb = b > mb ? b : mb; }
  }
  ma = block_max(ma, sh);
  mb = block_max(mb, sh);
  if (threadIdx.x == 0) {
    if (ma) atomicMax(&a.ws[0], ma);
    if (mb) atomicMax(&a.ws[1], mb);
  }
}
KERNEL_SYNC(on_absmax_f32, AbsMaxArgs<float>) { absmax_k(a); }
KERNEL_SYNC(on_absmax_f64, AbsMaxArgs<double>) { absmax_k(a); }

// CheckProduct, second half (one thread): the bound, then ws back to zero.
template <typename T> struct VerdictArgs { i64 ra; double limit; u64 *ws; int *flag; }; // from backend/gen/args_table.go
template <typename T> __device__ void verdict_k(const VerdictArgs<T> &a) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double x = bits_value(a.ws[0], (T)0), y = bits_value(a.ws[1], (T)0);
  bool inf = !finite_bits(x) || !finite_bits(y);
  if (!((double)a.ra * x * y < a.limit) || inf) a.flag[0] = 1;
  a.ws[0] = 0;
  a.ws[1] = 0;
}
KERNEL(on_product_verdict_f32, VerdictArgs<float>) { verdict_k(a); }
KERNEL(on_product_verdict_f64, VerdictArgs<double>) { verdict_k(a); }

// CountCorrect: one block, a thread per row (rows strided by NT), then the
// block's sum. A row's largest entry is where a scan that moves on only to
// a strictly larger entry ends (nn.Accuracy's).
template <typename T> __device__ i64 argmax_row(const T *x, i64 n) {
  i64 best = 0;
  for (i64 j = 1; j < n; j++)
    if (x[j] > x[best]) best = j;
  return best;
}
template <typename T> struct CorrectArgs { i64 rows, classes; const T *s; const T *t; int *count; }; // from backend/gen/args_table.go
template <typename T> __device__ void count_correct_k(const CorrectArgs<T> &a) {
  SHARED(double, sh, NT);
  double c = 0;
  for (i64 r = threadIdx.x; r < a.rows; r += NT)
    if (argmax_row(a.s + r * a.classes, a.classes) == argmax_row(a.t + r * a.classes, a.classes)) c += 1;
  c = block_sum(c, sh);
  if (blockIdx.x == 0 && threadIdx.x == 0) a.count[0] = (int)c;
}
KERNEL_SYNC(on_count_correct_f32, CorrectArgs<float>) { count_correct_k(a); }
KERNEL_SYNC(on_count_correct_f64, CorrectArgs<double>) { count_correct_k(a); }

// Sparsemax: a block per row. Element j is in the support where 1 + k z_j
// exceeds the sum of the k elements at least z_j (z the row less its
// maximum); tau = (sum of the support - 1) / its size. Counts and sums in
// double; O(cols^2 / NT) per thread.
template <typename T> struct SparsemaxArgs { i64 rows, cols; const T *src; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void sparsemax_k(const SparsemaxArgs<T> &a) {
  SHARED(double, shd, NT);
  SHARED(T, sht, NT);
  for (i64 r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T *x = a.src + r * a.cols;
    T *y = a.dst + r * a.cols;
    T m = x[0];
    for (i64 j = threadIdx.x; j < a.cols; j += NT) m = nanmax(m, x[j]);
    m = block_max(m, sht);
    double size = 0, support = 0;
    for (i64 j = threadIdx.x; j < a.cols; j += NT) {
      T zj = x[j] - m;
      double k = 0, s = 0;
      for (i64 i = 0; i < a.cols; i++) {
        T zi = x[i] - m;
        if (zi >= zj) {
          k += 1;
          s += (double)zi;
        }
      }
      if (1 + k * (double)zj > s) {
        size += 1;
        support += (double)zj;
      }
    }
    size = block_sum(size, shd);
    support = block_sum(support, shd);
    double tau = (support - 1) / size;
    for (i64 j = threadIdx.x; j < a.cols; j += NT) {
      double v = (double)(x[j] - m) - tau;
      y[j] = (T)(v > 0 ? v : 0);
    }
  }
}
KERNEL_SYNC(on_sparsemax_f32, SparsemaxArgs<float>) { sparsemax_k(a); }
KERNEL_SYNC(on_sparsemax_f64, SparsemaxArgs<double>) { sparsemax_k(a); }

// SparsemaxGrad: a block per row; dx = s (dy - sum(s dy) / sum(s)), s the
// support (y != 0), the sums in double.
template <typename T> struct SparsemaxGradArgs { i64 rows, cols; const T *y; const T *dy; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ void sparsemax_grad_k(const SparsemaxGradArgs<T> &a) {
  SHARED(double, shd, NT);
  for (i64 r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T *y = a.y + r * a.cols, *dy = a.dy + r * a.cols;
    T *dx = a.dx + r * a.cols;
    double s = 0, k = 0;
    for (i64 j = threadIdx.x; j < a.cols; j += NT) {
      if (y[j] != (T)0) {
        s += (double)dy[j];
        k += 1;
      }
    }
    s = block_sum(s, shd);
    k = block_sum(k, shd);
    double mean = k > 0 ? s / k : 0;
    for (i64 j = threadIdx.x; j < a.cols; j += NT) dx[j] = y[j] != (T)0 ? (T)((double)dy[j] - mean) : (T)0;
  }
}
KERNEL_SYNC(on_sparsemax_grad_f32, SparsemaxGradArgs<float>) { sparsemax_grad_k(a); }
KERNEL_SYNC(on_sparsemax_grad_f64, SparsemaxGradArgs<double>) { sparsemax_grad_k(a); }

// ---- products (backend/products.go) -------------------------------------------------------------

// scale_strided is a product over an empty inner dimension: C = beta C over
// a strided batch of m x n matrices (0 where beta is 0, C not read).
template <typename T> struct ScaleArgs { i64 batch, m, n, ldc, stride; double beta; T *c; }; // from backend/gen/args_table.go
template <typename T, typename U> __device__ void scale_strided_k(const ScaleArgs<T> &a) {
  T beta = (T)a.beta;
  U m = (U)a.m, n = (U)a.n;
  GRID_LOOP_T(U, i, a.batch * a.m * a.n) {
    U b = i / (m * n), r = (i / n) % m, j = i % n;
    T *p = a.c + b * (U)a.stride + r * (U)a.ldc + j;
    *p = a.beta == 0 ? (T)0 : beta * *p;
  }
}
KERNEL(on_scale_strided_f32, ScaleArgs<float>) { scale_strided_k<float, i64>(a); }
KERNEL(on_scale_strided_f64, ScaleArgs<double>) { scale_strided_k<double, i64>(a); }
KERNEL(on_scale_strided_x32_f32, ScaleArgs<float>) { scale_strided_k<float, u32>(a); }
KERNEL(on_scale_strided_x32_f64, ScaleArgs<double>) { scale_strided_k<double, u32>(a); }

// ---- linear algebra: the Q factor, by Cholesky QR twice (backend/linalg.go) ---------------------

// Cholesky: the upper factor R (in double, n x n) of the Gram matrix G (T,
// n x n) = R^T R, by one block; a pivot that is not above tol times its
// diagonal entry of G (a column all but in the span of those before it)
// records fault 2 with its index and stops.
template <typename T> struct CholArgs { i64 n; double tol; const T *g; double *r; u64 *fault; }; // from backend/gen/args_table.go
template <typename T> __device__ void chol_k(const CholArgs<T> &a) {
  SHARED(int, bad, 1);
  SHARED(double, d, 1);
  i64 n = a.n;
  // Thread 0 alone reads shared data before the pivot's barrier, and only
  // what it wrote itself (a.r[0] here, the next pivot at the end of each
  // step: t = 0 is thread 0), so the copy and each step need no barrier of
  // their own after them.
  for (i64 i = threadIdx.x; i < n * n; i += NT) a.r[i] = (double)a.g[i];
  if (threadIdx.x == 0) bad[0] = 0;
  for (i64 k = 0; k < n; k++) {
    if (threadIdx.x == 0) {
      double p = a.r[k * n + k];
      if (!(p > a.tol * (double)a.g[k * n + k]) || !finite_bits(p)) {
        bad[0] = 1;
        if (atomicCAS(&a.fault[0], 0ULL, 2ULL) == 0ULL) {
          a.fault[1] = (u64)k;
          a.fault[2] = (u64)n;
        }
      } else {
        d[0] = sqrt(p);
        a.r[k * n + k] = d[0];
      }
    }
    __syncthreads();
    if (bad[0]) break;
    for (i64 j = k + 1 + threadIdx.x; j < n; j += NT) a.r[k * n + j] /= d[0];
    __syncthreads();
    i64 m = n - k - 1;
    for (i64 t = threadIdx.x; t < m * m; t += NT) {
      i64 i = k + 1 + t / m, j = k + 1 + t % m;
      if (j >= i) a.r[i * n + j] -= a.r[k * n + i] * a.r[k * n + j];
    }
  }
}
KERNEL_SYNC(on_cholesky_f32, CholArgs<float>) { chol_k(a); }
KERNEL_SYNC(on_cholesky_f64, CholArgs<double>) { chol_k(a); }

// A (m x n) = A R^-1 for the upper R (double): a thread per row, in double.
template <typename T> struct TrsmArgs { i64 m, n; T *a; const double *r; u64 *fault; }; // from backend/gen/args_table.go
template <typename T> __device__ void trsm_k(const TrsmArgs<T> &a) {
  if (a.fault[0] == 2) return; // the factorization failed: leave A
  GRID_LOOP(row, a.m) {
    T *x = a.a + row * a.n;
    for (i64 j = 0; j < a.n; j++) {
      double s = (double)x[j];
      for (i64 i = 0; i < j; i++) s -= (double)x[i] * a.r[i * a.n + j];
      x[j] = (T)(s / a.r[j * a.n + j]);
    }
  }
}
KERNEL(on_trsm_f32, TrsmArgs<float>) { trsm_k(a); }
KERNEL(on_trsm_f64, TrsmArgs<double>) { trsm_k(a); }

// diag_save copies the diagonal of the n x n G into d (double), for
// potrf_check.
template <typename T> struct DiagArgs { i64 n; const T *g; double *d; }; // from backend/gen/args_table.go
template <typename T> __device__ void diag_save_k(const DiagArgs<T> &a) {
  GRID_LOOP(k, a.n) a.d[k] = (double)a.g[k * a.n + k];
}
KERNEL(on_diag_save_f32, DiagArgs<float>) { diag_save_k(a); }
KERNEL(on_diag_save_f64, DiagArgs<double>) { diag_save_k(a); }

// potrf_check records fault 2 where cuSOLVER's Cholesky failed (info) or a
// pivot R_kk^2 before that is not above tol times G's diagonal entry d[k],
// with the first such pivot and the order, and then sets R to the identity; it
// clears the info. One block: its threads scan the pivots side by side (a
// single thread's n dependent loads took 63 us of a 300 x 300 Q factor's
// 350 on an H200).
struct MinOp {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T> struct PotrfCheckArgs { i64 n; double tol; int *info; const T *r; const double *d; u64 *fault; }; // from backend/gen/args_table.go
template <typename T> __device__ void potrf_check_k(const PotrfCheckArgs<T> &a) {
  SHARED(i64, sh, NT);
  if (blockIdx.x != 0) return;
  // cuSOLVER's failure at pivot info-1 leaves the pivots before it good to
  // check; a.n stands for none.
  const i64 failed = a.info[0] > 0 ? a.info[0] - 1 : a.n;
  i64 bad = failed;
  for (i64 k = threadIdx.x; bad == failed && k < failed; k += NT) {
    double p = (double)a.r[k * a.n + k];
    if (!(p * p > a.tol * a.d[k]) || !finite_bits(p)) bad = k;
  }
  // Every thread has read the info and its pivots when the reduction's
  // first barrier lets any pass.
  bad = block_reduce(bad, sh, MinOp());
  if (bad < a.n) {
    if (threadIdx.x == 0 && atomicCAS(&a.fault[0], 0ULL, 2ULL) == 0ULL) {
      a.fault[1] = (u64)bad;
      a.fault[2] = (u64)a.n;
    }
    // R = I, so that the solve after leaves the matrix as it was.
    T *r = (T *)a.r;
    for (i64 k = threadIdx.x; k < a.n * a.n; k += NT) r[k] = k / a.n == k % a.n ? (T)1 : (T)0;
  }
  if (threadIdx.x == 0) a.info[0] = 0;
}
KERNEL_SYNC(on_potrf_check_f32, PotrfCheckArgs<float>) { potrf_check_k(a); }
KERNEL_SYNC(on_potrf_check_f64, PotrfCheckArgs<double>) { potrf_check_k(a); }

// ---- fused layers (backend/fused.go) ------------------------------------------------------------

// block_lse returns to every thread of the block the log-sum-exp of the n
// values at z, computed stably: the maximum in the element type, the sum of
// the exponentials in double over exponentials in the element type.
template <typename T> __device__ double block_lse(const T *z, i64 n, double *shd, T *sht) {
  T m = z[0];
  for (i64 j = threadIdx.x; j < n; j += NT) m = nanmax(m, z[j]);
  m = block_max(m, sht);
  double s = 0;
  for (i64 j = threadIdx.x; j < n; j += NT) s += (double)m_exp(z[j] - m);
  return (double)m + log(block_sum(s, shd));
}

// SoftmaxCrossEntropy, first half: a block per row, each row's loss
// sum_j t_j (lse - z_j) into part[r], in double.
template <typename T> struct CERowsArgs { i64 rows, classes; const T *z; const T *t; double *part; }; // from backend/gen/args_table.go
template <typename T> __device__ void ce_rows_k(const CERowsArgs<T> &a) {
  SHARED(double, shd, NT);
  SHARED(T, sht, NT);
  for (i64 r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T *z = a.z + r * a.classes, *t = a.t + r * a.classes;
    double lse = block_lse(z, a.classes, shd, sht), s = 0;
    for (i64 j = threadIdx.x; j < a.classes; j += NT) s += (double)t[j] * (lse - (double)z[j]);
    s = block_sum(s, shd);
    if (threadIdx.x == 0) a.part[r] = s;
  }
}
KERNEL_SYNC(on_ce_rows_f32, CERowsArgs<float>) { ce_rows_k(a); }
KERNEL_SYNC(on_ce_rows_f64, CERowsArgs<double>) { ce_rows_k(a); }

// Second half, one block: the mean of the rows' losses.
template <typename T> struct CEArgs { i64 rows; const double *part; T *loss; }; // from backend/gen/args_table.go
template <typename T> __device__ void ce_k(const CEArgs<T> &a) {
  SHARED(double, sh, NT);
  double s = 0;
  for (i64 r = threadIdx.x; r < a.rows; r += NT) s += a.part[r];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) a.loss[0] = (T)(s / (double)a.rows);
}
KERNEL_SYNC(on_ce_f32, CEArgs<float>) { ce_k(a); }
KERNEL_SYNC(on_ce_f64, CEArgs<double>) { ce_k(a); }

// SoftmaxCrossEntropyGrad: a block per row.
template <typename T> struct CEGradArgs { i64 rows, classes; const T *z; const T *t; const T *g; T *dz; }; // from backend/gen/args_table.go
template <typename T> __device__ void ce_grad_k(const CEGradArgs<T> &a) {
  SHARED(double, shd, NT);
  SHARED(T, sht, NT);
  T scale = (T)((double)a.g[0] / (double)a.rows);
  for (i64 r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T *z = a.z + r * a.classes, *t = a.t + r * a.classes;
    T *dz = a.dz + r * a.classes;
    T lse = (T)block_lse(z, a.classes, shd, sht);
    double mass = 0;
    for (i64 j = threadIdx.x; j < a.classes; j += NT) mass += (double)t[j];
    T ms = (T)block_sum(mass, shd);
    for (i64 j = threadIdx.x; j < a.classes; j += NT) dz[j] = scale * (m_exp(z[j] - lse) * ms - t[j]);
  }
}
KERNEL_SYNC(on_ce_grad_f32, CEGradArgs<float>) { ce_grad_k(a); }
KERNEL_SYNC(on_ce_grad_f64, CEGradArgs<double>) { ce_grad_k(a); }

// row_stats: mean and 1/sqrt(var + eps) of a row of d values, by the block.
template <typename T> __device__ void row_stats(const T *x, i64 d, double eps, double *sh, double &mean, double &rstd) {
  double s = 0;
  for (i64 j = threadIdx.x; j < d; j += NT) s += (double)x[j];
  mean = block_sum(s, sh) / (double)d;
  double v = 0;
  for (i64 j = threadIdx.x; j < d; j += NT) {
    double c = (double)x[j] - mean;
    v += c * c;
  }
  rstd = 1 / sqrt(block_sum(v, sh) / (double)d + eps);
}

template <typename T> struct LNArgs { i64 rows, d; double eps; const T *x; const T *gamma; const T *beta; T *y; }; // from backend/gen/args_table.go
template <typename T> __device__ void ln_k(const LNArgs<T> &a) {
  SHARED(double, sh, NT);
  for (i64 r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T *x = a.x + r * a.d;
    T *y = a.y + r * a.d;
    double mean, rstd;
    row_stats(x, a.d, a.eps, sh, mean, rstd);
    T m = (T)mean, rs = (T)rstd;
    for (i64 j = threadIdx.x; j < a.d; j += NT) y[j] = (x[j] - m) * rs * a.gamma[j] + a.beta[j];
  }
}
KERNEL_SYNC(on_layer_norm_f32, LNArgs<float>) { ln_k(a); }
KERNEL_SYNC(on_layer_norm_f64, LNArgs<double>) { ln_k(a); }

template <typename T> struct LNGradArgs { i64 rows, d; double eps; const T *x; const T *gamma; const T *dy; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ void ln_grad_k(const LNGradArgs<T> &a) {
  SHARED(double, sh, NT);
  for (i64 r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T *x = a.x + r * a.d, *dy = a.dy + r * a.d;
    T *dx = a.dx + r * a.d;
    double mean, rstd;
    row_stats(x, a.d, a.eps, sh, mean, rstd);
    T m = (T)mean, rs = (T)rstd;
    double mg = 0, mgx = 0;
    for (i64 j = threadIdx.x; j < a.d; j += NT) {
      T g = dy[j] * a.gamma[j];
      mg += (double)g;
      mgx += (double)(g * ((x[j] - m) * rs));
    }
    T mgt = (T)(block_sum(mg, sh) / (double)a.d);
    T mgxt = (T)(block_sum(mgx, sh) / (double)a.d);
    for (i64 j = threadIdx.x; j < a.d; j += NT) {
      T g = dy[j] * a.gamma[j];
      dx[j] = rs * (g - mgt - (x[j] - m) * rs * mgxt);
    }
  }
}
KERNEL_SYNC(on_layer_norm_grad_f32, LNGradArgs<float>) { ln_grad_k(a); }
KERNEL_SYNC(on_layer_norm_grad_f64, LNGradArgs<double>) { ln_grad_k(a); }

// LayerNormParamGrad, first half: mean and rstd of every row into stats.
template <typename T> struct LNStatsArgs { i64 rows, d; double eps; const T *x; double *stats; }; // from backend/gen/args_table.go
template <typename T> __device__ void ln_stats_k(const LNStatsArgs<T> &a) {
  SHARED(double, sh, NT);
  for (i64 r = blockIdx.x; r < a.rows; r += gridDim.x) {
    double mean, rstd;
    row_stats(a.x + r * a.d, a.d, a.eps, sh, mean, rstd);
    if (threadIdx.x == 0) {
      a.stats[2 * r] = mean;
      a.stats[2 * r + 1] = rstd;
    }
  }
}
KERNEL_SYNC(on_layer_norm_stats_f32, LNStatsArgs<float>) { ln_stats_k(a); }
KERNEL_SYNC(on_layer_norm_stats_f64, LNStatsArgs<double>) { ln_stats_k(a); }

// LayerNormParamGrad, second half: a thread per column, down the rows.
template <typename T> struct LNParamArgs { i64 rows, d; const T *x; const T *dy; const double *stats; T *dp; }; // from backend/gen/args_table.go
template <typename T> __device__ void ln_param_k(const LNParamArgs<T> &a) {
  GRID_LOOP(j, a.d) {
    double dg = 0, db = 0;
    for (i64 r = 0; r < a.rows; r++) {
      double g = (double)a.dy[r * a.d + j];
      dg += g * ((double)a.x[r * a.d + j] - a.stats[2 * r]) * a.stats[2 * r + 1];
      db += g;
    }
    a.dp[j] = (T)dg;
    a.dp[a.d + j] = (T)db;
  }
}
KERNEL(on_layer_norm_param_f32, LNParamArgs<float>) { ln_param_k(a); }
KERNEL(on_layer_norm_param_f64, LNParamArgs<double>) { ln_param_k(a); }

// LayerNormParamGrad over many rows, first stage: block (c, b) sums, for
// columns b*NT.. and rows of chunk c, dy * xhat and dy into part[c][j] and
// part[c][d + j].
template <typename T> struct LNPartArgs { i64 rows, d, chunks; const T *x; const T *dy; const double *stats; double *part; }; // from backend/gen/args_table.go
template <typename T> __device__ void ln_param_partial_k(const LNPartArgs<T> &a) {
  i64 colBlocks = (a.d + NT - 1) / NT;
  for (i64 blk = blockIdx.x; blk < colBlocks * a.chunks; blk += gridDim.x) {
    i64 c = blk / colBlocks, j = (blk % colBlocks) * NT + threadIdx.x;
    if (j >= a.d) continue;
    i64 lo = c * a.rows / a.chunks, hi = (c + 1) * a.rows / a.chunks;
    double dg = 0, db = 0;
    for (i64 r = lo; r < hi; r++) {
      double g = (double)a.dy[r * a.d + j];
      dg += g * ((double)a.x[r * a.d + j] - a.stats[2 * r]) * a.stats[2 * r + 1];
      db += g;
    }
    a.part[c * 2 * a.d + j] = dg;
    a.part[c * 2 * a.d + a.d + j] = db;
  }
}
KERNEL(on_layer_norm_param_partial_f32, LNPartArgs<float>) { ln_param_partial_k(a); }
KERNEL(on_layer_norm_param_partial_f64, LNPartArgs<double>) { ln_param_partial_k(a); }

template <typename T> struct BiasActArgs { i64 rows, n, act; i64 grad; const T *x; const T *bias; const T *dy; T *out; }; // from backend/gen/args_table.go
template <typename T, typename U> __device__ void bias_act_k(const BiasActArgs<T> &a) {
  U n = (U)a.n;
  GRID_LOOP_T(U, i, a.rows * a.n) {
    T v = a.x[i] + a.bias[i % n];
    if (!a.grad) {
      if (a.act == ACT_RELU) a.out[i] = v < 0 ? (T)0 : v;
      else if (a.act == ACT_GELU) a.out[i] = gelu(v);
      else a.out[i] = v;
    } else {
      if (a.act == ACT_RELU) a.out[i] = v > 0 ? a.dy[i] : (T)0;
      else if (a.act == ACT_GELU) a.out[i] = a.dy[i] * gelu_deriv(v);
      else a.out[i] = a.dy[i];
    }
  }
}
KERNEL(on_bias_act_f32, BiasActArgs<float>) { bias_act_k<float, i64>(a); }
KERNEL(on_bias_act_f64, BiasActArgs<double>) { bias_act_k<double, i64>(a); }
KERNEL(on_bias_act_x32_f32, BiasActArgs<float>) { bias_act_k<float, u32>(a); }
KERNEL(on_bias_act_x32_f64, BiasActArgs<double>) { bias_act_k<double, u32>(a); }

// YOLODecode: a thread per element of the (batch, cells * boxes, attrs)
// destination.
template <typename T> struct YoloArgs { i64 batch, boxes, attrs, grid; double stride; const T *anchors; const T *src; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void yolo_k(const YoloArgs<T> &a) {
  i64 cells = a.grid * a.grid;
  T stride = (T)a.stride;
  GRID_LOOP(e, a.batch * cells * a.boxes * a.attrs) {
    i64 k = e % a.attrs, row = e / a.attrs;
    i64 box = row % a.boxes, cell = (row / a.boxes) % cells, b = row / (a.boxes * cells);
    T v = a.src[((b * a.boxes + box) * a.attrs + k) * cells + cell];
    T out;
    if (k == 0) out = ((T)1 / ((T)1 + m_exp(-v)) + (T)(cell % a.grid)) * stride;
    else if (k == 1) out = ((T)1 / ((T)1 + m_exp(-v)) + (T)(cell / a.grid)) * stride;
    else if (k < 4) out = m_exp(v) * a.anchors[2 * box + k - 2] * stride;
    else out = (T)1 / ((T)1 + m_exp(-v));
    a.dst[e] = out;
  }
}
KERNEL(on_yolo_f32, YoloArgs<float>) { yolo_k(a); }
KERNEL(on_yolo_f64, YoloArgs<double>) { yolo_k(a); }

// ---- optimizer steps (backend/step.go) ----------------------------------------------------------

template <typename T> struct SGDArgs { i64 n; double momentum, decay; T *w; const T *g; T *mom; const double *lr; }; // from backend/gen/args_table.go
template <typename T> __device__ void sgd_k(const SGDArgs<T> &a) {
  double lrd = a.lr[0];
  T lr = (T)lrd, mu = (T)a.momentum, f = (T)(1 - lrd * a.decay);
  bool decay = a.decay > 0 && lrd > 0;
  GRID_LOOP(i, a.n) {
    T w = a.w[i];
    if (decay) w *= f;
    if (a.momentum != 0) {
      T m = mu * a.mom[i] + a.g[i];
      a.mom[i] = m;
      w -= lr * m;
    } else {
      w -= lr * a.g[i];
    }
    a.w[i] = w;
  }
}
KERNEL(on_sgd_f32, SGDArgs<float>) { sgd_k(a); }
KERNEL(on_sgd_f64, SGDArgs<double>) { sgd_k(a); }

// pow_count returns x^n for x in [0, 1) and a whole n >= 1 (a step count)
// as Go's math.Pow makes it, bit for bit: the mantissa squared and
// multiplied in by the bits of n, the powers of two counted apart, and one
// scaling at the end. (Only the rounding of a result below 2^-1022 may
// differ, where 1 - x^n is 1 either way.)
__device__ double pow_count(double x, double n) {
  if (n == 0 || x == 1) return 1;
  if (n == 1) return x;
  if (x == 0) return 0;
  int e0;
  double a1 = 1, x1 = frexp(x, &e0);
  i64 ae = 0, xe = e0;
  for (i64 i = (i64)n; i != 0; i >>= 1) {
    if (xe < -(1 << 12) || (1 << 12) < xe) {
      ae += xe;
      break;
    }
    if (i & 1) {
      a1 *= x1;
      ae += xe;
    }
    x1 *= x1;
    xe *= 2;
    if (x1 < .5) {
      x1 += x1;
      xe--;
    }
  }
  return ldexp(a1, (int)(ae < -4000 ? -4000 : ae));
}

// Hyper holds the step size and the step count, from which each thread
// computes the bias corrections.
template <typename T> struct AdamArgs { i64 n; double b1, b2, eps, decay; T *w; const T *g; T *m; T *v; const double *hyper; }; // from backend/gen/args_table.go
template <typename T> __device__ void adam_k(const AdamArgs<T> &a) {
  double lr = a.hyper[0], c1 = 1 - pow_count(a.b1, a.hyper[1]), c2 = 1 - pow_count(a.b2, a.hyper[1]);
  T f = (T)(1 - lr * a.decay);
  bool decay = a.decay > 0 && lr > 0;
  // The moments and the step in the element type (the CPU backend's are in
  // double, rounded once to it).
  T b1 = (T)a.b1, b2 = (T)a.b2, nb1 = (T)(1 - a.b1), nb2 = (T)(1 - a.b2);
  T lrt = (T)lr, c1t = (T)c1, c2t = (T)c2, eps = (T)a.eps;
  GRID_LOOP(i, a.n) {
    T w = a.w[i];
    if (decay) w *= f;
    T g = a.g[i];
    T m = b1 * a.m[i] + nb1 * g;
    T v = b2 * a.v[i] + nb2 * g * g;
    a.m[i] = m;
    a.v[i] = v;
    a.w[i] = w - lrt * (m / c1t) / (m_sqrt(v / c2t) + eps);
  }
}
KERNEL(on_adam_f32, AdamArgs<float>) { adam_k(a); }
KERNEL(on_adam_f64, AdamArgs<double>) { adam_k(a); }

template <typename T> struct AddScaledArgs { i64 n; double alpha; const T *x; const T *y; T *dst; const double *scale; }; // from backend/gen/args_table.go
template <typename T> __device__ void add_scaled_k(const AddScaledArgs<T> &a) {
  T s = (T)(a.scale ? a.alpha * a.scale[0] : a.alpha);
  GRID_LOOP(i, a.n) a.dst[i] = a.x[i] + s * a.y[i];
}
KERNEL(on_add_scaled_f32, AddScaledArgs<float>) { add_scaled_k(a); }
KERNEL(on_add_scaled_f64, AddScaledArgs<double>) { add_scaled_k(a); }

template <typename T> struct SkewArgs { i64 r; const T *b; double *y; const double *lr; }; // from backend/gen/args_table.go
template <typename T, typename U> __device__ void skew_k(const SkewArgs<T> &a) {
  double lr = a.lr[0];
  U r = (U)a.r;
  GRID_LOOP_T(U, k, a.r * a.r) {
    U i = k / r, j = k % r;
    double omega = ((double)a.b[i * r + j] - (double)a.b[j * r + i]) / 2;
    double v = -lr * omega;
    a.y[k] = i == j ? v + 1 : v;
  }
}
KERNEL(on_skew_f32, SkewArgs<float>) { skew_k<float, i64>(a); }
KERNEL(on_skew_f64, SkewArgs<double>) { skew_k<double, i64>(a); }
KERNEL(on_skew_x32_f32, SkewArgs<float>) { skew_k<float, u32>(a); }
KERNEL(on_skew_x32_f64, SkewArgs<double>) { skew_k<double, u32>(a); }

template <typename T> struct DeltaArgs { i64 r; const double *y; T *dst; }; // from backend/gen/args_table.go
template <typename T, typename U> __device__ void delta_k(const DeltaArgs<T> &a) {
  U r = (U)a.r;
  GRID_LOOP_T(U, k, a.r * a.r) {
    U i = k / r, j = k % r;
    a.dst[k] = i == j ? (T)(a.y[k] - 1) : (T)a.y[k];
  }
}
KERNEL(on_identity_delta_f32, DeltaArgs<float>) { delta_k<float, i64>(a); }
KERNEL(on_identity_delta_f64, DeltaArgs<double>) { delta_k<double, i64>(a); }
KERNEL(on_identity_delta_x32_f32, DeltaArgs<float>) { delta_k<float, u32>(a); }
KERNEL(on_identity_delta_x32_f64, DeltaArgs<double>) { delta_k<double, u32>(a); }

template <typename T> struct SymArgs { i64 n; T *a; }; // from backend/gen/args_table.go
template <typename T, typename U> __device__ void sym_k(const SymArgs<T> &a) {
  U n = (U)a.n;
  GRID_LOOP_T(U, k, a.n * a.n) {
    U i = k / n, j = k % n;
    if (i < j) {
      T m = (a.a[i * n + j] + a.a[j * n + i]) / (T)2;
      a.a[i * n + j] = m;
      a.a[j * n + i] = m;
    }
  }
}
KERNEL(on_symmetrize_f32, SymArgs<float>) { sym_k<float, i64>(a); }
KERNEL(on_symmetrize_f64, SymArgs<double>) { sym_k<double, i64>(a); }
KERNEL(on_symmetrize_x32_f32, SymArgs<float>) { sym_k<float, u32>(a); }
KERNEL(on_symmetrize_x32_f64, SymArgs<double>) { sym_k<double, u32>(a); }

// ---- random draws (backend/random.go) -----------------------------------------------------------

// Dropout masks: backend.DropoutDraw, bit for bit.
__device__ __forceinline__ u64 mix64(u64 z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T> struct MaskArgs { i64 n; double p; u64 seed, stream; const double *step; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void mask_k(const MaskArgs<T> &a) {
  u64 h = mix64(mix64(mix64(a.seed) ^ a.stream) ^ (u64)a.step[0]);
  T keep = (T)(1 / (1 - a.p));
  // u = k 2^-53 >= p, k the top 53 bits of the draw, is k >= p 2^53 (exact
  // in double), that is k >= ceil(p 2^53): the draw compared as an integer.
  u64 least = (u64)ceil(a.p * 0x1p53); // p is in [0, 1) (backend.DropoutMask.Check)
  GRID_LOOP(i, a.n) a.dst[i] = (mix64(h ^ (u64)i) >> 11) >= least ? keep : (T)0;
}
KERNEL(on_dropout_mask_f32, MaskArgs<float>) { mask_k(a); }
KERNEL(on_dropout_mask_f64, MaskArgs<double>) { mask_k(a); }

// Gorgonia's dropout and random nodes (backend.Dropout, backend.Random).
//
// The draws are backend.RandomDraw's bit for bit: mix64 as above, and
// arithmetic in +, -, *, / and sqrt alone, each correctly rounded (NVRTC
// runs with --fmad=false, the host model has no fused multiply-add), in the
// order of the Go code.

// unit_draw is draw i of a stream of key key, uniform in [0, 1).
__device__ __forceinline__ double unit_draw(u64 key, u64 i) { return (double)(mix64(key ^ i) >> 11) * 0x1p-53; }

// stream_key is the key of stream stream at step step of a run seeded seed.
__device__ __forceinline__ u64 stream_key(u64 seed, u64 stream, u64 step) { return mix64(mix64(mix64(seed) ^ stream) ^ step); }

// dropout: y = x / (1 - p) where the draw is at least p, else 0.
template <typename T> struct DropArgs { i64 n; double p; u64 seed, stream; const double *step; const T *x; T *y; }; // from backend/gen/args_table.go
template <typename T> __device__ void dropout_k(const DropArgs<T> &a) {
  u64 key = stream_key(a.seed, a.stream, (u64)a.step[0]);
  T keep = (T)(1 - a.p);
  u64 least = (u64)ceil(a.p * 0x1p53); // the draw compared as an integer, as in mask_k
  GRID_LOOP(i, a.n) a.y[i] = (mix64(key ^ (u64)i) >> 11) >= least ? a.x[i] / keep : (T)0;
}
KERNEL(on_dropout_f32, DropArgs<float>) { dropout_k(a); }
KERNEL(on_dropout_f64, DropArgs<double>) { dropout_k(a); }

// The series of backend's lnUnit and cos2pi (1/(2k+1); (-1)^k/(2k)!;
// (-1)^k/(2k+1)!), their constants, and Horner's rule.
__device__ const double ln_series[12] = {0x1p+00, 0x1.5555555555555p-02, 0x1.999999999999ap-03, 0x1.2492492492492p-03,
  0x1.c71c71c71c71cp-04, 0x1.745d1745d1746p-04, 0x1.3b13b13b13b14p-04, 0x1.1111111111111p-04,
  0x1.e1e1e1e1e1e1ep-05, 0x1.af286bca1af28p-05, 0x1.8618618618618p-05, 0x1.642c8590b2164p-05};
__device__ const double cos_series[11] = {0x1p+00, -0x1p-01, 0x1.5555555555555p-05, -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
  -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-45,
  -0x1.6827863b97d97p-53, 0x1.e542ba4020225p-62};
__device__ const double sin_series[11] = {0x1p+00, -0x1.5555555555555p-03, 0x1.1111111111111p-07, -0x1.a01a01a01a01ap-13,
  0x1.71de3a556c734p-19, -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33, -0x1.ae7f3e733b81fp-41,
  0x1.952c77030ad4ap-49, -0x1.2f49b46814157p-57, 0x1.71b8ef6dcf572p-66};
#define RND_SQRT2 0x1.6a09e667f3bcdp+00
#define RND_LN2_HI 0x1.62e42feep-01
#define RND_LN2_LO 0x1.a39ef35793c76p-33
#define RND_TWO_PI 0x1.921fb54442d18p+02

__device__ __forceinline__ double horner(const double *c, int n, double z) {
  double p = c[n - 1];
  for (int k = n - 2; k >= 0; k--) p = p * z + c[k];
  return p;
}

// ln_unit is ln(u) for u in [2^-53, 1]: u = m 2^e, m in [sqrt(1/2), sqrt(2)].
__device__ double ln_unit(double u) {
  u64 bits = abs_bits(u); // u is positive
  i64 e = (i64)(bits >> 52) - 1023;
  double m = bits_value((bits & ((1ULL << 52) - 1)) | (1023ULL << 52), 0.0);
  if (m > RND_SQRT2) {
    m *= 0.5;
    e++;
  }
  double s = (m - 1) / (m + 1), fe = (double)e;
  return fe * RND_LN2_HI + (fe * RND_LN2_LO + (2 * s) * horner(ln_series, 12, s * s));
}

// cos_2pi is cos(2 pi t) for t in [0, 1), reduced exactly to [0, 1/8].
__device__ double cos_2pi(double t) {
  double a = t, sign = 1;
  if (a > 0.5) a = 1 - a;
  if (a > 0.25) {
    a = 0.5 - a;
    sign = -1;
  }
  if (a > 0.125) {
    double x = RND_TWO_PI * (0.25 - a);
    return sign * (x * horner(sin_series, 11, x * x));
  }
  double x = RND_TWO_PI * a;
  return sign * horner(cos_series, 11, x * x);
}

// random: dist 1 uniform on [a, b), 2 normal of mean a and deviation b
// (Box-Muller), 3 binomial of a trials of probability b.
template <typename T> struct RandomArgs { i64 dist, n; double a, b; u64 seed, stream; const double *step; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void random_k(const RandomArgs<T> &a) {
  u64 key = stream_key(a.seed, a.stream, (u64)a.step[0]);
  GRID_LOOP(i, a.n) {
    u64 u = (u64)i;
    double v;
    if (a.dist == 1) {
      v = a.a + (a.b - a.a) * unit_draw(key, u);
    } else if (a.dist == 2) {
      double r = sqrt(-2 * ln_unit(1 - unit_draw(key, 2 * u)));
      v = a.a + a.b * (r * cos_2pi(unit_draw(key, 2 * u + 1)));
    } else {
      u64 trials = (u64)a.a, hits = 0;
      for (u64 j = 0; j < trials; j++) hits += unit_draw(key, u * trials + j) < a.b ? 1 : 0;
      v = (double)hits;
    }
    a.dst[i] = (T)v;
  }
}
KERNEL(on_random_f32, RandomArgs<float>) { random_k(a); }
KERNEL(on_random_f64, RandomArgs<double>) { random_k(a); }

// ---- batch normalization (backend/norm.go) ------------------------------------------------------

// bn_at is the index of value j (of batch * spatial) of channel ch in a
// row-major (batch, c, spatial) array.
__device__ __forceinline__ i64 bn_at(i64 j, i64 ch, i64 c, i64 spatial) { return (j / spatial * c + ch) * spatial + j % spatial; }

// bn_stats takes a block per channel ch: its mean and 1/sqrt(var + eps)
// (the biased variance) into st[4ch] and st[4ch+1], in double; without dy
// the sum of squared deviations into st[4ch+2], with dy the sums of dy and
// of (x - mean) dy into st[4ch+2] and st[4ch+3]. With update, the running
// mean and (unbiased) variance move towards the batch's by momentum.
template <typename T> struct BNStatsArgs { i64 batch, c, spatial; i64 update; double momentum, eps; const T *x; const T *dy; T *mean; T *var; double *st; }; // from backend/gen/args_table.go
template <typename T> __device__ void bn_stats_k(const BNStatsArgs<T> &a) {
  SHARED(double, sh, NT);
  i64 n = a.batch * a.spatial;
  for (i64 ch = blockIdx.x; ch < a.c; ch += gridDim.x) {
    double s = 0;
    for (i64 j = threadIdx.x; j < n; j += NT) s += (double)a.x[bn_at(j, ch, a.c, a.spatial)];
    double mean = block_sum(s, sh) / (double)n;
    double v = 0;
    for (i64 j = threadIdx.x; j < n; j += NT) {
      double d = (double)a.x[bn_at(j, ch, a.c, a.spatial)] - mean;
      v += d * d;
    }
    double ss = block_sum(v, sh), g = 0, gd = 0;
    if (a.dy) { // the same for every thread of the block
      for (i64 j = threadIdx.x; j < n; j += NT) {
        i64 i = bn_at(j, ch, a.c, a.spatial);
        double d = (double)a.dy[i];
        g += d;
        gd += ((double)a.x[i] - mean) * d;
      }
      g = block_sum(g, sh);
      gd = block_sum(gd, sh);
    }
    if (threadIdx.x == 0) {
      a.st[4 * ch] = mean;
      a.st[4 * ch + 1] = 1 / sqrt(ss / (double)n + a.eps);
      a.st[4 * ch + 2] = a.dy ? g : ss;
      a.st[4 * ch + 3] = gd;
      if (a.update) {
        a.mean[ch] = (T)(a.momentum * mean + (1 - a.momentum) * (double)a.mean[ch]);
        a.var[ch] = (T)(a.momentum * (ss / (double)(n - 1)) + (1 - a.momentum) * (double)a.var[ch]);
      }
    }
  }
}
KERNEL_SYNC(on_batch_norm_stats_f32, BNStatsArgs<float>) { bn_stats_k(a); }
KERNEL_SYNC(on_batch_norm_stats_f64, BNStatsArgs<double>) { bn_stats_k(a); }

// bn_running: the running mean (where there is one) and 1/sqrt(var + eps)
// into st as bn_stats lays them out.
template <typename T> struct BNRunArgs { i64 c; double eps; const T *mean; const T *var; double *st; }; // from backend/gen/args_table.go
template <typename T> __device__ void bn_running_k(const BNRunArgs<T> &a) {
  GRID_LOOP(ch, a.c) {
    if (a.mean) a.st[4 * ch] = (double)a.mean[ch];
    a.st[4 * ch + 1] = 1 / sqrt((double)a.var[ch] + a.eps);
  }
}
KERNEL(on_batch_norm_running_f32, BNRunArgs<float>) { bn_running_k(a); }
KERNEL(on_batch_norm_running_f64, BNRunArgs<double>) { bn_running_k(a); }

// bn_apply: y = (x - mean) rstd, in the element type.
template <typename T> struct BNApplyArgs { i64 n, c, spatial; const T *x; const double *st; T *y; }; // from backend/gen/args_table.go
template <typename T> __device__ void bn_apply_k(const BNApplyArgs<T> &a) {
  GRID_LOOP(i, a.n) {
    i64 ch = i / a.spatial % a.c;
    T m = (T)a.st[4 * ch], rs = (T)a.st[4 * ch + 1];
    a.y[i] = (a.x[i] - m) * rs;
  }
}
KERNEL(on_batch_norm_apply_f32, BNApplyArgs<float>) { bn_apply_k(a); }
KERNEL(on_batch_norm_apply_f64, BNApplyArgs<double>) { bn_apply_k(a); }

// bn_grad_apply: in training dx = (dy - sum(dy)/n - (x - mean) k) rstd with
// k = sum((x - mean) dy) rstd^2 / n, in inference dx = dy rstd.
template <typename T> struct BNGradArgs { i64 n, c, spatial; i64 training; const T *x; const T *dy; const double *st; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ void bn_grad_apply_k(const BNGradArgs<T> &a) {
  double count = (double)(a.n / a.c);
  GRID_LOOP(i, a.n) {
    i64 ch = i / a.spatial % a.c;
    const double *st = a.st + 4 * ch;
    T rs = (T)st[1];
    if (!a.training) {
      a.dx[i] = a.dy[i] * rs;
      continue;
    }
    T m = (T)st[0], gm = (T)(st[2] / count), k = (T)(st[3] * st[1] * st[1] / count);
    a.dx[i] = (a.dy[i] - gm - (a.x[i] - m) * k) * rs;
  }
}
KERNEL(on_batch_norm_grad_apply_f32, BNGradArgs<float>) { bn_grad_apply_k(a); }
KERNEL(on_batch_norm_grad_apply_f64, BNGradArgs<double>) { bn_grad_apply_k(a); }

// ---- convolutions and pooling (backend/conv.go, backend/pooling.go) -----------------------------

__device__ __forceinline__ i64 imin(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 imax(i64 a, i64 b) { return a > b ? a : b; }

// The geometry of a convolution as gorgonia's im2col takes it (backend.ConvGeom),
// with its output's height and width.
struct ConvGeom { i64 b, c, h, w, kh, kw, padh, padw, strideh, stridew, dilh, dilw, oh, ow; }; // from backend/gen/args_table.go

// unfold writes the windows of n images of x into col: tap k = (c kh + i) kw + j
// of output position p of image n at n sj + k sk + p sp, 0 in the padding.
template <typename T> struct UnfoldArgs { ConvGeom g; i64 n, sj, sk, sp; const T *x; T *col; }; // from backend/gen/args_table.go
template <typename T> __device__ void unfold_k(const UnfoldArgs<T> &a) {
  const ConvGeom &g = a.g;
  i64 p = g.oh * g.ow, kk = g.c * g.kh * g.kw;
  GRID_LOOP(i, a.n * kk * p) {
    i64 q = i % p, k = (i / p) % kk, j = i / (p * kk);
    i64 c = k / (g.kh * g.kw), ki = (k / g.kw) % g.kh, kj = k % g.kw;
    i64 r = (q / g.ow) * g.strideh - g.padh + ki * g.dilh, s = (q % g.ow) * g.stridew - g.padw + kj * g.dilw;
    T v = (T)0;
    if (r >= 0 && r < g.h && s >= 0 && s < g.w) v = a.x[((j * g.c + c) * g.h + r) * g.w + s];
    a.col[j * a.sj + k * a.sk + q * a.sp] = v;
  }
}
KERNEL(on_unfold_f32, UnfoldArgs<float>) { unfold_k(a); }
KERNEL(on_unfold_f64, UnfoldArgs<double>) { unfold_k(a); }

// fold writes into every element of n images of dx the sum of its taps in col
// (unfold's layout), in the order of their output positions.
template <typename T> struct FoldArgs { ConvGeom g; i64 n, sj, sk, sp; const T *col; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ void fold_k(const FoldArgs<T> &a) {
  const ConvGeom &g = a.g;
  GRID_LOOP(i, a.n * g.c * g.h * g.w) {
    i64 s = i % g.w, r = (i / g.w) % g.h, c = (i / (g.w * g.h)) % g.c, j = i / (g.w * g.h * g.c);
    T sum = (T)0;
    for (i64 ki = g.kh - 1; ki >= 0; ki--) {
      i64 ty = r + g.padh - ki * g.dilh;
      if (ty < 0 || ty % g.strideh != 0 || ty / g.strideh >= g.oh) continue;
      for (i64 kj = g.kw - 1; kj >= 0; kj--) {
        i64 tx = s + g.padw - kj * g.dilw;
        if (tx < 0 || tx % g.stridew != 0 || tx / g.stridew >= g.ow) continue;
        i64 k = (c * g.kh + ki) * g.kw + kj, q = (ty / g.strideh) * g.ow + tx / g.stridew;
        sum += a.col[j * a.sj + k * a.sk + q * a.sp];
      }
    }
    a.dx[i] = sum;
  }
}
KERNEL(on_fold_f32, FoldArgs<float>) { fold_k(a); }
KERNEL(on_fold_f64, FoldArgs<double>) { fold_k(a); }

// gather_planes copies the (n, f, p) array src into the f x (n p) matrix dst.
template <typename T> struct GatherPlanesArgs { i64 n, f, p; const T *src; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void gather_planes_k(const GatherPlanesArgs<T> &a) {
  GRID_LOOP(i, a.n * a.f * a.p) {
    i64 q = i % a.p, r = (i / a.p) % a.f, j = i / (a.p * a.f);
    a.dst[r * a.n * a.p + j * a.p + q] = a.src[i];
  }
}
KERNEL(on_gather_planes_f32, GatherPlanesArgs<float>) { gather_planes_k(a); }
KERNEL(on_gather_planes_f64, GatherPlanesArgs<double>) { gather_planes_k(a); }

// The geometry of a pooling (backend.PoolGeom).
struct PoolGeom { i64 b, c, h, w, kh, kw, padh, padw, strideh, stridew, oh, ow; }; // from backend/gen/args_table.go

__device__ __forceinline__ float lowest(float) { return -3.40282346638528859811704183484516925440e+38f; }
__device__ __forceinline__ double lowest(double) { return -1.797693134862315708145274237317043567981e+308; }

// pool_window sets [h0, h1) x [w0, w1) to output (y, x)'s window.
__device__ __forceinline__ void pool_window(const PoolGeom &g, i64 y, i64 x, i64 &h0, i64 &h1, i64 &w0, i64 &w1) {
  h0 = y * g.strideh - g.padh;
  w0 = x * g.stridew - g.padw;
  h1 = imin(h0 + g.kh, g.h);
  w1 = imin(w0 + g.kw, g.w);
  h0 = imax(h0, 0);
  w0 = imax(w0, 0);
}

// rectify is gorgonia.Rectify's x times (x >= 0): x, or -0 (NaN for NaN and
// -Inf); step its mask.
template <typename T> __device__ __forceinline__ T rectify(T x) { return x >= (T)0 ? x : x * (T)0; }
template <typename T> __device__ __forceinline__ T step(T x) { return x >= (T)0 ? (T)1 : (T)0; }

// pool_max returns window (y, x)'s largest element (rectified first with
// rect) above the lowest finite value (NaNs never), or that value.
template <typename T> __device__ T pool_max(const PoolGeom &g, bool rect, const T *plane, i64 y, i64 x) {
  i64 h0, h1, w0, w1;
  pool_window(g, y, x, h0, h1, w0, w1);
  T m = lowest(T());
  for (i64 r = h0; r < h1; r++)
    for (i64 s = w0; s < w1; s++) {
      T v = rect ? rectify(plane[r * g.w + s]) : plane[r * g.w + s];
      if (v > m) m = v;
    }
  return m;
}

template <typename T> struct MaxPoolArgs { PoolGeom g; i64 rect; const T *x; T *y; }; // from backend/gen/args_table.go
template <typename T> __device__ void max_pool_k(const MaxPoolArgs<T> &a) {
  const PoolGeom &g = a.g;
  GRID_LOOP(i, g.b * g.c * g.oh * g.ow) {
    i64 pl = i / (g.oh * g.ow), q = i % (g.oh * g.ow);
    a.y[i] = pool_max(g, a.rect != 0, a.x + pl * g.h * g.w, q / g.ow, q % g.ow);
  }
}
KERNEL(on_max_pool_f32, MaxPoolArgs<float>) { max_pool_k(a); }
KERNEL(on_max_pool_f64, MaxPoolArgs<double>) { max_pool_k(a); }

// max_pool_grad: a thread per input element sums, in the order of the
// windows, the gradients of those that took it: whose output y it is the
// first element equal to (none where y is the lowest finite value); with
// rect, the elements rectified and the sum times their step.
template <typename T> struct MaxPoolGradArgs { PoolGeom g; i64 rect; const T *x; const T *y; const T *dy; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ void max_pool_grad_k(const MaxPoolGradArgs<T> &a) {
  const PoolGeom &g = a.g;
  bool rect = a.rect != 0;
  GRID_LOOP(i, g.b * g.c * g.h * g.w) {
    i64 pl = i / (g.h * g.w), e = i % (g.h * g.w), r = e / g.w, s = e % g.w;
    const T *plane = a.x + pl * g.h * g.w;
    const T *y = a.y + pl * g.oh * g.ow, *dy = a.dy + pl * g.oh * g.ow;
    i64 ly = r + g.padh - g.kh + 1, lx = s + g.padw - g.kw + 1;
    i64 y0 = ly <= 0 ? 0 : (ly + g.strideh - 1) / g.strideh, y1 = imin(g.oh - 1, (r + g.padh) / g.strideh);
    i64 x0 = lx <= 0 ? 0 : (lx + g.stridew - 1) / g.stridew, x1 = imin(g.ow - 1, (s + g.padw) / g.stridew);
    T sum = (T)0, v = rect ? rectify(plane[e]) : plane[e];
    for (i64 oy = y0; oy <= y1; oy++)
      for (i64 ox = x0; ox <= x1; ox++) {
        T m = y[oy * g.ow + ox];
        if (v != m || m == lowest(T())) continue;
        // Taken unless an element before it in the window equals m too.
        i64 h0, h1, w0, w1;
        pool_window(g, oy, ox, h0, h1, w0, w1);
        bool first = true;
        for (i64 q = h0; q <= r && first; q++)
          for (i64 t = w0; t < (q == r ? s : w1); t++)
            if ((rect ? rectify(plane[q * g.w + t]) : plane[q * g.w + t]) == m) {
              first = false;
              break;
            }
        if (first) sum += dy[oy * g.ow + ox];
      }
    a.dx[i] = rect ? sum * step(plane[e]) : sum;
  }
}
KERNEL(on_max_pool_grad_f32, MaxPoolGradArgs<float>) { max_pool_grad_k(a); }
KERNEL(on_max_pool_grad_f64, MaxPoolGradArgs<double>) { max_pool_grad_k(a); }

// window_sum adds window (y, x) of plane in row-major order, in T.
template <typename T> __device__ T window_sum(const PoolGeom &g, const T *plane, i64 y, i64 x) {
  i64 h0, h1, w0, w1;
  pool_window(g, y, x, h0, h1, w0, w1);
  T s = (T)0;
  for (i64 r = h0; r < h1; r++)
    for (i64 c = w0; c < w1; c++) s += plane[r * g.w + c];
  return s;
}

// avg_pool: gorgonia's average, the window's sum over the input's width.
template <typename T> struct PoolArgs { PoolGeom g; const T *x; T *y; }; // from backend/gen/args_table.go
template <typename T> __device__ void avg_pool_k(const PoolArgs<T> &a) {
  const PoolGeom &g = a.g;
  GRID_LOOP(i, g.b * g.c * g.oh * g.ow) {
    i64 pl = i / (g.oh * g.ow), q = i % (g.oh * g.ow);
    a.y[i] = window_sum(g, a.x + pl * g.h * g.w, q / g.ow, q % g.ow) / (T)g.w;
  }
}
KERNEL(on_avg_pool_f32, PoolArgs<float>) { avg_pool_k(a); }
KERNEL(on_avg_pool_f64, PoolArgs<double>) { avg_pool_k(a); }

// avg_pool_grad: gorgonia's avgPoolDiffOp (backend.AvgPoolGrad), a thread per
// plane, for its second pass reads what it has written.
template <typename T> struct AvgPoolGradArgs { PoolGeom g; const T *dy; T *dx; }; // from backend/gen/args_table.go
template <typename T> __device__ void avg_pool_grad_k(const AvgPoolGradArgs<T> &a) {
  const PoolGeom &g = a.g;
  GRID_LOOP(pl, g.b * g.c) {
    const T *dy = a.dy + pl * g.oh * g.ow;
    T *dx = a.dx + pl * g.h * g.w;
    for (i64 e = 0; e < g.h * g.w; e++) dx[e] = (T)0;
    for (i64 y = 0; y < g.oh; y++)
      for (i64 x = 0; x < g.ow; x++) {
        i64 h0, h1, w0, w1;
        pool_window(g, y, x, h0, h1, w0, w1);
        if (h0 < h1 && w0 < w1) dx[(h1 - 1) * g.w + w1 - 1] += dy[y * g.ow + x];
      }
    for (i64 r = 0; r < g.h; r++)
      for (i64 s = 0; s < g.w; s++) dx[r * g.w + s] = window_sum(g, (const T *)dx, r, s) / (T)g.w;
  }
}
KERNEL(on_avg_pool_grad_f32, AvgPoolGradArgs<float>) { avg_pool_grad_k(a); }
KERNEL(on_avg_pool_grad_f64, AvgPoolGradArgs<double>) { avg_pool_grad_k(a); }

// ---- a convolution's output biased, rectified, max pooled and dropped out (backend/convpool.go) ----
//
// conv_pool pools n images' convolution outputs c (n, f, h, w), a thread per
// pooled element: the bias (where there is one) added, rectified, the
// window's largest element and the first element equal to it recorded in arg
// (pos<<2 | step<<1 | keep, or -1), then dropped out with the draws of
// pooled element base + i, as the CPU computes them.
template <typename T> struct ConvPoolArgs { PoolGeom g; i64 n, base; double p; u64 seed, stream; const double *step; const T *c; const T *bias; T *y; int *arg; }; // from backend/gen/args_table.go
template <typename T> __device__ void conv_pool_k(const ConvPoolArgs<T> &a) {
  const PoolGeom &g = a.g;
  bool drop = a.p > 0;
  u64 key = drop ? stream_key(a.seed, a.stream, (u64)a.step[0]) : 0;
  u64 least = (u64)ceil(a.p * 0x1p53);
  T keep = (T)(1 - a.p);
  i64 op = g.oh * g.ow;
  GRID_LOOP(i, a.n * g.c * op) {
    i64 pl = i / op, q = i % op;
    const T *plane = a.c + pl * g.h * g.w;
    bool biased = a.bias != 0;
    T b = biased ? a.bias[pl % g.c] : (T)0;
    i64 h0, h1, w0, w1;
    pool_window(g, q / g.ow, q % g.ow, h0, h1, w0, w1);
    T m = lowest(T());
    for (i64 r = h0; r < h1; r++)
      for (i64 s = w0; s < w1; s++) {
        T v = rectify(biased ? plane[r * g.w + s] + b : plane[r * g.w + s]);
        if (v > m) m = v;
      }
    int arg = -1;
    if (m != lowest(T()))
      for (i64 r = h0; r < h1 && arg < 0; r++)
        for (i64 s = w0; s < w1; s++) {
          T x = biased ? plane[r * g.w + s] + b : plane[r * g.w + s];
          if (rectify(x) == m) {
            arg = (int)((r * g.w + s) << 2) | (x >= (T)0 ? 2 : 0) | 1;
            break;
          }
        }
    if (drop) {
      bool kept = (mix64(key ^ (u64)(a.base + i)) >> 11) >= least;
      m = kept ? m / keep : (T)0;
      if (!kept && arg >= 0) arg &= ~1;
    }
    a.y[i] = m;
    if (a.arg) a.arg[i] = arg;
  }
}
KERNEL(on_conv_pool_f32, ConvPoolArgs<float>) { conv_pool_k(a); }
KERNEL(on_conv_pool_f64, ConvPoolArgs<double>) { conv_pool_k(a); }

// pool_routed is what a pooled element's gradient dy adds at the element its
// arg (>= 0) records: dy over 1 - p (0 where dropped; dy as it is without
// dropout), times the step.
template <typename T> __device__ __forceinline__ T pool_routed(T dy, int arg, double p) {
  if (p > 0) dy = (arg & 1) ? dy / (T)(1 - p) : (T)0;
  return dy * (T)((arg >> 1) & 1);
}

// pool_route writes the gradients of n images' convolution outputs from the
// gradients dy of their pooled elements and conv_pool's arg: a thread per
// element (plane f of image j at dst + j sj + f sf) sums, in the order of
// the windows, what those that took it route there.
template <typename T> struct PoolRouteArgs { PoolGeom g; i64 n, sj, sf; double p; const T *dy; const int *arg; T *dst; }; // from backend/gen/args_table.go
template <typename T> __device__ void pool_route_k(const PoolRouteArgs<T> &a) {
  const PoolGeom &g = a.g;
  GRID_LOOP(i, a.n * g.c * g.h * g.w) {
    i64 pl = i / (g.h * g.w), e = i % (g.h * g.w), r = e / g.w, s = e % g.w;
    const T *dy = a.dy + pl * g.oh * g.ow;
    const int *arg = a.arg + pl * g.oh * g.ow;
    i64 ly = r + g.padh - g.kh + 1, lx = s + g.padw - g.kw + 1;
    i64 y0 = ly <= 0 ? 0 : (ly + g.strideh - 1) / g.strideh, y1 = imin(g.oh - 1, (r + g.padh) / g.strideh);
    i64 x0 = lx <= 0 ? 0 : (lx + g.stridew - 1) / g.stridew, x1 = imin(g.ow - 1, (s + g.padw) / g.stridew);
    T sum = (T)0;
    for (i64 oy = y0; oy <= y1; oy++)
      for (i64 ox = x0; ox <= x1; ox++) {
        int v = arg[oy * g.ow + ox];
        if (v >= 0 && (i64)(v >> 2) == e) sum += pool_routed(dy[oy * g.ow + ox], v, a.p);
      }
    a.dst[(pl / g.c) * a.sj + (pl % g.c) * a.sf + e] = sum;
  }
}
KERNEL(on_pool_route_f32, PoolRouteArgs<float>) { pool_route_k(a); }
KERNEL(on_pool_route_f64, PoolRouteArgs<double>) { pool_route_k(a); }

// pool_bias_grad: a thread per filter sums what the pooled elements' gradients
// route to its outputs, image by image in the order of the elements.
template <typename T> struct PoolBiasGradArgs { PoolGeom g; double p; const T *dy; const int *arg; T *db; }; // from backend/gen/args_table.go
template <typename T> __device__ void pool_bias_grad_k(const PoolBiasGradArgs<T> &a) {
  const PoolGeom &g = a.g;
  i64 op = g.oh * g.ow;
  GRID_LOOP(f, g.c) {
    T sum = (T)0;
    for (i64 b = 0; b < g.b; b++) {
      i64 o = (b * g.c + f) * op;
      for (i64 q = 0; q < op; q++)
        if (a.arg[o + q] >= 0) sum += pool_routed(a.dy[o + q], a.arg[o + q], a.p);
    }
    a.db[f] = sum;
  }
}
KERNEL(on_pool_bias_grad_f32, PoolBiasGradArgs<float>) { pool_bias_grad_k(a); }
KERNEL(on_pool_bias_grad_f64, PoolBiasGradArgs<double>) { pool_bias_grad_k(a); }
