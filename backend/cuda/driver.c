//go:build gpu

// The driver and cuBLAS calls of the CUDA backend (see driver.go).
#include "driver.h"

#include <cusolverDn.h>

int on_init(int ordinal, CUdevice *dev, CUcontext *ctx, CUstream *stream, cublasHandle_t *blas, int *major, int *minor, char *name, int namelen) {
  CUresult r;
  if ((r = cuInit(0))) return r;
  if ((r = cuDeviceGet(dev, ordinal))) return r;
  if ((r = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *dev))) return r;
  if ((r = cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, *dev))) return r;
  if ((r = cuDeviceGetName(name, namelen, *dev))) return r;
  if ((r = cuDevicePrimaryCtxRetain(ctx, *dev))) return r;
  // From here a failure releases what was made before it.
  if ((r = cuCtxSetCurrent(*ctx)) || (r = cuStreamCreate(stream, CU_STREAM_NON_BLOCKING))) {
    cuDevicePrimaryCtxRelease(*dev);
    return r;
  }
  cublasStatus_t s = cublasCreate(blas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cuStreamDestroy(*stream);
    cuDevicePrimaryCtxRelease(*dev);
    return 100000 + (int)s;
  }
  s = cublasSetStream(*blas, *stream);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(*blas, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(*blas);
    cuStreamDestroy(*stream);
    cuDevicePrimaryCtxRelease(*dev);
    return 100000 + (int)s;
  }
  return 0;
}

int on_close(CUdevice dev, CUcontext ctx, CUstream stream, cublasHandle_t blas) {
  cuCtxSetCurrent(ctx);
  cuStreamSynchronize(stream);
  cublasDestroy(blas);
  cuStreamDestroy(stream);
  return cuDevicePrimaryCtxRelease(dev);
}

int on_alloc(CUcontext ctx, CUstream stream, size_t bytes, CUdeviceptr *p) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  if ((r = cuMemAlloc(p, bytes))) return r;
  return cuMemsetD8Async(*p, 0, bytes, stream);
}

int on_free(CUcontext ctx, CUdeviceptr p) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuMemFree(p);
}

int on_host_alloc(CUcontext ctx, size_t bytes, void **p) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuMemHostAlloc(p, bytes, 0);
}

int on_host_free(CUcontext ctx, void *p) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuMemFreeHost(p);
}

int on_event(CUcontext ctx, CUevent *e) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuEventCreate(e, CU_EVENT_DISABLE_TIMING);
}

int on_event_sync(CUcontext ctx, CUevent e) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuEventSynchronize(e);
}

int on_htod(CUcontext ctx, CUstream stream, CUevent done, CUdeviceptr dst, const void *src, size_t bytes) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  if ((r = cuMemcpyHtoDAsync(dst, src, bytes, stream))) return r;
  return cuEventRecord(done, stream);
}

// on_dtoh copies bytes from src and the fault words from fault into host
// memory, then waits for the stream.
int on_dtoh(CUcontext ctx, CUstream stream, void *dst, CUdeviceptr src, size_t bytes, void *faultHost, CUdeviceptr fault) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  if (bytes && (r = cuMemcpyDtoHAsync(dst, src, bytes, stream))) return r;
  if ((r = cuMemcpyDtoHAsync(faultHost, fault, 32, stream))) return r;
  return cuStreamSynchronize(stream);
}

int on_clear(CUcontext ctx, CUstream stream, CUdeviceptr p, size_t bytes) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuMemsetD8Async(p, 0, bytes, stream);
}

int on_load(CUcontext ctx, const char *ptx, CUmodule *m) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuModuleLoadData(m, ptx);
}

int on_function(CUcontext ctx, CUmodule m, const char *name, CUfunction *f) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuModuleGetFunction(f, m, name);
}

int on_unload(CUcontext ctx, CUmodule m) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuModuleUnload(m);
}

int on_launch(CUcontext ctx, CUstream stream, CUfunction f, unsigned grid, unsigned block, void *args) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  void *params[1] = {args};
  return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, params, NULL);
}

int on_gemm(CUcontext ctx, cublasHandle_t h, int f64, int ta, int tb, int m, int n, int k, double alpha,
                   CUdeviceptr a, int lda, long long sa, CUdeviceptr b, int ldb, long long sb, double beta,
                   CUdeviceptr c, int ldc, long long sc, int batch) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t s;
  if (f64) {
    s = cublasDgemmStridedBatched(h, oa, ob, m, n, k, &alpha, (const double *)a, lda, sa, (const double *)b, ldb, sb,
                                  &beta, (double *)c, ldc, sc, batch);
  } else {
    float fa = (float)alpha, fb = (float)beta;
    s = cublasSgemmStridedBatched(h, oa, ob, m, n, k, &fa, (const float *)a, lda, sa, (const float *)b, ldb, sb,
                                  &fb, (float *)c, ldc, sc, batch);
  }
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 100000 + (int)s;
}

