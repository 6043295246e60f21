// The NVIDIA library functions orthonet calls, declared without any CUDA
// header: the types and constants it needs, with the values and signatures
// of the CUDA 12/13 headers, and one list (ON_API) of every function with
// its library, return type and parameters. backend/cuda resolves the list
// by name at run time from the libraries it loads (dlopen + dlsym, or the
// host model of internal/cudak/standin), so that no CUDA header, library or
// build tag is needed to build orthonet; the host model defines each
// function with these exact signatures, so that the compiler checks both
// sides against one list.
#ifndef ORTHONET_CUAPI_H
#define ORTHONET_CUAPI_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- driver API (libcuda.so.1) --------------------------------------------
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_UNKNOWN = 999,
};

enum {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};
enum { CU_STREAM_DEFAULT = 0, CU_STREAM_NON_BLOCKING = 1 };
enum { CU_EVENT_DEFAULT = 0, CU_EVENT_BLOCKING_SYNC = 1, CU_EVENT_DISABLE_TIMING = 2 };
// cuLaunchKernel's extra: the argument buffer and its size in bytes.
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

// ---- cuBLAS (libcublas.so.12 / .13) -----------------------------------------
typedef struct cublasContext *cublasHandle_t;
typedef int cublasStatus_t;
enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1 };
enum { CUBLAS_SIDE_LEFT = 0, CUBLAS_SIDE_RIGHT = 1 };
enum { CUBLAS_DIAG_NON_UNIT = 0, CUBLAS_DIAG_UNIT = 1 };
enum { CUBLAS_DEFAULT_MATH = 0 };
// libraryPropertyType, for cublasGetProperty and cusolverGetProperty.
enum { MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2 };

// ---- cuSOLVER (libcusolver.so.11 in CUDA 12, .12 in CUDA 13) ------------------
typedef struct cusolverDnContext *cusolverDnHandle_t;
typedef int cusolverStatus_t;
enum {
  CUSOLVER_STATUS_SUCCESS = 0,
  CUSOLVER_STATUS_NOT_INITIALIZED = 1,
  CUSOLVER_STATUS_ALLOC_FAILED = 2,
  CUSOLVER_STATUS_INVALID_VALUE = 3,
  CUSOLVER_STATUS_ARCH_MISMATCH = 4,
  CUSOLVER_STATUS_EXECUTION_FAILED = 6,
  CUSOLVER_STATUS_INTERNAL_ERROR = 7,
};

// ---- NVRTC (libnvrtc.so.12 / .13, and .11.2 for compiling only) ---------------
typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;
enum {
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_OUT_OF_MEMORY = 1,
  NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
  NVRTC_ERROR_INVALID_INPUT = 3,
  NVRTC_ERROR_INVALID_PROGRAM = 4,
  NVRTC_ERROR_INVALID_OPTION = 5,
  NVRTC_ERROR_COMPILATION = 6,
  NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
};

// The libraries, in the order backend/cuda loads them.
enum { ON_LIB_CUDA = 0, ON_LIB_NVRTC = 1, ON_LIB_CUBLAS = 2, ON_LIB_CUSOLVER = 3, ON_LIBS = 4 };

