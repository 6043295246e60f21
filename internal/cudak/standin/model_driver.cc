// The model's CUDA driver: devices, primary contexts, memory (poisoned with
// 0xFF bytes when allocated and when freed, freed blocks kept a while in a
// quarantine), lazy streams with a thread each, events, modules of the
// images model_nvrtc.cc writes, and launches of the kernels of kernels.cu.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "model_internal.h"
#include "standin_c.h"

namespace model {
namespace {

typedef std::chrono::steady_clock Clock;

const int multiprocessors = 132; // as an H100 SXM
const size_t queue_limit = 1024; // a stream's queue that long runs at once
const size_t quarantine_blocks = 256;
const size_t quarantine_bytes = 256 << 20;

struct Stream;

// host_waits counts the calls in which the host waited for work of a
// stream that had not run yet (standin_host_waits).
std::atomic<uint64_t> host_waits{0};

struct Ctx {
  int device = 0;
  std::atomic<int> refs{0};
  std::atomic<int> sticky{0}; // the first error of a stream item
  std::shared_ptr<Stream> null_stream;
};

// Stream runs its items in order on a thread of its own, but only when the
// host waits for them (want) or its queue is full: a lazy device.
struct Stream {
  Ctx *ctx = nullptr;
  std::mutex m;
  std::condition_variable work, done_cv;
  std::deque<std::function<CUresult()>> q;
  uint64_t pushed = 0, done = 0, want = 0;
  bool stop = false;
  std::thread th;

  void loop() {
    set_current(ctx);
    std::unique_lock<std::mutex> l(m);
    for (;;) {
      work.wait(l, [&] { return stop || (want > done && !q.empty()); });
      if (want > done && !q.empty()) {
        std::function<CUresult()> fn = std::move(q.front());
        q.pop_front();
        l.unlock();
        if (ctx->sticky.load() == CUDA_SUCCESS) {
          CUresult r = fn();
          int zero = CUDA_SUCCESS;
          if (r != CUDA_SUCCESS) ctx->sticky.compare_exchange_strong(zero, r);
        }
        fn = nullptr;
        l.lock();
        done++;
        done_cv.notify_all();
        continue;
      }
      if (stop) return;
    }
  }

