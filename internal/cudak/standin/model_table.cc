// The model's dlsym: every function of cuapi.h's ON_API list, by library
// and name.
#include <cstring>

#include "model.h"
#include "standin_c.h"

namespace model {
namespace {
struct Entry {
  int lib;
  const char *name;
  void *fn;
};
#define ON_ENTRY(lib, name, ret, params) {lib, #name, reinterpret_cast<void *>(&name)},
const Entry table[] = {ON_API(ON_ENTRY)};
#undef ON_ENTRY
} // namespace
} // namespace model

extern "C" void *standin_sym(int lib, const char *name) {
  if (name == nullptr) return nullptr;
  for (const auto &e : model::table)
    if (e.lib == lib && std::strcmp(e.name, name) == 0) return e.fn;
  return nullptr;
}
