// The host model's internal interface, between its parts: the driver
// (model_driver.cc: contexts, memory, streams, events, modules, launches)
// and the libraries built on it (model_blas.cc: cuBLAS and cuSOLVER;
// model_nvrtc.cc: NVRTC). Every function of cuapi.h is defined by exactly
// one part, extern "C", with the signature cuapi.h gives it, and hidden from
// the dynamic symbol table (ON_HIDDEN) so that it never interposes on a real
// NVIDIA library loaded into the same process.
#ifndef ORTHONET_STANDIN_MODEL_H
#define ORTHONET_STANDIN_MODEL_H

#include <cstdint>
#include <functional>
#include <string>

#include "../cuapi.h"

#define ON_HIDDEN __attribute__((visibility("hidden")))

// Every function of the API, declared with cuapi.h's signature: a
// definition that differs does not compile.
#define ON_DECLARE(lib, name, ret, params) extern "C" ON_HIDDEN ret name params;
ON_API(ON_DECLARE)
#undef ON_DECLARE

namespace model {

// Config is what the model pretends to be (set from Go by model_configure).
struct Config {
  int driver;        // cuDriverGetVersion's answer, e.g. 12020 (a 535 driver); 0: no driver (libcuda.so.1 absent)
  int nvrtc_major;   // NVRTC's version, e.g. 12, 6; 0: no NVRTC installed
  int nvrtc_minor;
  int cublas_major;  // 0: no cuBLAS installed
  int cusolver_major;// 0: no cuSOLVER installed (11 for CUDA 12, 12 for CUDA 13)
  int devices;       // how many devices the driver sees (0: CUDA_ERROR_NO_DEVICE at cuInit)
  int sm_major;      // the devices' compute capability
  int sm_minor;
  long long memory;  // bytes each device reports (total)
  // Where the model's libraries are: "" for the loader's path (found by
  // soname alone), else a folder (found only by path in that folder).
  std::string folder;
  // Whether libnvrtc-builtins is found by soname alone (as where the toolkit
  // is in the loader path); if not, it must be opened by path from folder
  // before NVRTC compiles, or compiles fail with
  // NVRTC_ERROR_BUILTIN_OPERATION_FAILURE.
  bool builtins_in_path;
  int order;         // 0: forward, reverse and random in turn per launch; 1 forward; 2 reverse; 3 random
  uint64_t seed;     // of the random orders
};
const Config &config();

// ptx_isa returns the PTX ISA version (major*10 + minor, e.g. 85 for 8.5)
// that CUDA version major.minor writes and, for a driver, the newest it loads.
inline int ptx_isa(int major, int minor) {
  if (major <= 11) return 70 + minor;          // 11.8 -> 7.8
  if (major == 12) {
    static const int isa[] = {80, 81, 82, 83, 84, 85, 85, 86, 87, 88};
    return isa[minor < 10 ? minor : 9];
  }
  return 90 + minor;                           // 13.0 -> 9.0
}

// fnv1a returns the 64-bit FNV-1a hash of s (images carry their source's).
inline uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// kernel_source is the CUDA source the model was built with (cudak.Source,
// set from Go): NVRTC's model compiles only that, and modules load only
// images made from it.
const std::string &kernel_source();

// builtins_loaded reports whether libnvrtc-builtins was opened (by path
// from the model's folder) or is found by soname (Config.builtins_in_path).
bool builtins_loaded();

// enqueue runs fn on stream s's own thread, after everything enqueued on s
// before it. It returns CUDA_ERROR_INVALID_HANDLE for a stream that does
// not exist. fn returns a CUresult; one that is not CUDA_SUCCESS becomes the
// context's sticky error, which every later wait returns.
CUresult enqueue(CUstream s, std::function<CUresult()> fn);

// device_range reports whether [p, p + bytes) lies inside one live device
// allocation (bytes 0: whether p is inside one or one past its end).
bool device_range(CUdeviceptr p, size_t bytes);

// context_current reports whether the calling thread has a context current
// (cuCtxSetCurrent), as every library call needs.
bool context_current();

} // namespace model

// Images: what model_nvrtc.cc writes and cuModuleLoadData reads.
//
// PTX is NUL-terminated text:
//   // orthonet host model of NVRTC <major>.<minor>
//   .version <isa major>.<isa minor>
//   .target sm_<arch>
//   .address_size 64
//   // source <16 lower-case hex digits of fnv1a(source)>
// CUBIN is "\x7f" "ELF" followed by the text
//   "orthonet-cubin sm_<arch> cuda <nvrtc major>.<nvrtc minor> source <16 hex digits>\n" and a NUL.
// cuModuleLoadData refuses: PTX whose .version is newer than ptx_isa of the
// driver's version (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), PTX whose target is
// above the device's compute capability or a CUBIN whose sm_<arch> is not
// the device's major with a minor at most the device's
// (CUDA_ERROR_NO_BINARY_FOR_GPU), a CUBIN from an NVRTC of a newer major
// version than the driver's (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), anything
// malformed (CUDA_ERROR_INVALID_PTX / CUDA_ERROR_INVALID_IMAGE), and an
// image of another source (CUDA_ERROR_INVALID_IMAGE).

#endif
