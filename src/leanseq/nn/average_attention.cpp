#include "leanseq/nn/average_attention.h"

#include "leanseq/kernels/aan_gate.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

AverageAttentionImpl::AverageAttentionImpl(int64_t embed_dim, int64_t ffn_dim, double activation_dropout)
    : activation_dropout_(activation_dropout) {
  if (ffn_dim > 0) {
    fc1 = register_module("fc1", make_linear(embed_dim, ffn_dim));
    fc2 = register_module("fc2", make_linear(ffn_dim, embed_dim));
  }
  gate = register_module("gate", make_linear(2 * embed_dim, 2 * embed_dim));
}

torch::Tensor AverageAttentionImpl::mix(const torch::Tensor& x, const torch::Tensor& a) {
  auto g = a;
  if (fc1) g = fc2(maybe_dropout(fc1->forward_relu(a), activation_dropout_, is_training()));
  return kernels::aan_gate(gate(torch::cat({x, g}, -1)), x, g);
}

torch::Tensor AverageAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& padding) {
  const int64_t T = x.size(1);
  if (!padding.defined()) {
    return mix(x, torch::cumsum(x, 1) / torch::arange(1, T + 1, x.options()).view({1, T, 1}));
  }
  auto m = padding.logical_not().unsqueeze(-1).to(x.scalar_type());  // fed pads do not count
  return mix(x, torch::cumsum(x * m, 1) / torch::cumsum(m, 1).clamp_min(1));
}

torch::Tensor AverageAttentionImpl::step(const torch::Tensor& x, const torch::Tensor& padding, AverageCache& cache) {
  const int64_t n = x.size(1);
  if (padding.defined() && !cache.count.defined()) {
    cache.count = torch::full({x.size(0), 1, 1}, static_cast<double>(cache.steps), x.options());
  }
  torch::Tensor avg;
  if (!cache.count.defined()) {  // every position so far counts
    if (n == 1) {                // the common decoding step: one operator
      avg = cache.mean.defined() ? torch::lerp(cache.mean, x, 1.0 / static_cast<double>(cache.steps + 1)) : x;
    } else {
      auto sums = torch::cumsum(x, 1);
      if (cache.mean.defined()) sums = sums + cache.mean * static_cast<double>(cache.steps);
      avg = sums / torch::arange(cache.steps + 1, cache.steps + n + 1, x.options()).view({1, n, 1});
    }
  } else {
    auto m = padding.defined() ? padding.logical_not().unsqueeze(-1).to(x.scalar_type())
                               : torch::ones({x.size(0), n, 1}, x.options());
    auto sums = torch::cumsum(x * m, 1);
    if (cache.mean.defined()) sums = sums + cache.mean * cache.count;
    auto counts = torch::cumsum(m, 1) + cache.count;
    cache.count = counts.narrow(1, n - 1, 1);
    avg = sums / counts.clamp_min(1);
  }
  cache.mean = n == 1 ? avg : avg.narrow(1, n - 1, 1);
  cache.steps += n;
  return mix(x, avg);
}

}  // namespace leanseq::nn
