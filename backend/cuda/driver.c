// The driver, cuBLAS, cuSOLVER and NVRTC calls of the CUDA backend (see
// driver.go), through the function table that load.go fills.
#include "driver.h"

#include <stdlib.h>

// Status codes of the libraries other than the driver are told apart by an
// offset: cuBLAS 100000, cuSOLVER 200000, NVRTC 300000.
#define BLAS(s) ((s) == CUBLAS_STATUS_SUCCESS ? 0 : 100000 + (int)(s))
#define SOLVER(s) ((s) == CUSOLVER_STATUS_SUCCESS ? 0 : 200000 + (int)(s))

int on_init(const on_api *A, int ordinal, CUdevice *dev, CUcontext *ctx, CUstream *stream, cublasHandle_t *blas) {
  CUresult r;
  if ((r = A->cuInit(0))) return r;
  if ((r = A->cuDeviceGet(dev, ordinal))) return r;
  if ((r = A->cuDevicePrimaryCtxRetain(ctx, *dev))) return r;
  // From here a failure releases what was made before it.
  if ((r = A->cuCtxSetCurrent(*ctx)) || (r = A->cuStreamCreate(stream, CU_STREAM_NON_BLOCKING))) {
    A->cuDevicePrimaryCtxRelease_v2(*dev);
    return r;
  }
  cublasStatus_t s = A->cublasCreate_v2(blas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    A->cuStreamDestroy_v2(*stream);
    A->cuDevicePrimaryCtxRelease_v2(*dev);
    return BLAS(s);
  }
  s = A->cublasSetStream_v2(*blas, *stream);
  if (s == CUBLAS_STATUS_SUCCESS) s = A->cublasSetMathMode(*blas, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) {
    A->cublasDestroy_v2(*blas);
    A->cuStreamDestroy_v2(*stream);
    A->cuDevicePrimaryCtxRelease_v2(*dev);
    return BLAS(s);
  }
  return 0;
}

// on_close releases the stream, the cuBLAS handle and the context; the
// caller has waited for the stream.
int on_close(const on_api *A, CUdevice dev, CUcontext ctx, CUstream stream, cublasHandle_t blas) {
  A->cuCtxSetCurrent(ctx);
  A->cublasDestroy_v2(blas);
  A->cuStreamDestroy_v2(stream);
  return A->cuDevicePrimaryCtxRelease_v2(dev);
}

int on_alloc(const on_api *A, CUcontext ctx, CUstream stream, size_t bytes, CUdeviceptr *p) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  if ((r = A->cuMemAlloc_v2(p, bytes))) return r;
  return A->cuMemsetD8Async(*p, 0, bytes, stream);
}

int on_free(const on_api *A, CUcontext ctx, CUdeviceptr p) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuMemFree_v2(p);
}

int on_host_alloc(const on_api *A, CUcontext ctx, size_t bytes, void **p) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuMemHostAlloc(p, bytes, 0);
}

int on_host_free(const on_api *A, CUcontext ctx, void *p) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuMemFreeHost(p);
}

int on_event(const on_api *A, CUcontext ctx, CUevent *e) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuEventCreate(e, CU_EVENT_DISABLE_TIMING);
}

int on_event_sync(const on_api *A, CUcontext ctx, CUevent e) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuEventSynchronize(e);
}

int on_htod(const on_api *A, CUcontext ctx, CUstream stream, CUevent done, CUdeviceptr dst, const void *src,
            size_t bytes) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  if ((r = A->cuMemcpyHtoDAsync_v2(dst, src, bytes, stream))) return r;
  return A->cuEventRecord(done, stream);
}

// on_dtoh copies bytes from src and the fault words from fault into host
// memory, then waits for the stream.
int on_dtoh(const on_api *A, CUcontext ctx, CUstream stream, void *dst, CUdeviceptr src, size_t bytes, void *faultHost,
            CUdeviceptr fault) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  if (bytes && (r = A->cuMemcpyDtoHAsync_v2(dst, src, bytes, stream))) return r;
  if ((r = A->cuMemcpyDtoHAsync_v2(faultHost, fault, 32, stream))) return r;
  return A->cuStreamSynchronize(stream);
}

int on_load(const on_api *A, CUcontext ctx, const void *image, CUmodule *m) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuModuleLoadData(m, image);
}

int on_function(const on_api *A, CUcontext ctx, CUmodule m, const char *name, CUfunction *f) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuModuleGetFunction(f, m, name);
}

int on_unload(const on_api *A, CUcontext ctx, CUmodule m) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuModuleUnload(m);
}

