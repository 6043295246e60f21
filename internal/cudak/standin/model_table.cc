// The model's dlsym: every function of cuapi.h's ON_API list, by library
// and name, and the older names drivers export besides (cuEventElapsedTime).
#include <cstring>

#include "model.h"
#include "standin_c.h"

extern "C" ON_HIDDEN CUresult model_cuEventElapsedTime(float *ms, CUevent start, CUevent end);

namespace model {
namespace {
struct Entry {
  int lib;
  const char *name;
  void *fn;
};
#define ON_ENTRY(lib, name, ret, params) {lib, #name, reinterpret_cast<void *>(&name)},
const Entry table[] = {
    ON_API(ON_ENTRY)
    // Older names that drivers export besides (backend/cuda's olderNames).
    {ON_LIB_CUDA, "cuEventElapsedTime", reinterpret_cast<void *>(&model_cuEventElapsedTime)},
};
#undef ON_ENTRY
} // namespace
} // namespace model

extern "C" void *standin_sym(int lib, const char *name) {
  if (name == nullptr) return nullptr;
  for (const auto &e : model::table)
    if (e.lib == lib && std::strcmp(e.name, name) == 0) return e.fn;
  return nullptr;
}
