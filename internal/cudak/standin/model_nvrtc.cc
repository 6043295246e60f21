// The host model's NVRTC: programs that compile only the source the model
// was built with (model::kernel_source), with NVRTC's options, architectures
// (by version), logs and failures, into the PTX and CUBIN images of model.h
// that the model's cuModuleLoadData reads. NVRTC needs no context.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "model.h"

namespace model_nvrtc {

// Program is an nvrtcProgram: its source and name, and what its latest
// compile left (state: never compiled, failed, or compiled).
struct Program {
  std::string source, name;
  enum { fresh, failed, compiled } state = fresh;
  std::string log;   // of the latest compile
  std::string ptx;   // with its NUL, when compiled
  std::string cubin; // with its NUL, when compiled for a real architecture
  bool real = false; // compiled for sm_XY (not compute_XY)
};

static std::mutex mu; // every call holds it: programs are not shared between threads by NVRTC's rules, but cheaply safe
static std::unordered_set<const void *> &programs() {
  static auto *s = new std::unordered_set<const void *>;
  return *s;
}

// live returns p's Program while it is live (created and not destroyed).
static Program *live(nvrtcProgram p) {
  if (p == nullptr || !programs().count(p)) return nullptr;
  return reinterpret_cast<Program *>(p);
}

// archs returns the architectures NVRTC major.minor compiles for, as
// nvrtcGetSupportedArchs lists them (ascending).
static std::vector<int> archs(int major, int minor) {
  if (major <= 11) return {35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};
  if (major == 12) {
    std::vector<int> a = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};
    if (minor == 8) a.insert(a.end(), {100, 101, 120});
    if (minor >= 9) a.insert(a.end(), {100, 101, 103, 120, 121});
    return a;
  }
  return {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
}

static std::string hex16(uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)h);
  return b;
}

// parse_arch reads "compute_XY" or "sm_XY" (digits only) into arch and real.
static bool parse_arch(const std::string &v, int *arch, bool *real) {
  std::string digits;
  if (v.rfind("compute_", 0) == 0) {
    digits = v.substr(8);
    *real = false;
  } else if (v.rfind("sm_", 0) == 0) {
    digits = v.substr(3);
    *real = true;
  } else {
    return false;
  }
  if (digits.size() < 2 || digits.size() > 3) return false;
  int a = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    a = a * 10 + (c - '0');
  }
  *arch = a;
  return true;
}

// value reports whether opt is one of the spellings followed by '=', and
// its value.
static bool value(const std::string &opt, std::initializer_list<const char *> names, std::string *v) {
  for (const char *n : names) {
    size_t l = std::strlen(n);
    if (opt.size() > l && opt.compare(0, l, n) == 0 && opt[l] == '=') {
      *v = opt.substr(l + 1);
      return true;
    }
  }
  return false;
}