  // wait runs the items up to the upto-th and waits for them. One that
  // finds some not yet run is a blocking host wait, counted in host_waits
  // unless the model itself waits (a full queue).
  void wait(uint64_t upto, bool counted = true) {
    if (std::this_thread::get_id() == th.get_id()) return; // an item cannot wait for itself
    std::unique_lock<std::mutex> l(m);
    if (counted && done < upto) host_waits++;
    if (upto > want) want = upto;
    work.notify_all();
    done_cv.wait(l, [&] { return done >= upto; });
  }
  void drain() {
    uint64_t n;
    {
      std::lock_guard<std::mutex> l(m);
      n = pushed;
    }
    wait(n);
  }
  // push adds fn; seq gets its number. A full queue runs at once.
  CUresult push(std::function<CUresult()> fn, uint64_t *seq) {
    uint64_t n;
    {
      std::lock_guard<std::mutex> l(m);
      if (stop) return CUDA_ERROR_INVALID_HANDLE;
      q.push_back(std::move(fn));
      n = ++pushed;
      if (seq) *seq = n;
      if (q.size() < queue_limit) return CUDA_SUCCESS;
    }
    wait(n, false);
    return CUDA_SUCCESS;
  }
  void finish() {
    drain();
    {
      std::lock_guard<std::mutex> l(m);
      stop = true;
      work.notify_all();
    }
    if (th.joinable() && std::this_thread::get_id() != th.get_id()) th.join();
  }
  static void set_current(Ctx *c);
};

struct Event {
  Ctx *ctx = nullptr;
  unsigned flags = 0;
  std::mutex m;
  bool recorded = false;
  uint64_t gen = 0, done_gen = 0;
  std::weak_ptr<Stream> stream;
  uint64_t seq = 0;
  Clock::time_point at;
};

struct Module;
struct Function {
  Module *mod;
  const Kernel *k;
};
struct Module {
  Ctx *ctx = nullptr;
  std::map<std::string, std::unique_ptr<Function>> fns;
};

struct Block {
  size_t size;
  Ctx *ctx;
};

std::mutex mu; // guards everything below
Config cfg{12080, 12, 8, 12, 11, 1, 9, 0, 16LL << 30, "", true, 0, 1};
std::atomic<bool> initialized{false};
bool builtins_opened = false;
std::string source;
// The registries are never destroyed (no destructor runs at exit while a
// stream's thread may still run, and quarantined blocks stay reachable).
std::deque<Ctx> &ctxs = *new std::deque<Ctx>; // per device; never shrinks, so handles stay valid
std::vector<long long> &used = *new std::vector<long long>; // device bytes allocated, per device
std::map<Stream *, std::shared_ptr<Stream>> &streams = *new std::map<Stream *, std::shared_ptr<Stream>>;
std::map<Event *, std::shared_ptr<Event>> &events = *new std::map<Event *, std::shared_ptr<Event>>;
std::set<Module *> &modules = *new std::set<Module *>;
std::set<Function *> &functions = *new std::set<Function *>;
std::map<uintptr_t, Block> &device_blocks = *new std::map<uintptr_t, Block>;
std::map<uintptr_t, Block> &pinned_blocks = *new std::map<uintptr_t, Block>;
std::deque<std::pair<void *, size_t>> &quarantine = *new std::deque<std::pair<void *, size_t>>;
size_t quarantined = 0;

thread_local Ctx *current = nullptr;

void Stream::set_current(Ctx *c) { current = c; }

bool live(Ctx *c) { return c != nullptr && c->refs.load() > 0 && c->device < cfg.devices; }

// find returns the block of the map that holds [p, p+bytes), or end.
std::map<uintptr_t, Block>::iterator find(std::map<uintptr_t, Block> &m, uintptr_t p, size_t bytes) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return m.end();
  --it;
  uintptr_t end = it->first + it->second.size;
  if (p > end) return m.end();
  if (bytes == 0) return it;
  if (p == end || bytes > end - p) return m.end();
  return it;
}

// bury poisons a freed block and keeps it a while, so that a stale pointer
// reads 0xFF bytes rather than someone else's data. Holds mu.
void bury(void *p, size_t size) {
  std::memset(p, 0xFF, size);
  quarantine.emplace_back(p, size);
  quarantined += size;
  while (quarantine.size() > quarantine_blocks || quarantined > quarantine_bytes) {
    std::free(quarantine.front().first);
    quarantined -= quarantine.front().second;
    quarantine.pop_front();
  }
}

// all_streams returns every live stream. Holds mu.
std::vector<std::shared_ptr<Stream>> all_streams(Ctx *only) {
  std::vector<std::shared_ptr<Stream>> v;
  for (auto &[p, s] : streams)
    if (only == nullptr || s->ctx == only) v.push_back(s);
  for (auto &c : ctxs)
    if (c.null_stream && (only == nullptr || &c == only)) v.push_back(c.null_stream);
  return v;
}

// drain_all waits for every stream to run all its items.
void drain_all() {
  std::vector<std::shared_ptr<Stream>> v;
  {
    std::lock_guard<std::mutex> l(mu);
    v = all_streams(nullptr);
  }
  for (auto &s : v) s->drain();
}

std::shared_ptr<Stream> new_stream(Ctx *c) {
  auto s = std::make_shared<Stream>();
  s->ctx = c;
  Stream *raw = s.get();
  s->th = std::thread([raw] { raw->loop(); });
  return s;
}

// stream_of resolves a stream handle (0: the current context's NULL
// stream). Takes mu.
CUresult stream_of(CUstream h, std::shared_ptr<Stream> *out) {
  std::lock_guard<std::mutex> l(mu);
  if (h == nullptr) {
    if (!live(current)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!current->null_stream) current->null_stream = new_stream(current);
    *out = current->null_stream;
    return CUDA_SUCCESS;
  }
  auto it = streams.find(reinterpret_cast<Stream *>(h));
  if (it == streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (current != nullptr && it->second->ctx != current) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  return CUDA_SUCCESS;
}

bool pinned(const void *p, size_t bytes) {
  std::lock_guard<std::mutex> l(mu);
  return find(pinned_blocks, reinterpret_cast<uintptr_t>(p), bytes) != pinned_blocks.end();
}

// reset destroys what a context holds, when its last reference goes: its
// streams (after their work), events, modules and memory.
void reset(Ctx *c) {
  std::vector<std::shared_ptr<Stream>> v;
  {
    std::lock_guard<std::mutex> l(mu);
    v = all_streams(c);
    for (auto it = streams.begin(); it != streams.end();)
      it = it->second->ctx == c ? streams.erase(it) : std::next(it);
    c->null_stream.reset();
  }
  for (auto &s : v) s->finish();
  std::lock_guard<std::mutex> l(mu);
  for (auto it = events.begin(); it != events.end();) it = it->second->ctx == c ? events.erase(it) : std::next(it);
  for (auto it = modules.begin(); it != modules.end();) {
    Module *m = *it;
    if (m->ctx != c) {
      ++it;
      continue;
    }
    for (auto &[name, f] : m->fns) functions.erase(f.get());
    delete m;
    it = modules.erase(it);
  }
  for (auto *blocks : {&device_blocks, &pinned_blocks})
    for (auto it = blocks->begin(); it != blocks->end();) {
      if (it->second.ctx != c) {
        ++it;
        continue;
      }
      if (blocks == &device_blocks) used[c->device] -= (long long)it->second.size;
      bury(reinterpret_cast<void *>(it->first), it->second.size);
      it = blocks->erase(it);
    }
  c->sticky.store(CUDA_SUCCESS);
}

struct Image {
  bool cubin = false;
  int isa = 0;        // PTX: .version as major*10+minor
  int arch = 0;       // sm_<arch>
  int cuda_major = 0; // CUBIN: the NVRTC that wrote it
  uint64_t hash = 0;
};

bool parse_hex(const std::string &s, uint64_t *out) {
  if (s.size() != 16) return false;
  uint64_t h = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    h = h << 4 | (uint64_t)d;
  }
  *out = h;
  return true;
}

bool parse_uint(const std::string &s, int *out) {
  if (s.empty() || s.size() > 6) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// parse_version reads "<major>.<minor>".
bool parse_version(const std::string &s, int *major, int *minor) {
  size_t dot = s.find('.');
  return dot != std::string::npos && parse_uint(s.substr(0, dot), major) && parse_uint(s.substr(dot + 1), minor);
}

bool parse_arch(const std::string &s, int *arch) { return s.rfind("sm_", 0) == 0 && parse_uint(s.substr(3), arch); }

std::vector<std::string> words(const std::string &line) {
  std::vector<std::string> w;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') j++;
    if (j > i) w.push_back(line.substr(i, j - i));
    i = j;
  }
  return w;
}

// parse reads an image as model.h describes it; it returns the error a
// malformed one gets.
CUresult parse(const char *image, Image *im) {
  if (std::memcmp(image, "\x7f" "ELF", 4) == 0) {
    im->cubin = true;
    const char *text = image + 4;
    size_t n = strnlen(text, 4096);
    if (n == 4096) return CUDA_ERROR_INVALID_IMAGE;
    std::string line(text, n);
    if (line.empty() || line.back() != '\n') return CUDA_ERROR_INVALID_IMAGE;
    line.pop_back();
    auto w = words(line);
    int minor;
    if (w.size() != 6 || w[0] != "orthonet-cubin" || !parse_arch(w[1], &im->arch) || w[2] != "cuda" ||
        !parse_version(w[3], &im->cuda_major, &minor) || w[4] != "source" || !parse_hex(w[5], &im->hash))
      return CUDA_ERROR_INVALID_IMAGE;
    return CUDA_SUCCESS;
  }
  size_t n = strnlen(image, 1 << 20);
  if (n == 1 << 20) return CUDA_ERROR_INVALID_PTX;
  std::string text(image, n);
  bool version = false, target = false, address = false, hash = false;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string::npos) j = text.size();
    auto w = words(text.substr(i, j - i));
    i = j + 1;
    if (w.empty()) continue;
    int major, minor;
    if (w[0] == ".version") {
      if (version || target || w.size() != 2 || !parse_version(w[1], &major, &minor) || minor > 9)
        return CUDA_ERROR_INVALID_PTX;
      im->isa = major * 10 + minor;
      version = true;
    } else if (w[0] == ".target") {
      if (!version || target || w.size() != 2 || !parse_arch(w[1], &im->arch)) return CUDA_ERROR_INVALID_PTX;
      target = true;
    } else if (w[0] == ".address_size") {
      if (!target || address || w.size() != 2 || w[1] != "64") return CUDA_ERROR_INVALID_PTX;
      address = true;
    } else if (w[0] == "//") {
      if (w.size() == 3 && w[1] == "source") {
        if (hash || !parse_hex(w[2], &im->hash)) return CUDA_ERROR_INVALID_PTX;
        hash = true;
      }
    } else if (w[0].rfind("//", 0) != 0) {
      return CUDA_ERROR_INVALID_PTX; // nothing else is in the model's PTX
    }
  }
  if (!version || !target || !address || !hash) return CUDA_ERROR_INVALID_PTX;
  return CUDA_SUCCESS;
}

