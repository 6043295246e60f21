// The function table's names and slots, from cuapi.h's list.
#include <stddef.h>
#include <string.h>

#include "api.h"

static const struct {
  int lib;
  const char *name;
  size_t offset;
} entries[] = {
#define ON_ENTRY(lib, name, ret, params) {lib, #name, offsetof(on_api, name)},
    ON_API(ON_ENTRY)
#undef ON_ENTRY
};

int on_api_count(void) { return (int)(sizeof entries / sizeof entries[0]); }

const char *on_api_name(int i, int *lib) {
  *lib = entries[i].lib;
  return entries[i].name;
}

void on_api_set(on_api *a, int i, void *f) { memcpy((char *)a + entries[i].offset, &f, sizeof f); }

void *on_api_get(const on_api *a, int i) {
  void *f;
  memcpy(&f, (const char *)a + entries[i].offset, sizeof f);
  return f;
}
