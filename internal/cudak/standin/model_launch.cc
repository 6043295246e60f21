// The model's kernel runner: the kernels of kernels.cu compiled for the host
// (static functions in an anonymous namespace, registered by name), and a
// launcher that runs a launch's blocks, and each block's threads, in
// forward, reverse or seeded random order, KERNEL_SYNC threads as fibers
// that meet at __syncthreads, aborting at a divergent barrier.
#undef _FORTIFY_SOURCE // longjmp between the fibers' stacks
#include "model_internal.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define MODEL_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define MODEL_TSAN 1
#endif

namespace {
#include "../kernels.cu"
} // namespace

namespace model {

dim3 thread_idx{0, 0, 0}, block_idx{0, 0, 0};
dim3 block_dim{1, 1, 1}, grid_dim{1, 1, 1};
u64 block_epoch = 0;
bool test_kernels_enabled = false;

static std::map<std::string, Kernel> &registry() {
  static std::map<std::string, Kernel> r;
  return r;
}

void register_kernel(const Kernel &k) { registry()[k.name] = k; }

const Kernel *find_kernel(const char *name) {
  auto it = registry().find(name);
  if (it == registry().end()) return nullptr;
  if (it->second.test_only && !test_kernels_enabled) return nullptr;
  return &it->second;
}

namespace {

std::mutex launch_mu; // kernels' statics (SHARED, the state below) allow one launch at a time
u64 launches = 0;     // launch k runs in order k % 3 under config order 0

// splitmix64, for the random orders.
struct Rng {
  u64 s;
  u64 next() {
    u64 z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

enum { FORWARD = 1, REVERSE = 2, RANDOM = 3 };

// arrange fills p with 0..n-1 in the order.
void arrange(std::vector<unsigned> &p, unsigned n, int order, Rng &rng) {
  p.resize(n);
  for (unsigned i = 0; i < n; i++) p[i] = order == REVERSE ? n - 1 - i : i;
  if (order == RANDOM)
    for (unsigned i = n; i > 1; i--) std::swap(p[i - 1], p[rng.next() % i]);
}

// The fibers of a KERNEL_SYNC block, reused across launches: each has an
// mmap'ed stack with a guard page below it. Fibers start once through
// makecontext/swapcontext and switch after that by _setjmp/_longjmp, which
// save no signal mask (no system call).
const size_t stack_bytes = 256 << 10, guard_bytes = 4096;
struct Fiber {
  char *stack = nullptr; // the usable stack, above the guard page
  ucontext_t start;
  jmp_buf resume;
  bool started = false, finished = false;
  int line = 0; // the __syncthreads it waits at
#ifdef MODEL_ASAN
  void *fake_stack = nullptr;
#endif
#ifdef MODEL_TSAN
  void *tsan = nullptr;
#endif
};
std::vector<Fiber> fibers;
jmp_buf scheduler;
Fiber *running = nullptr; // the fiber running now; nullptr outside a KERNEL_SYNC block
const Kernel *current_kernel = nullptr;
#ifdef MODEL_ASAN
void *scheduler_fake_stack = nullptr;
const void *scheduler_bottom = nullptr;
size_t scheduler_size = 0;
#endif
#ifdef MODEL_TSAN
void *scheduler_tsan = nullptr;
#endif

// to_scheduler leaves the running fiber for the scheduler; finished says
// the fiber will never be resumed.
[[noreturn]] void to_scheduler(Fiber *f, bool finished) {
#ifdef MODEL_ASAN
  __sanitizer_start_switch_fiber(finished ? nullptr : &f->fake_stack, scheduler_bottom, scheduler_size);
#else
  (void)f;
  (void)finished;
#endif
#ifdef MODEL_TSAN
  __tsan_switch_to_fiber(scheduler_tsan, 0);
#endif
  _longjmp(scheduler, 1);
}

// arrived is where a fiber lands when the scheduler switches to it.
void arrived(Fiber *f) {
#ifdef MODEL_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &scheduler_bottom, &scheduler_size);
#else
  (void)f;
#endif
}

const void *fiber_args = nullptr;

// fiber_main runs a thread of the block, then returns to the scheduler by
// the jump a yield takes: it never returns from its own frame.
void fiber_main(int t) {
  Fiber *f = &fibers[t];
  arrived(f);
  current_kernel->fn(fiber_args);
  f->finished = true;
  to_scheduler(f, true);
}

// prepare_fibers makes sure n fibers with stacks exist.
void prepare_fibers(unsigned n) {
  if (fibers.size() >= n) return;
  size_t old = fibers.size();
  fibers.resize(n);
  for (size_t t = old; t < n; t++) {
    void *m = mmap(nullptr, stack_bytes + guard_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "orthonet host model: no memory for the stack of fiber %zu\n", t);
      std::abort();
    }
    mprotect(m, guard_bytes, PROT_NONE); // an overflow faults at once
    fibers[t].stack = static_cast<char *>(m) + guard_bytes;
  }
}

[[noreturn]] void divergent(unsigned block, const std::vector<unsigned> &order, unsigned threads) {
  std::map<int, int> at;
  int done = 0;
  for (unsigned t = 0; t < threads; t++) {
    if (fibers[t].finished)
      done++;
    else
      at[fibers[t].line]++;
  }
  std::string where;
  for (auto &[line, n] : at) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%d of %u threads at the __syncthreads of line %d", where.empty() ? "" : ", ", n,
                  threads, line);
    where += buf;
  }
  std::fprintf(stderr,
               "orthonet host model: divergent barrier in kernel %s, block %u: %s; %d threads finished "
               "(every thread of a block must reach the same __syncthreads)\n",
               current_kernel->name, block, where.c_str(), done);
  (void)order;
  std::abort();
}

// run_block runs the threads of one KERNEL_SYNC block as fibers, each until
// it waits at __syncthreads or ends, round after round (each round in the
// order) until all have ended; a round that ends with the threads not all
// at the same barrier, or some ended and some waiting, aborts.
void run_block(unsigned block, unsigned threads, int order, Rng &rng, const void *args) {
  prepare_fibers(threads);
  for (unsigned t = 0; t < threads; t++) {
    Fiber &f = fibers[t];
    getcontext(&f.start);
    f.start.uc_stack.ss_sp = f.stack;
    f.start.uc_stack.ss_size = stack_bytes;
    f.start.uc_link = nullptr;
    makecontext(&f.start, (void (*)())fiber_main, 1, (int)t);
    f.started = f.finished = false;
    f.line = 0;
#ifdef MODEL_ASAN
    f.fake_stack = nullptr;
#endif
#ifdef MODEL_TSAN
    f.tsan = __tsan_create_fiber(0);
#endif
  }
#ifdef MODEL_TSAN
  scheduler_tsan = __tsan_get_current_fiber();
#endif
  fiber_args = args;
  std::vector<unsigned> perm;
  ucontext_t here;
  for (;;) {
    arrange(perm, threads, order, rng);
    for (unsigned t : perm) {
      Fiber &f = fibers[t];
      if (f.finished) continue;
      thread_idx = dim3{t, 0, 0};
      running = &f;
#ifdef MODEL_ASAN
      __sanitizer_start_switch_fiber(&scheduler_fake_stack, f.stack, stack_bytes);
#endif
#ifdef MODEL_TSAN
      __tsan_switch_to_fiber(f.tsan, 0);
#endif
      if (!_setjmp(scheduler)) {
        if (!f.started) {
          f.started = true;
          swapcontext(&here, &f.start);
        } else {
          _longjmp(f.resume, 1);
        }
      }
#ifdef MODEL_ASAN
      __sanitizer_finish_switch_fiber(scheduler_fake_stack, nullptr, nullptr);
#endif
    }
    running = nullptr;
    unsigned waiting = 0, done = 0;
    int line = -1;
    bool same = true;
    for (unsigned t = 0; t < threads; t++) {
      if (fibers[t].finished) {
        done++;
        continue;
      }
      if (waiting++ == 0)
        line = fibers[t].line;
      else if (fibers[t].line != line)
        same = false;
    }
    if (waiting == 0) break;
    if (done > 0 || !same) divergent(block, perm, threads);
  }
#ifdef MODEL_TSAN
  for (unsigned t = 0; t < threads; t++) __tsan_destroy_fiber(fibers[t].tsan);
#endif
}

} // namespace

