// The masked 2D convolution of Pervasive Attention (Elbayad et al. 2018): a k x k convolution over
// the (target, source) grid whose kernel rows after the centre are masked, so that output row i
// (a target position) sees input rows <= i only, and every source position.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/derived_weight.h"
#include "leanseq/nn/incremental_state.h"

namespace leanseq::nn {

// Tensors are channels last: [B, T (target rows), S (source columns), C]. `weight` is
// [C_out, C_in / groups, k, k] like a Conv2d's (attn2d's names); only its first k / 2 + 1 rows
// enter the convolution, so the masked rows never affect an output and never receive a gradient
// (they are zero from the start). k must be odd.
class MaskedConv2dImpl : public torch::nn::Module {
 public:
  MaskedConv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t groups = 1,
                   bool bias = true);
  // x: [B, T, S, C_in] -> [B, T, S, C_out].
  torch::Tensor forward(const torch::Tensor& x);
  // The next n rows x: [B, n, S, C_in] -> [B, n, S, C_out], given the last k / 2 input rows in
  // `cache` (zero rows before the first); keeps the new last k / 2.
  torch::Tensor step(const torch::Tensor& x, GridRowsCache& cache);
  // The rows of `weight` that the convolution uses: [C_out, C_in / groups, k / 2 + 1, k].
  torch::Tensor causal_weight() const { return weight.narrow(2, 0, half_ + 1); }
  int64_t kernel_size() const { return 2 * half_ + 1; }

  torch::Tensor weight, bias;

 private:
  // Convolution of x with `top` zero rows above it; returns the rows that see only x's rows.
  torch::Tensor convolve(const torch::Tensor& x, int64_t top);
  // The same, as one product of every position's patch (its half + 1 rows by k columns of input
  // channels) by the weight: a full (groups 1) convolution at inference. oneDNN's convolution picks
  // its blocking by the grid's size and the CPU's caches, so a sentence's sums could change with the
  // batch it was in (seen on an AMD Zen 4); a product's rows do not depend on each other
  // (kernels/packed_products.h), so batching never changes a translation.
  torch::Tensor convolve_as_product(const torch::Tensor& x, int64_t top);
  DerivedWeight patch_weight_;
  int64_t half_, groups_;
};
TORCH_MODULE(MaskedConv2d);

}  // namespace leanseq::nn