static nvrtcResult compile(Program *p, int nopts, const char *const *opts) {
  const model::Config &cf = model::config();
  p->state = Program::failed;
  p->log.clear();
  p->ptx.clear();
  p->cubin.clear();
  int arch = cf.nvrtc_major >= 13 ? 75 : 52; // NVRTC's default architecture: compute_52 (compute_75 from 13.0)
  bool real = false;
  for (int i = 0; i < nopts; i++) {
    std::string o = opts[i], v;
    if (value(o, {"--gpu-architecture", "-arch"}, &v)) {
      int a;
      bool r;
      std::vector<int> ok = archs(cf.nvrtc_major, cf.nvrtc_minor);
      if (!parse_arch(v, &a, &r) || std::find(ok.begin(), ok.end(), a) == ok.end()) {
        p->log = "nvrtc: error: invalid value for --gpu-architecture (-arch)\n";
        return NVRTC_ERROR_INVALID_OPTION;
      }
      arch = a;
      real = r;
    } else if (value(o, {"--fmad", "-fmad"}, &v)) {
      if (v != "true" && v != "false") {
        p->log = "nvrtc: error: invalid value for --fmad (-fmad): " + v + "\n";
        return NVRTC_ERROR_INVALID_OPTION;
      }
    } else if (value(o, {"--std", "-std"}, &v)) {
      if (v != "c++17" && !(v == "c++20" && cf.nvrtc_major >= 12)) {
        p->log = "nvrtc: error: invalid value for --std (-std): " + v + "\n";
        return NVRTC_ERROR_INVALID_OPTION;
      }
    } else if (o == "-default-device" || o == "--device-as-default-execution-space" || o == "-lineinfo" ||
               o == "--generate-line-info" || o == "--use_fast_math" || o == "-use_fast_math") {
    } else {
      p->log = "nvrtc: error: unrecognized option '" + o + "'\n";
      return NVRTC_ERROR_INVALID_OPTION;
    }
  }
  if (!model::builtins_loaded()) {
    std::string lib = "libnvrtc-builtins.so." + std::to_string(cf.nvrtc_major) + "." + std::to_string(cf.nvrtc_minor);
    p->log = "nvrtc: error: failed to open " + lib + " (not found).\n  Make sure that " + lib +
             " is installed correctly.\n";
    return NVRTC_ERROR_BUILTIN_OPERATION_FAILURE;
  }
  if (p->source != model::kernel_source()) {
    p->log = p->name +
             "(1): error: the host model compiles only the kernels it was built with (cudak.Source), and this "
             "source differs\n\n1 error detected in the compilation of \"" +
             p->name + "\".\n";
    return NVRTC_ERROR_COMPILATION;
  }
  const std::string version = std::to_string(cf.nvrtc_major) + "." + std::to_string(cf.nvrtc_minor);
  const std::string hash = hex16(model::fnv1a(p->source));
  const int isa = model::ptx_isa(cf.nvrtc_major, cf.nvrtc_minor);
  p->ptx = "// orthonet host model of NVRTC " + version + "\n.version " + std::to_string(isa / 10) + "." +
           std::to_string(isa % 10) + "\n.target sm_" + std::to_string(arch) + "\n.address_size 64\n// source " +
           hash + "\n";
  p->ptx.push_back('\0');
  p->real = real;
  if (real) {
    p->cubin = "\x7f" "ELF" "orthonet-cubin sm_" + std::to_string(arch) + " cuda " + version + " source " + hash +
               "\n";
    p->cubin.push_back('\0');
  }
  p->state = Program::compiled;
  return NVRTC_SUCCESS;
}

} // namespace model_nvrtc

using namespace model_nvrtc;

// Output is what a compile leaves to read, each by two calls: its size
// (nvrtcGet...Size) and its bytes.
enum class Output { log, ptx, cubin };

// output finds the bytes of program prog's output o for a call that writes
// to dst, or the error NVRTC gives: the log exists once a compile has run,
// whether it failed or not; PTX only after a compile that succeeded; a
// CUBIN only after one for a real architecture (sm_XY). The caller holds mu.
static nvrtcResult output(nvrtcProgram prog, const void *dst, Output o, std::string_view *bytes) {
  Program *p = live(prog);
  if (p == nullptr || (o == Output::log ? p->state == Program::fresh : p->state != Program::compiled))
    return NVRTC_ERROR_INVALID_PROGRAM;
  if (dst == nullptr || (o == Output::cubin && !p->real)) return NVRTC_ERROR_INVALID_INPUT;
  switch (o) {
  case Output::log: *bytes = std::string_view(p->log.c_str(), p->log.size() + 1); break; // with its NUL
  case Output::ptx: *bytes = p->ptx; break;
  case Output::cubin: *bytes = p->cubin; break;
  }
  return NVRTC_SUCCESS;
}