void sync(int line) {
  if (running == nullptr) {
    std::fprintf(stderr, "orthonet host model: __syncthreads (line %d) in kernel %s, which is not defined KERNEL_SYNC\n",
                 line, current_kernel ? current_kernel->name : "?");
    std::abort();
  }
  Fiber *f = running;
  f->line = line;
  if (!_setjmp(f->resume)) to_scheduler(f, false);
  arrived(f);
}

void reset_launches() {
  std::lock_guard<std::mutex> lock(launch_mu);
  launches = 0;
}

void run_kernel(const Kernel *k, unsigned grid, unsigned block, const void *args) {
  std::lock_guard<std::mutex> lock(launch_mu);
  u64 launch = launches++;
  int order = config().order;
  if (order == 0) order = (int)(launch % 3) + 1;
  Rng rng{config().seed * 0x2545f4914f6cdd1dULL + launch};
  current_kernel = k;
  block_dim = dim3{block, 1, 1};
  grid_dim = dim3{grid, 1, 1};
  std::vector<unsigned> blocks, threads;
  arrange(blocks, grid, order, rng);
  for (unsigned b : blocks) {
    block_idx = dim3{b, 0, 0};
    block_epoch++;
    if (k->sync) {
      run_block(b, block, order, rng, args);
      continue;
    }
    arrange(threads, block, order, rng);
    for (unsigned t : threads) {
      thread_idx = dim3{t, 0, 0};
      k->fn(args);
    }
  }
  current_kernel = nullptr;
}

} // namespace model
