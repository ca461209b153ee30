#include "leanseq/nn/average_attention.h"

#include "leanseq/kernels/aan_gate.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

AverageAttentionImpl::AverageAttentionImpl(int64_t embed_dim, int64_t ffn_dim, double activation_dropout, bool fold)
    : activation_dropout_(activation_dropout), fold_(fold) {
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

bool AverageAttentionImpl::folds() const {
  return fold_ && fc1 && !is_training() && !torch::GradMode::is_enabled() && !fc1->packed() && !fc2->packed() &&
         !gate->packed() && fc1->bias.defined() && fc2->bias.defined() && gate->bias.defined();
}

torch::Tensor AverageAttentionImpl::folded_step(const torch::Tensor& x, AverageCache& cache) {
  const int64_t C = x.size(-1), F = fc1->weight.size(0);
  const auto w_x = gate->weight.narrow(1, 0, C), w_g = gate->weight.narrow(1, C, C);
  const auto in_weight = fold_in_.get({fc1->weight, gate->weight}, [&] { return torch::cat({fc1->weight, w_x}); });
  const auto out_weight =
      fold_out_.get({fc2->weight, gate->weight}, [&] { return torch::cat({fc2->weight, w_g.mm(fc2->weight)}); });
  const auto out_bias = fold_out_bias_.get({fc2->bias, gate->weight, gate->bias}, [&] {
    return torch::cat({fc2->bias, torch::addmv(gate->bias, w_g, fc2->bias)});
  });
  const auto y = kernels::linear(x, in_weight, {});  // [B, 1, F + 2C]: fc1 x (no bias), W_x x
  const auto fc1_x = y.narrow(-1, 0, F);
  if (cache.mean.defined() && !cache.fc1_mean.defined()) {  // the steps before were not folded
    cache.fc1_mean = kernels::linear(cache.mean, fc1->weight, {});
  }
  const double w = 1.0 / static_cast<double>(cache.steps + 1);
  cache.fc1_mean = cache.fc1_mean.defined() ? torch::lerp(cache.fc1_mean, fc1_x, w) : fc1_x;
  cache.mean = cache.mean.defined() ? torch::lerp(cache.mean, x, w) : x;
  cache.steps += 1;
  const auto out = kernels::linear((cache.fc1_mean + fc1->bias).relu_(), out_weight, out_bias);
  return kernels::aan_gate(out.narrow(-1, C, 2 * C) + y.narrow(-1, F, 2 * C), x, out.narrow(-1, 0, C));
}

torch::Tensor AverageAttentionImpl::step(const torch::Tensor& x, const torch::Tensor& padding, AverageCache& cache) {
  const int64_t n = x.size(1);
  if (n == 1 && !padding.defined() && !cache.count.defined() && folds()) return folded_step(x, cache);
  cache.fc1_mean = torch::Tensor();  // the folded steps' running product is not kept by the others
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
