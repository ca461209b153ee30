#include "leanseq/core/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace leanseq {

namespace {
std::atomic<int> chosen_threads{0};  // 0: not chosen
}  // namespace

void set_compute_threads(int n) {
  if (n <= 0) return;
  chosen_threads = n;
  torch::set_num_threads(n);
  // Looked up at run time: the BLAS behind LibTorch is chosen when it is installed (OpenBLAS,
  // BLIS, MKL, reference), and only OpenBLAS has this entry point. MKL follows ATen already.
  using SetThreads = void (*)(int);
  if (auto* f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
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
