// A process-wide count of the operations of the matrix products the kernels send to oneDNN
// (float32 linear layers and their gradients, kernels/dense.cpp; batched products,
// kernels/batched_matmul.cpp; int8 linear layers, kernels/int8_gemm.cpp), two per multiply-add.
// Benchmarks read it before and after a piece of work to report the rate its products reached
// (bench/train_bench.cpp). Counting is one relaxed atomic addition per product. While a
// ProductShapes lives, the shapes of the weight products (sgemm and int8) are tallied too, so that
// a benchmark can time each alone (bench/products_alone.h).
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

namespace leanseq::kernels {

// Adds the work of `batch` products of [m, k] by [k, n]: 2 * batch * m * n * k.
void count_product_flops(int64_t m, int64_t n, int64_t k, int64_t batch = 1);

// Everything counted since the process started.
uint64_t product_flops();

// One sgemm product: c [m, n] = op(a) op(b), op transposing where its flag is 'T', k the inner size;
// the same on bfloat16 operands (bf16: onednn_bf16_gemm, kernels/bf16_products.h); or (int8) one
// int8_linear of m rows of k features by a weight of n outputs (ta 'N', tb 'T').
struct ProductShape {
  char ta = 'N', tb = 'N';
  int64_t m = 0, n = 0, k = 0;
  bool int8 = false;
  bool bf16 = false;
  bool operator<(const ProductShape& o) const {
    return std::tie(int8, bf16, ta, tb, m, n, k) < std::tie(o.int8, o.bf16, o.ta, o.tb, o.m, o.n, o.k);
  }
};

// count_product_flops for one weight product (sgemm or int8), whose shape a living ProductShapes
// also tallies.
void count_product(const ProductShape& shape);

// While one lives, the weight products (count_product) of every thread are tallied by shape (a
// mutex per product).
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