// output_size writes the size of program prog's output o into size.
static nvrtcResult output_size(nvrtcProgram prog, size_t *size, Output o) {
  std::lock_guard<std::mutex> l(mu);
  std::string_view b;
  if (nvrtcResult r = output(prog, size, o, &b)) return r;
  *size = b.size();
  return NVRTC_SUCCESS;
}

// output_bytes copies program prog's output o into dst.
static nvrtcResult output_bytes(nvrtcProgram prog, char *dst, Output o) {
  std::lock_guard<std::mutex> l(mu);
  std::string_view b;
  if (nvrtcResult r = output(prog, dst, o, &b)) return r;
  std::memcpy(dst, b.data(), b.size());
  return NVRTC_SUCCESS;
}

extern "C" {

nvrtcResult nvrtcVersion(int *major, int *minor) {
  if (major == nullptr || minor == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  *major = model::config().nvrtc_major;
  *minor = model::config().nvrtc_minor;
  return NVRTC_SUCCESS;
}

const char *nvrtcGetErrorString(nvrtcResult result) {
  static const char *const names[] = {
      "NVRTC_SUCCESS",
      "NVRTC_ERROR_OUT_OF_MEMORY",
      "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
      "NVRTC_ERROR_INVALID_INPUT",
      "NVRTC_ERROR_INVALID_PROGRAM",
      "NVRTC_ERROR_INVALID_OPTION",
      "NVRTC_ERROR_COMPILATION",
      "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
      "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
      "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
      "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
      "NVRTC_ERROR_INTERNAL_ERROR",
      "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
      "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
      "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
      "NVRTC_ERROR_PCH_CREATE",
      "NVRTC_ERROR_CANCELLED",
      "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
  };
  if (result < 0 || result >= (int)(sizeof names / sizeof names[0])) return "NVRTC_ERROR unknown";
  return names[result];
}

nvrtcResult nvrtcGetNumSupportedArchs(int *n) {
  if (n == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  *n = (int)archs(model::config().nvrtc_major, model::config().nvrtc_minor).size();
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int *out) {
  if (out == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  std::vector<int> a = archs(model::config().nvrtc_major, model::config().nvrtc_minor);
  std::copy(a.begin(), a.end(), out);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int nheaders,
                               const char *const *headers, const char *const *includeNames) {
  if (prog == nullptr || src == nullptr || nheaders < 0) return NVRTC_ERROR_INVALID_INPUT;
  if (nheaders > 0 && (headers == nullptr || includeNames == nullptr)) return NVRTC_ERROR_INVALID_INPUT;
  for (int i = 0; i < nheaders; i++)
    if (headers[i] == nullptr || includeNames[i] == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  auto *p = new Program;
  p->source = src;
  p->name = name != nullptr ? name : "default_program";
  std::lock_guard<std::mutex> l(mu);
  programs().insert(p);
  *prog = reinterpret_cast<nvrtcProgram>(p);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
  if (prog == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  std::lock_guard<std::mutex> l(mu);
  Program *p = live(*prog);
  if (p == nullptr) return NVRTC_ERROR_INVALID_PROGRAM;
  programs().erase(p);
  delete p;
  *prog = nullptr;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int nopts, const char *const *opts) {
  std::lock_guard<std::mutex> l(mu);
  Program *p = live(prog);
  if (p == nullptr) return NVRTC_ERROR_INVALID_PROGRAM;
  if (nopts < 0 || (nopts > 0 && opts == nullptr)) return NVRTC_ERROR_INVALID_INPUT;
  for (int i = 0; i < nopts; i++)
    if (opts[i] == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  return compile(p, nopts, opts);
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) { return output_size(prog, size, Output::log); }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) { return output_bytes(prog, log, Output::log); }
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *size) { return output_size(prog, size, Output::ptx); }
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx) { return output_bytes(prog, ptx, Output::ptx); }
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) { return output_size(prog, size, Output::cubin); }
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) { return output_bytes(prog, cubin, Output::cubin); }

} // extern "C"