// on_launch passes the argument struct as one buffer with its size, which
// the driver checks against the kernel's parameters.
int on_launch(const on_api *A, CUcontext ctx, CUstream stream, CUfunction f, unsigned grid, unsigned block, void *args,
              size_t bytes) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
  return A->cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, NULL, extra);
}

int on_gemm(const on_api *A, CUcontext ctx, cublasHandle_t h, int f64, int ta, int tb, int m, int n, int k, double alpha,
            CUdeviceptr a, int lda, long long sa, CUdeviceptr b, int ldb, long long sb, double beta, CUdeviceptr c,
            int ldc, long long sc, int batch) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  int oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t s;
  if (f64) {
    s = A->cublasDgemmStridedBatched(h, oa, ob, m, n, k, &alpha, (const double *)a, lda, sa, (const double *)b, ldb, sb,
                                     &beta, (double *)c, ldc, sc, batch);
  } else {
    float fa = (float)alpha, fb = (float)beta;
    s = A->cublasSgemmStridedBatched(h, oa, ob, m, n, k, &fa, (const float *)a, lda, sa, (const float *)b, ldb, sb, &fb,
                                     (float *)c, ldc, sc, batch);
  }
  return BLAS(s);
}

int on_mem_info(const on_api *A, CUcontext ctx, size_t *free, size_t *total) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuMemGetInfo_v2(free, total);
}

const char *on_error_name(const on_api *A, int r) {
  const char *s = NULL;
  if (r >= 300000) return A->nvrtcGetErrorString ? A->nvrtcGetErrorString(r - 300000) : "NVRTC error";
  if (r >= 200000) return "cuSOLVER error";
  if (r >= 100000) return "cuBLAS error";
  if (A->cuGetErrorName == NULL || A->cuGetErrorName((CUresult)r, &s) != CUDA_SUCCESS || s == NULL)
    return "unknown CUDA error";
  return s;
}

int on_timing_event(const on_api *A, CUcontext ctx, CUevent *e) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuEventCreate(e, CU_EVENT_DEFAULT);
}

int on_record(const on_api *A, CUcontext ctx, CUstream stream, CUevent e) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuEventRecord(e, stream);
}

int on_elapsed(const on_api *A, CUcontext ctx, CUevent start, CUevent end, float *ms) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuEventElapsedTime_v2(ms, start, end);
}

int on_event_destroy(const on_api *A, CUcontext ctx, CUevent e) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return A->cuEventDestroy_v2(e);
}

int on_solver(const on_api *A, CUcontext ctx, CUstream stream, cusolverDnHandle_t *handle) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  cusolverDnHandle_t h;
  cusolverStatus_t s = A->cusolverDnCreate(&h);
  if (s != CUSOLVER_STATUS_SUCCESS) return SOLVER(s);
  if ((s = A->cusolverDnSetStream(h, stream)) != CUSOLVER_STATUS_SUCCESS) {
    A->cusolverDnDestroy(h);
    return SOLVER(s);
  }
  *handle = h;
  return 0;
}

int on_solver_close(const on_api *A, CUcontext ctx, cusolverDnHandle_t handle) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  return SOLVER(A->cusolverDnDestroy(handle));
}

// on_potrf_size returns in *lwork the elements of workspace ?potrf needs
// for an n x n matrix (lower triangle) at a.
int on_potrf_size(const on_api *A, CUcontext ctx, cusolverDnHandle_t handle, int f64, int n, CUdeviceptr a, int *lwork) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  cusolverStatus_t s;
  if (f64)
    s = A->cusolverDnDpotrf_bufferSize(handle, CUBLAS_FILL_MODE_LOWER, n, (double *)a, n, lwork);
  else
    s = A->cusolverDnSpotrf_bufferSize(handle, CUBLAS_FILL_MODE_LOWER, n, (float *)a, n, lwork);
  return SOLVER(s);
}

int on_potrf(const on_api *A, CUcontext ctx, cusolverDnHandle_t handle, int f64, int n, CUdeviceptr a, CUdeviceptr work,
             int lwork, CUdeviceptr info) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  cusolverStatus_t s;
  if (f64)
    s = A->cusolverDnDpotrf(handle, CUBLAS_FILL_MODE_LOWER, n, (double *)a, n, (double *)work, lwork, (int *)info);
  else
    s = A->cusolverDnSpotrf(handle, CUBLAS_FILL_MODE_LOWER, n, (float *)a, n, (float *)work, lwork, (int *)info);
  return SOLVER(s);
}

// on_trsm solves, column-major, L X = B in place for the lower m x m L at a
// and the m x n B at b.
int on_trsm(const on_api *A, CUcontext ctx, cublasHandle_t h, int f64, int m, int n, CUdeviceptr a, CUdeviceptr b) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  cublasStatus_t s;
  if (f64) {
    double one = 1;
    s = A->cublasDtrsm_v2(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                          (const double *)a, m, (double *)b, m);
  } else {
    float one = 1;
    s = A->cublasStrsm_v2(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                          (const float *)a, m, (float *)b, m);
  }
  return BLAS(s);
}

