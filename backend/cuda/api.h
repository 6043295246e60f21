// The table of NVIDIA functions the backend calls, filled at run time by
// name (load.go) from the libraries it opens or from the host model.
#ifndef ORTHONET_CUDA_API_H
#define ORTHONET_CUDA_API_H
#include "../../internal/cudak/cuapi.h"

typedef struct {
#define ON_FIELD(lib, name, ret, params) ret(*name) params;
  ON_API(ON_FIELD)
#undef ON_FIELD
} on_api;

// on_api_count returns how many functions the table holds.
int on_api_count(void);
// on_api_name returns the name of function i and sets *lib to its library.
const char *on_api_name(int i, int *lib);
// on_api_set stores the address of function i.
void on_api_set(on_api *a, int i, void *f);
// on_api_get returns the address of function i.
void *on_api_get(const on_api *a, int i);
#endif
