// Declarations of driver.c.
#ifndef ORTHONET_CUDA_DRIVER_H
#define ORTHONET_CUDA_DRIVER_H
#include <stddef.h>
#include <cuda.h>
#include <cublas_v2.h>

int on_init(int ordinal, CUdevice *dev, CUcontext *ctx, CUstream *stream, cublasHandle_t *blas, int *major, int *minor, char *name, int namelen);
int on_close(CUdevice dev, CUcontext ctx, CUstream stream, cublasHandle_t blas);
int on_alloc(CUcontext ctx, CUstream stream, size_t bytes, CUdeviceptr *p);
int on_free(CUcontext ctx, CUdeviceptr p);
int on_host_alloc(CUcontext ctx, size_t bytes, void **p);
int on_host_free(CUcontext ctx, void *p);
int on_event(CUcontext ctx, CUevent *e);
int on_event_sync(CUcontext ctx, CUevent e);
int on_htod(CUcontext ctx, CUstream stream, CUevent done, CUdeviceptr dst, const void *src, size_t bytes);
int on_dtoh(CUcontext ctx, CUstream stream, void *dst, CUdeviceptr src, size_t bytes, void *faultHost, CUdeviceptr fault);
int on_clear(CUcontext ctx, CUstream stream, CUdeviceptr p, size_t bytes);
int on_load(CUcontext ctx, const char *ptx, CUmodule *m);
int on_function(CUcontext ctx, CUmodule m, const char *name, CUfunction *f);
int on_unload(CUcontext ctx, CUmodule m);
int on_launch(CUcontext ctx, CUstream stream, CUfunction f, unsigned grid, unsigned block, void *args);
int on_gemm(CUcontext ctx, cublasHandle_t h, int f64, int ta, int tb, int m, int n, int k, double alpha, CUdeviceptr a, int lda, long long sa, CUdeviceptr b, int ldb, long long sb, double beta, CUdeviceptr c, int ldc, long long sc, int batch);
int on_mem_info(CUcontext ctx, size_t *free, size_t *total);
const char *on_error_name(int r);
int on_timing_event(CUcontext ctx, CUevent *e);
int on_record(CUcontext ctx, CUstream stream, CUevent e);
int on_elapsed(CUcontext ctx, CUevent start, CUevent end, float *ms);
int on_event_destroy(CUcontext ctx, CUevent e);
int on_solver(CUcontext ctx, CUstream stream, void **handle);
int on_solver_close(CUcontext ctx, void *handle);
int on_potrf_size(CUcontext ctx, void *handle, int f64, int n, CUdeviceptr a, int *lwork);
int on_potrf(CUcontext ctx, void *handle, int f64, int n, CUdeviceptr a, CUdeviceptr work, int lwork, CUdeviceptr info);
int on_trsm(CUcontext ctx, cublasHandle_t h, int f64, int m, int n, CUdeviceptr a, CUdeviceptr b);
int on_probe(int ordinal, int *count, int *major, int *minor, char *name, int namelen, size_t *mem, int *driver);
#endif
