// A process-wide count of the floating-point operations of the float32 matrix products the
// kernels send to oneDNN (linear layers and their gradients, kernels/dense.cpp; batched products,
// kernels/batched_matmul.cpp), two per multiply-add. Benchmarks read it before and after a piece of
// work to report the rate its products reached (bench/train_bench.cpp). Counting is one relaxed
// atomic addition per product.
#pragma once
#include <cstdint>

namespace leanseq::kernels {

// Adds the work of `batch` products of [m, k] by [k, n]: 2 * batch * m * n * k.
void count_product_flops(int64_t m, int64_t n, int64_t k, int64_t batch = 1);

// Everything counted since the process started.
uint64_t product_flops();

}  // namespace leanseq::kernels
