// Declarations shared by the model's driver parts (model_driver.cc,
// model_launch.cc, model_table.cc) and its cgo glue; not for the library
// parts, which use model.h only.
#ifndef ORTHONET_STANDIN_MODEL_INTERNAL_H
#define ORTHONET_STANDIN_MODEL_INTERNAL_H

#include "host.h"
#include "model.h"

namespace model {

// run_kernel runs one launch of k, grid blocks of block threads each, with
// the argument struct at args, in the order the configuration and the
// launch count choose. Launches run one at a time.
void run_kernel(const Kernel *k, unsigned grid, unsigned block, const void *args);

// reset_launches restarts the count of launches that order 0 and the
// random orders' seeds use (at every configuration).
void reset_launches();

// test_kernels_enabled: whether cuModuleGetFunction finds the kernels of
// the model's own tests (off unless a test turns it on).
extern bool test_kernels_enabled;

} // namespace model

#endif