#define NEED_INIT                                                                                                    \
  do {                                                                                                               \
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;                                                             \
  } while (0)
#define NEED_CTX                                                                                                     \
  do {                                                                                                               \
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;                                                             \
    if (!live(current)) return CUDA_ERROR_INVALID_CONTEXT;                                                           \
  } while (0)

} // namespace

const Config &config() { return cfg; }

const std::string &kernel_source() { return source; }

bool builtins_loaded() {
  std::lock_guard<std::mutex> l(mu);
  return cfg.nvrtc_major != 0 && (cfg.builtins_in_path || builtins_opened);
}

CUresult enqueue(CUstream s, std::function<CUresult()> fn) {
  std::shared_ptr<Stream> st;
  if (CUresult r = stream_of(s, &st)) return r == CUDA_ERROR_INVALID_CONTEXT && s != nullptr ? CUDA_ERROR_INVALID_HANDLE : r;
  return st->push(std::move(fn), nullptr);
}

bool device_range(CUdeviceptr p, size_t bytes) {
  std::lock_guard<std::mutex> l(mu);
  return find(device_blocks, (uintptr_t)p, bytes) != device_blocks.end();
}

bool context_current() { return initialized && live(current); }

} // namespace model

using namespace model;

extern "C" int standin_configure(int driver, int nvrtc_major, int nvrtc_minor, int cublas_major, int cusolver_major,
                                 int devices, int sm_major, int sm_minor, long long memory, const char *folder,
                                 int builtins_in_path, int order, uint64_t seed) {
  std::lock_guard<std::mutex> l(mu);
  for (auto &c : ctxs)
    if (c.refs.load() > 0) return 1;
  cfg = Config{driver, nvrtc_major, nvrtc_minor, cublas_major, cusolver_major, devices, sm_major, sm_minor,
               memory, folder ? folder : "", builtins_in_path != 0, order, seed};
  initialized = false;
  builtins_opened = false;
  reset_launches();
  while ((int)ctxs.size() < devices) {
    ctxs.emplace_back();
    ctxs.back().device = (int)ctxs.size() - 1;
  }
  if ((int)used.size() < devices) used.resize(devices, 0);
  return 0;
}

