#include "leanseq/kernels/product_flops.h"

#include <atomic>

namespace leanseq::kernels {

namespace {
std::atomic<uint64_t> counted{0};
}  // namespace

void count_product_flops(int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return;
  counted.fetch_add(2 * static_cast<uint64_t>(batch) * static_cast<uint64_t>(m) * static_cast<uint64_t>(n) *
                        static_cast<uint64_t>(k),
                    std::memory_order_relaxed);
}

uint64_t product_flops() { return counted.load(std::memory_order_relaxed); }

}  // namespace leanseq::kernels
