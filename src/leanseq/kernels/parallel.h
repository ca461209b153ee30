// A minimal fork-join loop for the dedicated CPU kernels: they split their rows into chunks
// themselves, and only when there is enough work. The chunks run on the OpenMP team that LibTorch
// and oneDNN already keep (one pool of threads for all three, which wait GOMP_SPINCOUNT spins
// before sleeping, see core/blas.h), not on threads started per call: a start and join cost
// 25-130 us on a 2-vCPU virtual machine, more than many of the kernels' own work. They use at most
// core/threads.h's compute_threads(), which `--threads` / `threads:` set, so "one thread" means one
// thread here too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "leanseq/core/threads.h"

namespace leanseq::kernels {

// The number of workers for n items of roughly equal cost when each worker should get at least
// min_items_per_worker of them.
inline int workers_for(int64_t n, int64_t min_items_per_worker) {
  const int64_t hw = compute_threads();
  return static_cast<int>(std::max<int64_t>(1, std::min(hw, n / std::max<int64_t>(1, min_items_per_worker))));
}

using ChunkFunction = void (*)(void* context, int worker, int64_t begin, int64_t end);

// fn(context, w, begin, end) for the chunks w = 0, 1, ... of ceil(n / workers) items each, on an
// OpenMP team of up to `workers` threads (the caller's thread takes chunk 0). A smaller team (a
// nested call, OMP_THREAD_LIMIT) runs several chunks per thread: the chunks, and so the results,
// are the same.
void run_chunks(int64_t n, int workers, ChunkFunction fn, void* context);

// Calls fn(worker, begin, end) over contiguous chunks of [0, n), one per worker. fn must not throw.
template <class F>
void parallel_chunks(int64_t n, int workers, F&& fn) {
  if (workers <= 1 || n <= 1) {
    fn(0, int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  run_chunks(
      n, workers, [](void* c, int w, int64_t b, int64_t e) { (*static_cast<Fn*>(c))(w, b, e); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace leanseq::kernels
