#include "leanseq/nn/masked_conv2d.h"

#include <cmath>

#include "leanseq/core/error.h"
#include "leanseq/kernels/dense.h"

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
  if (groups_ == 1 && !torch::GradMode::is_enabled() && x.is_cpu() && x.scalar_type() == torch::kFloat) {
    return convolve_as_product(x, top);
  }
  // Channels-last NCHW view: oneDNN convolves it without a layout copy (the depthwise case is
  // ~30x faster than on a contiguous NCHW tensor on CPU).
  auto y = torch::conv2d(x.permute({0, 3, 1, 2}), causal_weight(), bias, 1, {top, half_}, 1, groups_);
  // With `top` zero rows above and below, output row r covers input rows r - top .. r - top + half.
  y = y.narrow(2, 0, x.size(1) + top - half_);
  return y.permute({0, 2, 3, 1}).contiguous();
}

torch::Tensor MaskedConv2dImpl::convolve_as_product(const torch::Tensor& x, int64_t top) {
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3), k = 2 * half_ + 1;
  const int64_t rows = H + top - half_, taps = (half_ + 1) * k * C;
  // [C_out, half + 1, k, C_in]: the order of a patch's values, kept while the weight is unchanged.
  const auto w = patch_weight_.get({weight}, [&] {
    return causal_weight().permute({0, 2, 3, 1}).reshape({weight.size(0), taps});
  });
  // `top` zero rows above, half zero columns each side; output (r, s) reads rows r .. r + half and
  // columns s .. s + 2 half of it.
  const auto padded = torch::constant_pad_nd(x.contiguous(), {0, 0, half_, half_, top, 0});
  const int64_t row_stride = (W + 2 * half_) * C, image_stride = (H + top) * row_stride;
  // Images at a time, so that their patches take at most about 64 MiB (at least one image).
  const int64_t per_image = rows * W * taps * static_cast<int64_t>(sizeof(float));
  const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(1, per_image));
  std::vector<torch::Tensor> outs;
  for (int64_t b = 0; b < B; b += chunk) {
    const int64_t n = std::min(chunk, B - b);
    const auto patches = padded.narrow(0, b, n)
                             .as_strided({n, rows, W, half_ + 1, k, C},
                                         {image_stride, row_stride, C, row_stride, C, 1})
                             .reshape({n * rows * W, taps});
    outs.push_back(kernels::linear(patches, w, bias).view({n, rows, W, weight.size(0)}));
  }
  return outs.size() == 1 ? outs.front() : torch::cat(outs, 0);
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
