#include "leanseq/core/blas.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace leanseq {

namespace {

// Marks a process whose settings leanseq made ("1": OPENBLAS_CORETYPE among them, whether the
// library was switched in the process or the program restarted; "threads": restarted for the
// thread settings only; "failed": the restart failed), for the log line; it also stops a loop.
constexpr const char* kMarker = "LEANSEQ_SET_OPENBLAS_CORETYPE";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// How wide the float32 kernels of an OpenBLAS core family are: 3 AVX-512, 2 AVX2 + FMA, 1 AVX,
// 0 SSE (Prescott and its kin) or unknown.
int kernel_rank(const std::string& core) {
  const std::string c = lower(core);
  for (const char* k : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (c == k) return 3;
  }
  for (const char* k : {"haswell", "zen", "skylake"}) {
    if (c == k) return 2;
  }
  return c == "sandybridge" ? 1 : 0;
}

// The best family for a CPU, as an OPENBLAS_CORETYPE value, and its rank.
std::pair<std::string, int> best_family(const CpuVectorSupport& cpu) {
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq && cpu.avx512cd) return {"SKYLAKEX", 3};
  if (cpu.avx2 && cpu.fma) return {"HASWELL", 2};
  if (cpu.avx) return {"SANDYBRIDGE", 1};
  return {"", 0};
}

template <class F>
F openblas_entry(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

std::string loaded_openblas_core() {
  using Name = char* (*)();
  auto* f = openblas_entry<Name>("openblas_get_corename");
  const char* core = f ? f() : nullptr;
  return core ? core : "";
}

}  // namespace

CpuVectorSupport detect_cpu_vector_support() {
  CpuVectorSupport s;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  s.avx = __builtin_cpu_supports("avx");
  s.avx2 = __builtin_cpu_supports("avx2");
  s.fma = __builtin_cpu_supports("fma");
  s.avx512f = __builtin_cpu_supports("avx512f");
  s.avx512bw = __builtin_cpu_supports("avx512bw");
  s.avx512vl = __builtin_cpu_supports("avx512vl");
  s.avx512dq = __builtin_cpu_supports("avx512dq");
  s.avx512cd = __builtin_cpu_supports("avx512cd");
  s.avx512vnni = __builtin_cpu_supports("avx512vnni");
  s.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  s.avxvnni = __builtin_cpu_supports("avxvnni");
  s.amx_int8 = __builtin_cpu_supports("amx-int8");
#endif
  return s;
}

std::string openblas_coretype_to_request(const std::string& loaded_core, const CpuVectorSupport& cpu,
                                         const char* user_setting) {
  if (user_setting != nullptr || loaded_core.empty()) return "";
  const auto [family, rank] = best_family(cpu);
  return rank > kernel_rank(loaded_core) ? family : "";
}

std::vector<std::pair<std::string, std::string>> thread_wait_settings(const char* openblas_timeout,
                                                                      const char* gomp_spincount,
                                                                      const char* omp_wait_policy) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!openblas_timeout) out.emplace_back("OPENBLAS_THREAD_TIMEOUT", "4");
  if (!gomp_spincount && !omp_wait_policy) out.emplace_back("GOMP_SPINCOUNT", "10000");
  return out;
}

std::string better_openblas_coretype() {
  return openblas_coretype_to_request(loaded_openblas_core(), detect_cpu_vector_support(), nullptr);
}

namespace {

// The value of `name` in a NULL-terminated environment block, or nullptr.
const char* find_in(char** envp, const char* name) {
  const size_t n = std::strlen(name);
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

}  // namespace

void restart_with_thread_settings(char** argv, char** envp) {
  if (find_in(envp, kMarker) != nullptr) return;  // a restarted program, or one whose restart failed
  const auto settings = thread_wait_settings(find_in(envp, "OPENBLAS_THREAD_TIMEOUT"), find_in(envp, "GOMP_SPINCOUNT"),
                                             find_in(envp, "OMP_WAIT_POLICY"));
  if (settings.empty()) return;
  std::vector<std::string> added;
  for (const auto& [name, value] : settings) added.push_back(name + "=" + value);
  std::vector<char*> env;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) env.push_back(*e);
  for (auto& a : added) env.push_back(a.data());
  env.push_back(nullptr);
  execve("/proc/self/exe", argv, env.data());  // returns only when it failed: main() tries again
}