// ON_API(X) calls X(library, name, return type, parameters) for every
// function orthonet calls, by the name the library exports (versioned
// names, such as cuMemAlloc_v2, where the headers map the plain one to them;
// backend/cuda falls back to an older name where its olderNames says so).
#define ON_API(X)                                                                                                  \
  X(ON_LIB_CUDA, cuInit, CUresult, (unsigned flags))                                                               \
  X(ON_LIB_CUDA, cuDriverGetVersion, CUresult, (int *version))                                                    \
  X(ON_LIB_CUDA, cuGetErrorName, CUresult, (CUresult error, const char **name))                                   \
  X(ON_LIB_CUDA, cuDeviceGetCount, CUresult, (int *count))                                                        \
  X(ON_LIB_CUDA, cuDeviceGet, CUresult, (CUdevice * dev, int ordinal))                                            \
  X(ON_LIB_CUDA, cuDeviceGetAttribute, CUresult, (int *value, int attrib, CUdevice dev))                          \
  X(ON_LIB_CUDA, cuDeviceGetName, CUresult, (char *name, int len, CUdevice dev))                                  \
  X(ON_LIB_CUDA, cuDeviceTotalMem_v2, CUresult, (size_t * bytes, CUdevice dev))                                   \
  X(ON_LIB_CUDA, cuDevicePrimaryCtxRetain, CUresult, (CUcontext * ctx, CUdevice dev))                             \
  X(ON_LIB_CUDA, cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice dev))                                          \
  X(ON_LIB_CUDA, cuCtxSetCurrent, CUresult, (CUcontext ctx))                                                      \
  X(ON_LIB_CUDA, cuStreamCreate, CUresult, (CUstream * stream, unsigned flags))                                   \
  X(ON_LIB_CUDA, cuStreamDestroy_v2, CUresult, (CUstream stream))                                                 \
  X(ON_LIB_CUDA, cuStreamSynchronize, CUresult, (CUstream stream))                                                \
  X(ON_LIB_CUDA, cuMemAlloc_v2, CUresult, (CUdeviceptr * p, size_t bytes))                                        \
  X(ON_LIB_CUDA, cuMemFree_v2, CUresult, (CUdeviceptr p))                                                         \
  X(ON_LIB_CUDA, cuMemGetInfo_v2, CUresult, (size_t * free, size_t * total))                                      \
  X(ON_LIB_CUDA, cuMemHostAlloc, CUresult, (void **p, size_t bytes, unsigned flags))                              \
  X(ON_LIB_CUDA, cuMemFreeHost, CUresult, (void *p))                                                              \
  X(ON_LIB_CUDA, cuMemsetD8Async, CUresult, (CUdeviceptr p, unsigned char value, size_t n, CUstream stream))      \
  X(ON_LIB_CUDA, cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)) \
  X(ON_LIB_CUDA, cuMemcpyDtoHAsync_v2, CUresult, (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))     \
  X(ON_LIB_CUDA, cuEventCreate, CUresult, (CUevent * event, unsigned flags))                                      \
  X(ON_LIB_CUDA, cuEventRecord, CUresult, (CUevent event, CUstream stream))                                       \
  X(ON_LIB_CUDA, cuEventSynchronize, CUresult, (CUevent event))                                                   \
  X(ON_LIB_CUDA, cuEventElapsedTime_v2, CUresult, (float *ms, CUevent start, CUevent end))                        \
  X(ON_LIB_CUDA, cuEventDestroy_v2, CUresult, (CUevent event))                                                    \
  X(ON_LIB_CUDA, cuModuleLoadData, CUresult, (CUmodule * module, const void *image))                              \
  X(ON_LIB_CUDA, cuModuleGetFunction, CUresult, (CUfunction * f, CUmodule module, const char *name))              \
  X(ON_LIB_CUDA, cuModuleUnload, CUresult, (CUmodule module))                                                     \
  X(ON_LIB_CUDA, cuLaunchKernel, CUresult,                                                                         \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,  \
     CUstream stream, void **params, void **extra))                                                                \
  X(ON_LIB_NVRTC, nvrtcVersion, nvrtcResult, (int *major, int *minor))                                            \
  X(ON_LIB_NVRTC, nvrtcGetErrorString, const char *, (nvrtcResult result))                                        \
  X(ON_LIB_NVRTC, nvrtcGetNumSupportedArchs, nvrtcResult, (int *n))                                               \
  X(ON_LIB_NVRTC, nvrtcGetSupportedArchs, nvrtcResult, (int *archs))                                              \
  X(ON_LIB_NVRTC, nvrtcCreateProgram, nvrtcResult,                                                                \
    (nvrtcProgram * prog, const char *src, const char *name, int nheaders, const char *const *headers,            \
     const char *const *includeNames))                                                                             \
  X(ON_LIB_NVRTC, nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram * prog))                                        \
  X(ON_LIB_NVRTC, nvrtcCompileProgram, nvrtcResult, (nvrtcProgram prog, int nopts, const char *const *opts))      \
  X(ON_LIB_NVRTC, nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram prog, size_t * size))                        \
  X(ON_LIB_NVRTC, nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram prog, char *log))                                \
  X(ON_LIB_NVRTC, nvrtcGetPTXSize, nvrtcResult, (nvrtcProgram prog, size_t * size))                               \
  X(ON_LIB_NVRTC, nvrtcGetPTX, nvrtcResult, (nvrtcProgram prog, char *ptx))                                       \
  X(ON_LIB_NVRTC, nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram prog, size_t * size))                             \
  X(ON_LIB_NVRTC, nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram prog, char *cubin))                                   \
  X(ON_LIB_CUBLAS, cublasGetProperty, cublasStatus_t, (int type, int *value))                                     \
  X(ON_LIB_CUBLAS, cublasCreate_v2, cublasStatus_t, (cublasHandle_t * handle))                                    \
  X(ON_LIB_CUBLAS, cublasDestroy_v2, cublasStatus_t, (cublasHandle_t handle))                                     \
  X(ON_LIB_CUBLAS, cublasSetStream_v2, cublasStatus_t, (cublasHandle_t handle, CUstream stream))                  \
  X(ON_LIB_CUBLAS, cublasSetMathMode, cublasStatus_t, (cublasHandle_t handle, int mode))                          \
  X(ON_LIB_CUBLAS, cublasSgemmStridedBatched, cublasStatus_t,                                                     \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k, const float *alpha, const float *a,       \
     int lda, long long stridea, const float *b, int ldb, long long strideb, const float *beta, float *c, int ldc,  \
     long long stridec, int batch))                                                                                \
  X(ON_LIB_CUBLAS, cublasDgemmStridedBatched, cublasStatus_t,                                                     \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k, const double *alpha, const double *a,     \
     int lda, long long stridea, const double *b, int ldb, long long strideb, const double *beta, double *c,       \
     int ldc, long long stridec, int batch))                                                                       \
  X(ON_LIB_CUBLAS, cublasStrsm_v2, cublasStatus_t,                                                                \
    (cublasHandle_t handle, int side, int uplo, int trans, int diag, int m, int n, const float *alpha,            \
     const float *a, int lda, float *b, int ldb))                                                                  \
  X(ON_LIB_CUBLAS, cublasDtrsm_v2, cublasStatus_t,                                                                \
    (cublasHandle_t handle, int side, int uplo, int trans, int diag, int m, int n, const double *alpha,           \
     const double *a, int lda, double *b, int ldb))                                                                \
  X(ON_LIB_CUSOLVER, cusolverGetProperty, cusolverStatus_t, (int type, int *value))                               \
  X(ON_LIB_CUSOLVER, cusolverDnCreate, cusolverStatus_t, (cusolverDnHandle_t * handle))                           \
  X(ON_LIB_CUSOLVER, cusolverDnDestroy, cusolverStatus_t, (cusolverDnHandle_t handle))                            \
  X(ON_LIB_CUSOLVER, cusolverDnSetStream, cusolverStatus_t, (cusolverDnHandle_t handle, CUstream stream))         \
  X(ON_LIB_CUSOLVER, cusolverDnSpotrf_bufferSize, cusolverStatus_t,                                               \
    (cusolverDnHandle_t handle, int uplo, int n, float *a, int lda, int *lwork))                                   \
  X(ON_LIB_CUSOLVER, cusolverDnDpotrf_bufferSize, cusolverStatus_t,                                               \
    (cusolverDnHandle_t handle, int uplo, int n, double *a, int lda, int *lwork))                                  \
  X(ON_LIB_CUSOLVER, cusolverDnSpotrf, cusolverStatus_t,                                                          \
    (cusolverDnHandle_t handle, int uplo, int n, float *a, int lda, float *work, int lwork, int *info))            \
  X(ON_LIB_CUSOLVER, cusolverDnDpotrf, cusolverStatus_t,                                                          \
    (cusolverDnHandle_t handle, int uplo, int n, double *a, int lda, double *work, int lwork, int *info))

#ifdef __cplusplus
}
#endif
#endif