int on_mem_info(CUcontext ctx, size_t *free, size_t *total) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuMemGetInfo(free, total);
}

const char *on_error_name(int r) {
  const char *s = NULL;
  if (r >= 100000) return "cuBLAS error";
  if (cuGetErrorName((CUresult)r, &s) != CUDA_SUCCESS || s == NULL) return "unknown CUDA error";
  return s;
}
int on_timing_event(CUcontext ctx, CUevent *e) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuEventCreate(e, CU_EVENT_DEFAULT);
}

int on_record(CUcontext ctx, CUstream stream, CUevent e) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuEventRecord(e, stream);
}

int on_elapsed(CUcontext ctx, CUevent start, CUevent end, float *ms) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuEventElapsedTime(ms, start, end);
}

int on_event_destroy(CUcontext ctx, CUevent e) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  return cuEventDestroy(e);
}

int on_solver(CUcontext ctx, CUstream stream, void **handle) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  cusolverDnHandle_t h;
  cusolverStatus_t s = cusolverDnCreate(&h);
  if (s == CUSOLVER_STATUS_SUCCESS) s = cusolverDnSetStream(h, (cudaStream_t)stream);
  if (s != CUSOLVER_STATUS_SUCCESS) return 200000 + (int)s;
  *handle = h;
  return 0;
}

int on_solver_close(CUcontext ctx, void *handle) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  cusolverStatus_t s = cusolverDnDestroy((cusolverDnHandle_t)handle);
  return s == CUSOLVER_STATUS_SUCCESS ? 0 : 200000 + (int)s;
}

// on_potrf_size returns in *lwork the elements of workspace ?potrf needs
// for an n x n matrix (lower triangle) at a.
int on_potrf_size(CUcontext ctx, void *handle, int f64, int n, CUdeviceptr a, int *lwork) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  cusolverStatus_t s;
  if (f64)
    s = cusolverDnDpotrf_bufferSize((cusolverDnHandle_t)handle, CUBLAS_FILL_MODE_LOWER, n, (double *)a, n, lwork);
  else
    s = cusolverDnSpotrf_bufferSize((cusolverDnHandle_t)handle, CUBLAS_FILL_MODE_LOWER, n, (float *)a, n, lwork);
  return s == CUSOLVER_STATUS_SUCCESS ? 0 : 200000 + (int)s;
}

int on_potrf(CUcontext ctx, void *handle, int f64, int n, CUdeviceptr a, CUdeviceptr work, int lwork, CUdeviceptr info) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  cusolverStatus_t s;
  if (f64)
    s = cusolverDnDpotrf((cusolverDnHandle_t)handle, CUBLAS_FILL_MODE_LOWER, n, (double *)a, n, (double *)work, lwork, (int *)info);
  else
    s = cusolverDnSpotrf((cusolverDnHandle_t)handle, CUBLAS_FILL_MODE_LOWER, n, (float *)a, n, (float *)work, lwork, (int *)info);
  return s == CUSOLVER_STATUS_SUCCESS ? 0 : 200000 + (int)s;
}

// on_trsm solves, column-major, L X = B in place for the lower m x m L at a
// and the m x n B at b.
int on_trsm(CUcontext ctx, cublasHandle_t h, int f64, int m, int n, CUdeviceptr a, CUdeviceptr b) {
  CUresult r;
  if ((r = cuCtxSetCurrent(ctx))) return r;
  cublasStatus_t s;
  if (f64) {
    double one = 1;
    s = cublasDtrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                    (const double *)a, m, (double *)b, m);
  } else {
    float one = 1;
    s = cublasStrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &one,
                    (const float *)a, m, (float *)b, m);
  }
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 100000 + (int)s;
}

int on_probe(int ordinal, int *count, int *major, int *minor, char *name, int namelen, size_t *mem, int *driver) {
  CUresult r;
  CUdevice dev;
  if ((r = cuInit(0))) return r;
  if ((r = cuDriverGetVersion(driver))) return r;
  if ((r = cuDeviceGetCount(count))) return r;
  if (*count <= ordinal) return CUDA_ERROR_INVALID_DEVICE;
  if ((r = cuDeviceGet(&dev, ordinal))) return r;
  if ((r = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))) return r;
  if ((r = cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))) return r;
  if ((r = cuDeviceGetName(name, namelen, dev))) return r;
  return cuDeviceTotalMem(mem, dev);
}
