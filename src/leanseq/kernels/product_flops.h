// A process-wide count of the floating-point operations of the float32 matrix products the
// kernels send to oneDNN (linear layers and their gradients, kernels/dense.cpp; batched products,
// kernels/batched_matmul.cpp), two per multiply-add. Benchmarks read it before and after a piece of
// work to report the rate its products reached (bench/train_bench.cpp). Counting is one relaxed
// atomic addition per product. While a ProductShapes lives, the shapes of the sgemm products are
// tallied too, so that a benchmark can time each alone (onednn_sgemm, kernels/dense.h).
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

namespace leanseq::kernels {

// Adds the work of `batch` products of [m, k] by [k, n]: 2 * batch * m * n * k.
void count_product_flops(int64_t m, int64_t n, int64_t k, int64_t batch = 1);

// Everything counted since the process started.
uint64_t product_flops();

// One sgemm product: c [m, n] = op(a) op(b), op transposing where its flag is 'T', k the inner size.
struct ProductShape {
  char ta = 'N', tb = 'N';
  int64_t m = 0, n = 0, k = 0;
  bool operator<(const ProductShape& o) const { return std::tie(ta, tb, m, n, k) < std::tie(o.ta, o.tb, o.m, o.n, o.k); }
};

// count_product_flops for one sgemm product, whose shape a living ProductShapes also tallies.
void count_sgemm(const ProductShape& shape);

// While one lives, the sgemm products of every thread are tallied by shape (a mutex per product).
// One at a time in a process.
class ProductShapes {
 public:
  ProductShapes();
  ~ProductShapes();
  ProductShapes(const ProductShapes&) = delete;
  ProductShapes& operator=(const ProductShapes&) = delete;
  // How many products of each shape since it was made.
  std::map<ProductShape, int64_t> counts() const;
};

}  // namespace leanseq::kernels
