// The time a piece of work's weight products take alone: each product shape a ProductShapes
// tallied (kernels/product_flops.h), float32 sgemm, bfloat16 matmul or int8_linear, timed on
// operands of its own (the median of 5 calls after one), times how often the work ran it. The
// limit the work's products would reach with nothing around them; a benchmark divides it by the
// work's measured time for the fraction of that limit it runs at.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <map>
#include <vector>

#include "leanseq/kernels/bf16_products.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/kernels/product_flops.h"
#include "median.h"

namespace leanseq::bench {

inline double products_alone_seconds(const std::map<kernels::ProductShape, int64_t>& shapes) {
  double seconds = 0;
  for (const auto& [s, calls] : shapes) {
    std::function<void()> product;
    torch::Tensor a, b, c;
    kernels::Int8Weight w;
    if (s.int8) {
      a = torch::randn({s.m, s.k});
      w = kernels::quantize_weight(torch::randn({s.n, s.k}));
      product = [&] { c = kernels::int8_linear(a, w, {}); };
      product();  // the first call, untimed
    } else {
      const auto type = s.bf16 ? torch::kBFloat16 : torch::kFloat;
      a = (s.ta == 'N' ? torch::randn({s.m, s.k}) : torch::randn({s.k, s.m})).to(type);
      b = (s.tb == 'N' ? torch::randn({s.k, s.n}) : torch::randn({s.n, s.k})).to(type);
      c = torch::empty({s.m, s.n});
      const bool bf16 = s.bf16;
      const char ta = s.ta, tb = s.tb;
      product = [&, bf16, ta, tb] {
        const bool done = bf16 ? kernels::onednn_bf16_gemm(ta, tb, a, b, c) : kernels::onednn_sgemm(ta, tb, a, b, c);
        if (!done) c = torch::Tensor();
      };
      product();  // the first call, untimed
      if (!c.defined()) continue;  // refused
    }
    std::vector<double> times;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      product();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    seconds += median(times) * static_cast<double>(calls);
  }
  return seconds;
}

}  // namespace leanseq::bench
