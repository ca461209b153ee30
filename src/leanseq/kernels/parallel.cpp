#include "leanseq/kernels/parallel.h"

#include <omp.h>

namespace leanseq::kernels {

void run_chunks(int64_t n, int workers, ChunkFunction fn, void* context) {
  const int64_t chunk = (n + workers - 1) / workers;
  const int chunks = static_cast<int>((n + chunk - 1) / chunk);
#pragma omp parallel num_threads(chunks)
  {
    const int team = omp_get_num_threads();
    for (int w = omp_get_thread_num(); w < chunks; w += team) fn(context, w, w * chunk, std::min(n, (w + 1) * chunk));
  }
}

}  // namespace leanseq::kernels
