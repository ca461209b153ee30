// The time a piece of work's weight products take alone: each product shape a ProductShapes
// tallied (kernels/product_flops.h), float32 sgemm or int8_linear, timed on operands of its own
// (the median of 5 calls after one), times how often the work ran it. The limit the work's
// products would reach with nothing around them; a benchmark divides it by the work's measured
// time for the fraction of that limit it runs at.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <map>
#include <vector>

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
      a = s.ta == 'N' ? torch::randn({s.m, s.k}) : torch::randn({s.k, s.m});
      b = s.tb == 'N' ? torch::randn({s.k, s.n}) : torch::randn({s.n, s.k});
      c = torch::empty({s.m, s.n});
      if (!kernels::onednn_sgemm(s.ta, s.tb, a, b, c)) continue;  // the first call, untimed
      product = [&] { kernels::onednn_sgemm(s.ta, s.tb, a, b, c); };
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
