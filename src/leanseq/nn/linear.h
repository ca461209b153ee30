// fairseq's Linear helper: xavier-uniform weight, zero bias.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/packed_weight.h"

namespace leanseq::nn {

// torch::nn::Linear whose forward is ATen's linear: one operator, and on CUDA one GEMM with the
// bias in its epilogue for any contiguous input. LibTorch's own forward multiplies and then adds
// the bias in a second operator whenever the input has more than two dimensions, as every
// [B, T, C] activation here does. Parameters, names and initialisation are LibTorch's.
// With a compute type set (packed_weight.h), the product runs in that type.
class LinearImpl : public torch::nn::LinearImpl, public LowPrecision {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor& input) { return linear(input, weight, bias, packed_); }
  // relu(forward(input)): kernels::linear_relu (one operator when nothing is recorded), or the
  // packed weight's (int8 applies the relu while scaling its product back).
  torch::Tensor forward_relu(const torch::Tensor& input);
  void set_compute_type(kernels::ComputeType type) override { packed_.pack(weight, bias, type); }
  bool packed() const { return packed_.packed(); }  // a compute type other than float32 is set

 private:
  PackedWeight packed_;
};
TORCH_MODULE(Linear);

Linear make_linear(int64_t in, int64_t out, bool bias = true, double gain = 1.0);

}  // namespace leanseq::nn
