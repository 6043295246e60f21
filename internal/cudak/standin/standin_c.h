// The host model's C interface to its Go package (besides the API
// functions of cuapi.h, which the table in model_table.cc serves).
#ifndef ORTHONET_STANDIN_C_H
#define ORTHONET_STANDIN_C_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

// standin_configure sets the model's configuration; it returns 1, and
// changes nothing, while a primary context is retained.
int standin_configure(int driver, int nvrtc_major, int nvrtc_minor, int cublas_major, int cusolver_major, int devices,
                      int sm_major, int sm_minor, long long memory, const char *folder, int builtins_in_path,
                      int order, uint64_t seed);
// standin_set_source sets the kernel source that modules must be made from.
void standin_set_source(const char *src, size_t n);
// standin_mark_builtins records that libnvrtc-builtins was opened by path.
void standin_mark_builtins(void);
// standin_host_waits returns how many calls so far made the host wait for
// work of a stream that had not run yet: cuStreamSynchronize,
// cuEventSynchronize, cuMemcpyDtoHAsync into pageable memory, and the
// frees and unloads that wait for every stream. (The model runs a stream's
// work only when the host waits for it, so each such call is a wait that a
// GPU could not have skipped unless it had finished the work already.)
uint64_t standin_host_waits(void);
// standin_sym returns the model's function of that name in library lib
// (an ON_LIB_* index), or NULL.
void *standin_sym(int lib, const char *name);

#ifdef __cplusplus
}
#endif
#endif
