#include "leanseq/core/threads.h"

#include <dlfcn.h>
#include <sched.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "leanseq/core/error.h"

namespace leanseq {

namespace {
std::atomic<int> chosen_threads{0};  // 0: not chosen
}  // namespace

int max_compute_threads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return 4 * static_cast<int>(std::max(1u, cpus));
}

void set_compute_threads(int64_t n) {
  if (n < 0) throw ConfigError("threads: " + std::to_string(n) + " is negative (0 keeps the default)");
  if (n > max_compute_threads()) {
    throw ConfigError("threads: " + std::to_string(n) + " is more than " + std::to_string(max_compute_threads()) +
                      " (4 x the " + std::to_string(max_compute_threads() / 4) + " CPUs here)");
  }
  if (n == 0) return;
  chosen_threads = static_cast<int>(n);
  torch::set_num_threads(static_cast<int>(n));
  // Looked up at run time: the BLAS behind LibTorch is chosen when it is installed (OpenBLAS,
  // BLIS, MKL, reference), and only OpenBLAS has this entry point. MKL follows ATen already.
  using SetThreads = void (*)(int);
  if (auto* f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(static_cast<int>(n));
}

int compute_threads() {
  if (const int n = chosen_threads.load(); n > 0) return n;
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n < 4096) return static_cast<int>(n);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int cores_available() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  std::set<std::pair<std::string, std::string>> cores;
  int cpus = 0;
  bool topology = true;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    ++cpus;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package(dir + "physical_package_id"), core(dir + "core_id");
    std::string p, c;
    if (!(package >> p) || !(core >> c)) topology = false;
    cores.emplace(p, c);
  }
  return std::max(1, topology ? static_cast<int>(cores.size()) : cpus);
}

void use_every_core_by_default() {
  if (chosen_threads.load() > 0 || std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS")) return;
  const int cores = cores_available();
  if (torch::get_num_threads() < cores) torch::set_num_threads(cores);
}

}  // namespace leanseq
