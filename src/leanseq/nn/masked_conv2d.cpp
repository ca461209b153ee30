#include "leanseq/nn/masked_conv2d.h"

#include <cmath>

#include "leanseq/core/error.h"

namespace leanseq::nn {

MaskedConv2dImpl::MaskedConv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t groups,
                                   bool bias_on)
    : half_(kernel_size / 2), groups_(groups) {
  if (kernel_size < 1 || kernel_size % 2 == 0) {
    throw ConfigError("masked convolution: kernel size must be odd, got " + std::to_string(kernel_size));
  }
  if (groups < 1 || in_channels % groups != 0 || out_channels % groups != 0) {
    throw ConfigError("masked convolution: " + std::to_string(in_channels) + " -> " + std::to_string(out_channels) +
                      " channels cannot be split into " + std::to_string(groups) + " groups");
  }
  // Conv2d's default initialisation (uniform, bound 1/sqrt(fan_in)), then the masked rows zeroed.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels / groups * kernel_size * kernel_size));
  weight = register_parameter(
      "weight", torch::empty({out_channels, in_channels / groups, kernel_size, kernel_size}).uniform_(-bound, bound));
  {
    torch::NoGradGuard g;
    weight.narrow(2, half_ + 1, half_).zero_();
  }
  if (bias_on) bias = register_parameter("bias", torch::empty({out_channels}).uniform_(-bound, bound));
}

torch::Tensor MaskedConv2dImpl::convolve(const torch::Tensor& x, int64_t top) {
  // Channels-last NCHW view: oneDNN convolves it without a layout copy (the depthwise case is
  // ~30x faster than on a contiguous NCHW tensor on CPU).
  auto y = torch::conv2d(x.permute({0, 3, 1, 2}), causal_weight(), bias, 1, {top, half_}, 1, groups_);
  // With `top` zero rows above and below, output row r covers input rows r - top .. r - top + half.
  y = y.narrow(2, 0, x.size(1) + top - half_);
  return y.permute({0, 2, 3, 1}).contiguous();
}

torch::Tensor MaskedConv2dImpl::forward(const torch::Tensor& x) { return convolve(x, half_); }

torch::Tensor MaskedConv2dImpl::step(const torch::Tensor& x, GridRowsCache& cache) {
  if (half_ == 0) return convolve(x, 0);
  if (!cache.rows.defined()) cache.rows = torch::zeros({x.size(0), half_, x.size(2), x.size(3)}, x.options());
  auto window = torch::cat({cache.rows, x}, 1);  // [B, half + n, S, C]
  cache.rows = window.narrow(1, x.size(1), half_);
  return convolve(window, 0);
}

}  // namespace leanseq::nn