int on_probe(const on_api *A, int ordinal, int *count, int *major, int *minor, char *name, int namelen, size_t *mem,
             int *driver) {
  CUresult r;
  CUdevice dev;
  if ((r = A->cuDriverGetVersion(driver))) return r;
  if ((r = A->cuInit(0))) return r;
  if ((r = A->cuDeviceGetCount(count))) return r;
  if (*count <= ordinal) return CUDA_ERROR_INVALID_DEVICE;
  if ((r = A->cuDeviceGet(&dev, ordinal))) return r;
  if ((r = A->cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))) return r;
  if ((r = A->cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))) return r;
  if ((r = A->cuDeviceGetName(name, namelen, dev))) return r;
  return A->cuDeviceTotalMem_v2(mem, dev);
}

// on_compile compiles src with NVRTC and returns in *out (malloc'd) the
// CUBIN, or the PTX when cubin is 0, and in *log (malloc'd, or NULL) the
// compiler's log. NVRTC's status is returned offset by 300000.
int on_compile(const on_api *A, const char *src, const char *const *opts, int nopts, int cubin, char **out, size_t *outlen,
               char **log) {
  nvrtcProgram p = NULL;
  nvrtcResult s = A->nvrtcCreateProgram(&p, src, "kernels.cu", 0, NULL, NULL);
  *out = NULL;
  *log = NULL;
  *outlen = 0;
  if (s) return 300000 + s;
  s = A->nvrtcCompileProgram(p, nopts, opts);
  size_t n = 0;
  if (A->nvrtcGetProgramLogSize(p, &n) == NVRTC_SUCCESS && n > 1 && (*log = malloc(n)) != NULL &&
      A->nvrtcGetProgramLog(p, *log) != NVRTC_SUCCESS) {
    free(*log);
    *log = NULL;
  }
  if (s == NVRTC_SUCCESS) s = cubin ? A->nvrtcGetCUBINSize(p, outlen) : A->nvrtcGetPTXSize(p, outlen);
  if (s == NVRTC_SUCCESS && (*out = malloc(*outlen ? *outlen : 1)) == NULL) s = NVRTC_ERROR_OUT_OF_MEMORY;
  if (s == NVRTC_SUCCESS) s = cubin ? A->nvrtcGetCUBIN(p, *out) : A->nvrtcGetPTX(p, *out);
  if (s != NVRTC_SUCCESS) {
    free(*out);
    *out = NULL;
    *outlen = 0;
  }
  A->nvrtcDestroyProgram(&p);
  return s ? 300000 + s : 0;
}

int on_driver_version(const on_api *A, int *v) { return A->cuDriverGetVersion(v); }

int on_nvrtc_version(const on_api *A, int *major, int *minor) { return A->nvrtcVersion(major, minor); }

// on_supported_archs writes up to cap of the architectures NVRTC compiles
// for (75 for sm_75, ...) into archs and their number into *n.
int on_supported_archs(const on_api *A, int *archs, int cap, int *n) {
  nvrtcResult s = A->nvrtcGetNumSupportedArchs(n);
  if (s) return 300000 + s;
  if (*n > cap) *n = cap;
  int all[256];
  if (*n > 256) *n = 256;
  int total = 0;
  A->nvrtcGetNumSupportedArchs(&total);
  if (total > 256) return 300000 + NVRTC_ERROR_INVALID_INPUT;
  if ((s = A->nvrtcGetSupportedArchs(all))) return 300000 + s;
  for (int i = 0; i < *n; i++) archs[i] = all[i];
  return 0;
}

// on_dtoh_many copies n ranges, bytes[i] from srcs[i], into host memory at
// dst, each from the next multiple of 8 bytes after the one before, and the
// fault words from fault, then waits for the stream once.
int on_dtoh_many(const on_api *A, CUcontext ctx, CUstream stream, char *dst, const CUdeviceptr *srcs,
                 const size_t *bytes, int n, void *faultHost, CUdeviceptr fault) {
  CUresult r;
  if ((r = A->cuCtxSetCurrent(ctx))) return r;
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    if (bytes[i] && (r = A->cuMemcpyDtoHAsync_v2(dst + off, srcs[i], bytes[i], stream))) return r;
    off += (bytes[i] + 7) / 8 * 8;
  }
  if ((r = A->cuMemcpyDtoHAsync_v2(faultHost, fault, 32, stream))) return r;
  return A->cuStreamSynchronize(stream);
}