extern "C" uint64_t standin_host_waits(void) { return host_waits.load(); }

extern "C" void standin_set_source(const char *src, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  source.assign(src, n);
}

extern "C" void standin_mark_builtins(void) {
  std::lock_guard<std::mutex> l(mu);
  builtins_opened = true;
}

// ---- initialization and devices ---------------------------------------------------

CUresult cuInit(unsigned flags) {
  std::lock_guard<std::mutex> l(mu);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (cfg.driver == 0 || cfg.devices <= 0) return CUDA_ERROR_NO_DEVICE;
  initialized = true;
  return CUDA_SUCCESS;
}

// cuDriverGetVersion, as the real one, answers before cuInit.
CUresult cuDriverGetVersion(int *version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = cfg.driver;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define NAME(e)                                                                                                      \
  case e:                                                                                                            \
    *name = #e;                                                                                                      \
    return CUDA_SUCCESS;
    NAME(CUDA_SUCCESS)
    NAME(CUDA_ERROR_INVALID_VALUE)
    NAME(CUDA_ERROR_OUT_OF_MEMORY)
    NAME(CUDA_ERROR_NOT_INITIALIZED)
    NAME(CUDA_ERROR_STUB_LIBRARY)
    NAME(CUDA_ERROR_INSUFFICIENT_DRIVER)
    NAME(CUDA_ERROR_NO_DEVICE)
    NAME(CUDA_ERROR_INVALID_DEVICE)
    NAME(CUDA_ERROR_INVALID_IMAGE)
    NAME(CUDA_ERROR_INVALID_CONTEXT)
    NAME(CUDA_ERROR_NO_BINARY_FOR_GPU)
    NAME(CUDA_ERROR_INVALID_PTX)
    NAME(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    NAME(CUDA_ERROR_INVALID_HANDLE)
    NAME(CUDA_ERROR_NOT_FOUND)
    NAME(CUDA_ERROR_NOT_READY)
    NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    NAME(CUDA_ERROR_ILLEGAL_INSTRUCTION)
    NAME(CUDA_ERROR_LAUNCH_FAILED)
    NAME(CUDA_ERROR_UNKNOWN)
#undef NAME
  }
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *count) {
  NEED_INIT;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = cfg.devices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  NEED_INIT;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= cfg.devices) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev) {
  NEED_INIT;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= cfg.devices) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = multiprocessors; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = cfg.sm_major; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = cfg.sm_minor; return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  NEED_INIT;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= cfg.devices) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, (size_t)len, "orthonet host model (sm_%d%d)", cfg.sm_major, cfg.sm_minor);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  NEED_INIT;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= cfg.devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = (size_t)cfg.memory;
  return CUDA_SUCCESS;
}

