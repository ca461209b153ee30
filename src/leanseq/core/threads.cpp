#include "leanseq/core/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

namespace leanseq {

void set_compute_threads(int n) {
  if (n <= 0) return;
  torch::set_num_threads(n);
  // Looked up at run time: the BLAS behind LibTorch is chosen when it is installed (OpenBLAS,
  // BLIS, MKL, reference), and only OpenBLAS has this entry point. MKL follows ATen already.
  using SetThreads = void (*)(int);
  if (auto* f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}

}  // namespace leanseq
