// Declarations of driver.c: each is one call into the NVIDIA libraries (or
// the host model) through the table A, with the backend's context made
// current first.
#ifndef ORTHONET_CUDA_DRIVER_H
#define ORTHONET_CUDA_DRIVER_H
#include <stddef.h>

#include "api.h"

int on_init(const on_api *A, int ordinal, CUdevice *dev, CUcontext *ctx, CUstream *stream, cublasHandle_t *blas);
int on_close(const on_api *A, CUdevice dev, CUcontext ctx, CUstream stream, cublasHandle_t blas);
int on_alloc(const on_api *A, CUcontext ctx, CUstream stream, size_t bytes, CUdeviceptr *p);
int on_free(const on_api *A, CUcontext ctx, CUdeviceptr p);
int on_host_alloc(const on_api *A, CUcontext ctx, size_t bytes, void **p);
int on_host_free(const on_api *A, CUcontext ctx, void *p);
int on_event(const on_api *A, CUcontext ctx, CUevent *e);
int on_event_sync(const on_api *A, CUcontext ctx, CUevent e);
int on_htod(const on_api *A, CUcontext ctx, CUstream stream, CUevent done, CUdeviceptr dst, const void *src, size_t bytes);
int on_dtoh(const on_api *A, CUcontext ctx, CUstream stream, void *dst, CUdeviceptr src, size_t bytes, void *faultHost,
            CUdeviceptr fault);
int on_load(const on_api *A, CUcontext ctx, const void *image, CUmodule *m);
int on_function(const on_api *A, CUcontext ctx, CUmodule m, const char *name, CUfunction *f);
int on_unload(const on_api *A, CUcontext ctx, CUmodule m);
int on_launch(const on_api *A, CUcontext ctx, CUstream stream, CUfunction f, unsigned grid, unsigned block, void *args,
              size_t bytes);
int on_gemm(const on_api *A, CUcontext ctx, cublasHandle_t h, int f64, int ta, int tb, int m, int n, int k, double alpha,
            CUdeviceptr a, int lda, long long sa, CUdeviceptr b, int ldb, long long sb, double beta, CUdeviceptr c,
            int ldc, long long sc, int batch);
int on_mem_info(const on_api *A, CUcontext ctx, size_t *free, size_t *total);
const char *on_error_name(const on_api *A, int r);
int on_timing_event(const on_api *A, CUcontext ctx, CUevent *e);
int on_record(const on_api *A, CUcontext ctx, CUstream stream, CUevent e);
int on_elapsed(const on_api *A, CUcontext ctx, CUevent start, CUevent end, float *ms);
int on_event_destroy(const on_api *A, CUcontext ctx, CUevent e);
int on_solver(const on_api *A, CUcontext ctx, CUstream stream, cusolverDnHandle_t *handle);
int on_solver_close(const on_api *A, CUcontext ctx, cusolverDnHandle_t handle);
int on_potrf_size(const on_api *A, CUcontext ctx, cusolverDnHandle_t handle, int f64, int n, CUdeviceptr a, int *lwork);
int on_potrf(const on_api *A, CUcontext ctx, cusolverDnHandle_t handle, int f64, int n, CUdeviceptr a, CUdeviceptr work,
             int lwork, CUdeviceptr info);
int on_trsm(const on_api *A, CUcontext ctx, cublasHandle_t h, int f64, int m, int n, CUdeviceptr a, CUdeviceptr b);
int on_probe(const on_api *A, int ordinal, int *count, int *major, int *minor, char *name, int namelen, size_t *mem,
             int *driver);
int on_driver_version(const on_api *A, int *v);
int on_nvrtc_version(const on_api *A, int *major, int *minor);
int on_supported_archs(const on_api *A, int *archs, int cap, int *n);
int on_compile(const on_api *A, const char *src, const char *const *opts, int nopts, int cubin, char **out, size_t *outlen,
               char **log);
int on_dtoh_many(const on_api *A, CUcontext ctx, CUstream stream, char *dst, const CUdeviceptr *srcs,
                 const size_t *bytes, int n, void *faultHost, CUdeviceptr fault);
#endif