// ---- contexts ------------------------------------------------------------------------

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  NEED_INIT;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  if (dev < 0 || dev >= cfg.devices) return CUDA_ERROR_INVALID_DEVICE;
  ctxs[dev].refs++;
  *ctx = reinterpret_cast<CUcontext>(&ctxs[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  NEED_INIT;
  Ctx *c;
  {
    std::lock_guard<std::mutex> l(mu);
    if (dev < 0 || dev >= cfg.devices) return CUDA_ERROR_INVALID_DEVICE;
    c = &ctxs[dev];
    if (c->refs.load() <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->refs.load() > 1) {
      c->refs--;
      return CUDA_SUCCESS;
    }
  }
  reset(c); // the last reference: the context's resources go
  c->refs--;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  NEED_INIT;
  if (ctx == nullptr) {
    current = nullptr;
    return CUDA_SUCCESS;
  }
  std::lock_guard<std::mutex> l(mu);
  for (auto &c : ctxs)
    if (reinterpret_cast<CUcontext>(&c) == ctx) {
      if (!live(&c)) return CUDA_ERROR_INVALID_CONTEXT;
      current = &c;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_CONTEXT;
}

// ---- streams -------------------------------------------------------------------------

CUresult cuStreamCreate(CUstream *stream, unsigned flags) {
  NEED_CTX;
  if (stream == nullptr || (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  auto s = new_stream(current);
  std::lock_guard<std::mutex> l(mu);
  streams[s.get()] = s;
  *stream = reinterpret_cast<CUstream>(s.get());
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  NEED_CTX;
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> l(mu);
    auto it = streams.find(reinterpret_cast<Stream *>(stream));
    if (it == streams.end() || it->second->ctx != current) return CUDA_ERROR_INVALID_HANDLE;
    s = it->second;
    streams.erase(it);
  }
  s->finish();
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  NEED_CTX;
  std::shared_ptr<Stream> s;
  if (CUresult r = stream_of(stream, &s)) return r;
  s->drain();
  return current->sticky.load();
}

// ---- memory --------------------------------------------------------------------------

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  NEED_CTX;
  if (p == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  long long &u = used[current->device];
  if (bytes > (size_t)(cfg.memory - u)) return CUDA_ERROR_OUT_OF_MEMORY;
  void *m = nullptr;
  if (posix_memalign(&m, 256, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(m, 0xFF, bytes);
  device_blocks[reinterpret_cast<uintptr_t>(m)] = Block{bytes, current};
  u += (long long)bytes;
  *p = (CUdeviceptr) reinterpret_cast<uintptr_t>(m);
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  NEED_CTX;
  {
    std::lock_guard<std::mutex> l(mu);
    auto it = device_blocks.find((uintptr_t)p);
    if (it == device_blocks.end() || it->second.ctx != current) return CUDA_ERROR_INVALID_VALUE;
  }
  drain_all(); // as the real one, cuMemFree waits for the device
  std::lock_guard<std::mutex> l(mu);
  auto it = device_blocks.find((uintptr_t)p);
  if (it == device_blocks.end()) return CUDA_ERROR_INVALID_VALUE;
  used[current->device] -= (long long)it->second.size;
  bury(reinterpret_cast<void *>(it->first), it->second.size);
  device_blocks.erase(it);
  return current->sticky.load();
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  NEED_CTX;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  *total = (size_t)cfg.memory;
  *free = (size_t)(cfg.memory - used[current->device]);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  NEED_CTX;
  if (p == nullptr || bytes == 0 || (flags & ~7u) != 0) return CUDA_ERROR_INVALID_VALUE;
  void *m = nullptr;
  if (posix_memalign(&m, 4096, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(m, 0xFF, bytes);
  std::lock_guard<std::mutex> l(mu);
  pinned_blocks[reinterpret_cast<uintptr_t>(m)] = Block{bytes, current};
  *p = m;
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p) {
  NEED_CTX;
  {
    std::lock_guard<std::mutex> l(mu);
    if (pinned_blocks.find(reinterpret_cast<uintptr_t>(p)) == pinned_blocks.end()) return CUDA_ERROR_INVALID_VALUE;
  }
  drain_all(); // no copy still pending may read or write it
  std::lock_guard<std::mutex> l(mu);
  auto it = pinned_blocks.find(reinterpret_cast<uintptr_t>(p));
  if (it == pinned_blocks.end()) return CUDA_ERROR_INVALID_VALUE;
  bury(p, it->second.size);
  pinned_blocks.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char value, size_t n, CUstream stream) {
  NEED_CTX;
  std::shared_ptr<Stream> s;
  if (CUresult r = stream_of(stream, &s)) return r;
  if (!device_range(p, n)) return CUDA_ERROR_INVALID_VALUE;
  if (n == 0) return CUDA_SUCCESS;
  return s->push(
      [p, value, n] {
        std::memset(reinterpret_cast<void *>((uintptr_t)p), value, n);
        return CUDA_SUCCESS;
      },
      nullptr);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream) {
  NEED_CTX;
  std::shared_ptr<Stream> s;
  if (CUresult r = stream_of(stream, &s)) return r;
  if (!device_range(dst, bytes) || (src == nullptr && bytes > 0)) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  void *d = reinterpret_cast<void *>((uintptr_t)dst);
  if (pinned(src, bytes)) // read when the stream gets there, as a DMA engine would
    return s->push(
        [d, src, bytes] {
          std::memcpy(d, src, bytes);
          return CUDA_SUCCESS;
        },
        nullptr);
  // Pageable memory is staged at once, as CUDA stages it.
  auto staged = std::make_shared<std::vector<unsigned char>>((const unsigned char *)src,
                                                             (const unsigned char *)src + bytes);
  return s->push(
      [d, staged] {
        std::memcpy(d, staged->data(), staged->size());
        return CUDA_SUCCESS;
      },
      nullptr);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  NEED_CTX;
  std::shared_ptr<Stream> s;
  if (CUresult r = stream_of(stream, &s)) return r;
  if (!device_range(src, bytes) || (dst == nullptr && bytes > 0)) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  const void *p = reinterpret_cast<const void *>((uintptr_t)src);
  if (pinned(dst, bytes)) // written when the stream gets there
    return s->push(
        [dst, p, bytes] {
          std::memcpy(dst, p, bytes);
          return CUDA_SUCCESS;
        },
        nullptr);
  // Pageable memory: the copy waits for the stream.
  s->drain();
  if (CUresult r = current->sticky.load()) return r;
  std::memcpy(dst, p, bytes);
  return CUDA_SUCCESS;
}

// ---- events --------------------------------------------------------------------------

namespace {
CUresult event_of(CUevent h, std::shared_ptr<Event> *out) {
  std::lock_guard<std::mutex> l(mu);
  auto it = events.find(reinterpret_cast<Event *>(h));
  if (it == events.end() || it->second->ctx != current) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  return CUDA_SUCCESS;
}
} // namespace

CUresult cuEventCreate(CUevent *event, unsigned flags) {
  NEED_CTX;
  if (event == nullptr || (flags & ~3u) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto e = std::make_shared<Event>();
  e->ctx = current;
  e->flags = flags;
  std::lock_guard<std::mutex> l(mu);
  events[e.get()] = e;
  *event = reinterpret_cast<CUevent>(e.get());
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  NEED_CTX;
  std::shared_ptr<Event> e;
  if (CUresult r = event_of(event, &e)) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = stream_of(stream, &s)) return r;
  std::lock_guard<std::mutex> l(e->m);
  uint64_t g = ++e->gen;
  e->recorded = true;
  e->stream = s;
  std::weak_ptr<Event> w = e;
  return s->push(
      [w, g] {
        if (auto e = w.lock()) {
          std::lock_guard<std::mutex> l(e->m);
          if (e->gen == g) {
            e->done_gen = g;
            e->at = Clock::now();
          }
        }
        return CUDA_SUCCESS;
      },
      &e->seq);
}

CUresult cuEventSynchronize(CUevent event) {
  NEED_CTX;
  std::shared_ptr<Event> e;
  if (CUresult r = event_of(event, &e)) return r;
  std::shared_ptr<Stream> s;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> l(e->m);
    if (!e->recorded) return CUDA_SUCCESS;
    s = e->stream.lock();
    seq = e->seq;
  }
  if (s) s->wait(seq);
  return current->sticky.load();
}

CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
  NEED_CTX;
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Event> a, b;
  if (CUresult r = event_of(start, &a)) return r;
  if (CUresult r = event_of(end, &b)) return r;
  if (CUresult r = current->sticky.load()) return r;
  Clock::time_point ta, tb;
  for (auto [e, t] : {std::pair{a.get(), &ta}, std::pair{b.get(), &tb}}) {
    std::lock_guard<std::mutex> l(e->m);
    if ((e->flags & CU_EVENT_DISABLE_TIMING) || !e->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if (e->done_gen != e->gen) return CUDA_ERROR_NOT_READY;
    *t = e->at;
  }
  *ms = std::chrono::duration<float, std::milli>(tb - ta).count();
  return CUDA_SUCCESS;
}

// cuEventElapsedTime_v2 under its older name, which drivers before it
// export (model_table.cc serves it as cuEventElapsedTime): a function of its
// own, so that a test can tell which of the two a loader took.
extern "C" ON_HIDDEN CUresult model_cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  return cuEventElapsedTime_v2(ms, start, end);
}

CUresult cuEventDestroy_v2(CUevent event) {
  NEED_CTX;
  std::lock_guard<std::mutex> l(mu);
  auto it = events.find(reinterpret_cast<Event *>(event));
  if (it == events.end() || it->second->ctx != current) return CUDA_ERROR_INVALID_HANDLE;
  events.erase(it);
  return CUDA_SUCCESS;
}

// ---- modules and launches ------------------------------------------------------------

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  NEED_CTX;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Image im;
  if (CUresult r = parse(static_cast<const char *>(image), &im)) return r;
  int dev = cfg.sm_major * 10 + cfg.sm_minor;
  int drv_major = cfg.driver / 1000, drv_minor = cfg.driver % 1000 / 10;
  if (im.cubin) {
    if (im.arch / 10 != cfg.sm_major || im.arch % 10 > cfg.sm_minor) return CUDA_ERROR_NO_BINARY_FOR_GPU;
    if (im.cuda_major > drv_major) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  } else {
    if (im.isa > ptx_isa(drv_major, drv_minor)) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    if (im.arch > dev) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  std::lock_guard<std::mutex> l(mu);
  if (im.hash != fnv1a(source)) return CUDA_ERROR_INVALID_IMAGE;
  Module *m = new Module;
  m->ctx = current;
  modules.insert(m);
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name) {
  NEED_CTX;
  if (f == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  Module *m = reinterpret_cast<Module *>(module);
  if (modules.count(m) == 0 || m->ctx != current) return CUDA_ERROR_INVALID_HANDLE;
  const Kernel *k = find_kernel(name);
  if (k == nullptr) return CUDA_ERROR_NOT_FOUND;
  auto &slot = m->fns[name];
  if (!slot) {
    slot.reset(new Function{m, k});
    functions.insert(slot.get());
  }
  *f = reinterpret_cast<CUfunction>(slot.get());
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  NEED_CTX;
  {
    std::lock_guard<std::mutex> l(mu);
    Module *m = reinterpret_cast<Module *>(module);
    if (modules.count(m) == 0 || m->ctx != current) return CUDA_ERROR_INVALID_HANDLE;
  }
  drain_all(); // no launch of its functions may still be pending
  std::lock_guard<std::mutex> l(mu);
  Module *m = reinterpret_cast<Module *>(module);
  if (modules.erase(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto &[name, fn] : m->fns) functions.erase(fn.get());
  delete m;
  return current->sticky.load();
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream stream, void **params, void **extra) {
  NEED_CTX;
  const Kernel *k;
  {
    std::lock_guard<std::mutex> l(mu);
    Function *fn = reinterpret_cast<Function *>(f);
    if (functions.count(fn) == 0 || fn->mod->ctx != current) return CUDA_ERROR_INVALID_HANDLE;
    k = fn->k;
  }
  if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > 1024 || by != 1 || bz != 1 || shared != 0)
    return CUDA_ERROR_INVALID_VALUE;
  const void *args = nullptr;
  if ((params == nullptr) == (extra == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  if (params != nullptr) {
    args = params[0];
  } else {
    const void *buf = nullptr;
    const size_t *size = nullptr;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (i > 8) return CUDA_ERROR_INVALID_VALUE;
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        buf = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
        size = static_cast<const size_t *>(extra[i + 1]);
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (size == nullptr || *size != k->size) return CUDA_ERROR_INVALID_VALUE;
    args = buf;
  }
  if (args == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = stream_of(stream, &s)) return r;
  // The argument bytes are copied at the launch, as CUDA copies them.
  auto copy = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char *>(args),
                                                           static_cast<const unsigned char *>(args) + k->size);
  return s->push(
      [k, gx, bx, copy] {
        run_kernel(k, gx, bx, copy->data());
        return CUDA_SUCCESS;
      },
      nullptr);
}