namespace {

// The loaded OpenBLAS chooses its kernels again, as OPENBLAS_CORETYPE (or its own detection, when
// unset) says; false when it has no entry points for that.
bool choose_openblas_kernels_again() {
  using Call = void (*)();
  auto* quit = openblas_entry<Call>("gotoblas_dynamic_quit");
  auto* init = openblas_entry<Call>("gotoblas_dynamic_init");
  if (!quit || !init) return false;
  quit();
  init();
  return true;
}

}  // namespace

bool use_best_openblas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return false;  // the user's, or set when the library loaded
  const std::string request = better_openblas_coretype();
  if (request.empty()) return false;
  setenv("OPENBLAS_CORETYPE", request.c_str(), 1);
  if (choose_openblas_kernels_again() && lower(loaded_openblas_core()) == lower(request)) {
    setenv(kMarker, "1", 1);
    return true;
  }
  unsetenv("OPENBLAS_CORETYPE");
  choose_openblas_kernels_again();  // what it chose before, by its own detection
  return false;
}

void ensure_fast_blas(char** argv) {
  if (std::getenv(kMarker) != nullptr) return;  // set up already (or the restart failed)
  const bool switched = use_best_openblas_kernels();
  // What the switch could not make, unless the user set the variable: a restart with it set.
  const std::string request = switched || std::getenv("OPENBLAS_CORETYPE") ? "" : better_openblas_coretype();
  auto settings = thread_wait_settings(std::getenv("OPENBLAS_THREAD_TIMEOUT"), std::getenv("GOMP_SPINCOUNT"),
                                       std::getenv("OMP_WAIT_POLICY"));
  if (!request.empty()) settings.emplace_back("OPENBLAS_CORETYPE", request);
  if (settings.empty()) return;
  for (const auto& [name, value] : settings) setenv(name.c_str(), value.c_str(), 1);
  setenv(kMarker, switched || !request.empty() ? "1" : "threads", 1);
  execv("/proc/self/exe", argv);
  // Not re-executed (no /proc, say): run on with the libraries' choices, and say so in the log.
  for (const auto& [name, value] : settings) unsetenv(name.c_str());
  setenv(kMarker, "failed", 1);
}

namespace {
// "; idle threads: ...": how long the thread pools spin after their work.
std::string idle_thread_summary() {
  const char* timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return "; idle threads: OPENBLAS_THREAD_TIMEOUT=" + std::string(timeout ? timeout : "unset") +
         (policy ? ", OMP_WAIT_POLICY=" + std::string(policy) : ", GOMP_SPINCOUNT=" + std::string(spin ? spin : "unset"));
}
}  // namespace

std::string blas_summary() {
  using Config = char* (*)();
  auto* config = openblas_entry<Config>("openblas_get_config");
  std::string line;
  if (!config) {
    line = "BLAS: not OpenBLAS (the library LibTorch was linked with chooses its own kernels)";
    return line + idle_thread_summary();
  }
  std::string version = config();
  version = version.substr(0, version.find(' ', version.find(' ') + 1));  // "OpenBLAS 0.3.21"
  line = "BLAS: " + version + ", " + loaded_openblas_core() + " kernels";
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const char* marker = std::getenv(kMarker);
  if (marker && std::string(marker) == "failed") {
    line += " (the program could not restart with its BLAS and thread settings)";
  } else if (marker && std::string(marker) == "1") {
    line += " (OPENBLAS_CORETYPE=" + std::string(user ? user : "") + " set by leanseq for this CPU)";
  } else if (user) {
    line += " (OPENBLAS_CORETYPE=" + std::string(user) + " from the environment)";
  }
  return line + idle_thread_summary();
}

}  // namespace leanseq
