// A minimal fork-join loop for the dedicated CPU kernels: they split their rows over std::threads
// themselves (ATen's OpenMP scheduling slowed whole-model training on small machines), and only
// when there is enough work. They use at most core/threads.h's compute_threads(), which
// `--threads` / `threads:` set, so "one thread" means one thread here too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "leanseq/core/threads.h"

namespace leanseq::kernels {

// The number of workers for n items of roughly equal cost when each worker should get at least
// min_items_per_worker of them.
inline int workers_for(int64_t n, int64_t min_items_per_worker) {
  const int64_t hw = compute_threads();
  return static_cast<int>(std::max<int64_t>(1, std::min(hw, n / std::max<int64_t>(1, min_items_per_worker))));
}

// Calls fn(worker, begin, end) over contiguous chunks of [0, n) on `workers` threads (the caller's
// thread takes the first chunk). fn must not throw.
template <class F>
void parallel_chunks(int64_t n, int workers, F&& fn) {
  if (workers <= 1 || n <= 1) {
    fn(0, int64_t{0}, n);
    return;
  }
  const int64_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) {
    const int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b < e) threads.emplace_back([&fn, w, b, e] { fn(w, b, e); });
  }
  fn(0, int64_t{0}, std::min(n, chunk));
  for (auto& t : threads) t.join();
}

}  // namespace leanseq::kernels
