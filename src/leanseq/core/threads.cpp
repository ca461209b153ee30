#include "leanseq/core/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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

}  // namespace leanseq
