// A layer's weight in its inference compute type (kernels/compute_type.h): int8 with per-row
// scales, or a bfloat16/float16 copy. Layers whose forward is a matrix product hold one and say
// so by implementing LowPrecision; set_compute_type() packs every such layer of a model once
// after loading (and after moving it to its device). An unpacked weight leaves the layer as it is.
#pragma once
#include <torch/torch.h>

#include "leanseq/kernels/compute_type.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/int8_gemm.h"

namespace leanseq::nn {

class PackedWeight {
 public:
  // `weight` [N, K] and `bias` ([N] or undefined) in `type`; float32 drops the packed copy.
  void pack(const torch::Tensor& weight, const torch::Tensor& bias, kernels::ComputeType type);
  bool packed() const { return type_ != kernels::ComputeType::float32; }
  kernels::ComputeType type() const { return type_; }
  // x [..., K] times the packed weight, plus its bias: [..., N] in x's type.
  torch::Tensor forward(const torch::Tensor& x) const;
  // relu(forward(x)); int8 applies the relu while scaling its product back.
  torch::Tensor forward_relu(const torch::Tensor& x) const;
  // kernels::log_softmax(forward(x)) in float32; int8 takes each row's log-probabilities while
  // scaling it back.
  torch::Tensor forward_log_softmax(const torch::Tensor& x) const;

 private:
  kernels::ComputeType type_ = kernels::ComputeType::float32;
  kernels::Int8Weight int8_;
  torch::Tensor weight_, bias_;  // bfloat16/float16 copies, or the float32 bias beside int8_
};

// x times `weight`^T + `bias`, through `packed` when it is packed (float32: kernels/dense.h).
inline torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                            const PackedWeight& packed) {
  return packed.packed() ? packed.forward(x) : kernels::linear(x, weight, bias);
}

// A module with matrix products that can run in a lower-precision compute type.
class LowPrecision {
 public:
  virtual ~LowPrecision() = default;
  virtual void set_compute_type(kernels::ComputeType type) = 0;
};

// Packs every LowPrecision module of `model` (itself included) for `type`; returns how many.
int64_t set_compute_type(torch::nn::Module& model, kernels::ComputeType type);

}  // namespace leanseq::nn
