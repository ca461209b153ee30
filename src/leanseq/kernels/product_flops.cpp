#include "leanseq/kernels/product_flops.h"

#include <atomic>
#include <mutex>

namespace leanseq::kernels {

namespace {
std::atomic<uint64_t> counted{0};
std::atomic<bool> tallying{false};
std::mutex tally_mutex;
std::map<ProductShape, int64_t>& tally() {
  static std::map<ProductShape, int64_t> shapes;
  return shapes;
}
}  // namespace

void count_product_flops(int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return;
  counted.fetch_add(2 * static_cast<uint64_t>(batch) * static_cast<uint64_t>(m) * static_cast<uint64_t>(n) *
                        static_cast<uint64_t>(k),
                    std::memory_order_relaxed);
}

uint64_t product_flops() { return counted.load(std::memory_order_relaxed); }

void count_product(const ProductShape& shape) {
  count_product_flops(shape.m, shape.n, shape.k);
  if (!tallying.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(tally_mutex);
  ++tally()[shape];
}

ProductShapes::ProductShapes() {
  std::lock_guard<std::mutex> lock(tally_mutex);
  tally().clear();
  tallying.store(true);
}

ProductShapes::~ProductShapes() {
  tallying.store(false);
  std::lock_guard<std::mutex> lock(tally_mutex);
  tally().clear();
}

std::map<ProductShape, int64_t> ProductShapes::counts() const {
  std::lock_guard<std::mutex> lock(tally_mutex);
  return tally();
}

}  // namespace leanseq::kernels
