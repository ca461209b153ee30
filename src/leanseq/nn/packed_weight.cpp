#include "leanseq/nn/packed_weight.h"

#include "leanseq/kernels/log_softmax.h"

namespace leanseq::nn {

void PackedWeight::pack(const torch::Tensor& weight, const torch::Tensor& bias, kernels::ComputeType type) {
  using kernels::ComputeType;
  int8_ = {};
  weight_ = bias_ = torch::Tensor();
  type_ = type;
  torch::NoGradGuard no_grad;
  switch (type) {
    case ComputeType::float32: break;
    case ComputeType::int8:
      TORCH_CHECK(weight.device().is_cpu(), "int8 weights are for the CPU");
      int8_ = kernels::quantize_weight(weight);
      if (bias.defined()) bias_ = bias.detach().to(torch::kFloat).contiguous();
      break;
    case ComputeType::bfloat16:
    case ComputeType::float16: {
      const auto dtype = type == ComputeType::bfloat16 ? torch::kBFloat16 : torch::kHalf;
      weight_ = weight.detach().to(dtype).contiguous();
      if (bias.defined()) bias_ = bias.detach().to(dtype);
      break;
    }
  }
}

torch::Tensor PackedWeight::forward(const torch::Tensor& x) const {
  if (type_ == kernels::ComputeType::int8) return kernels::int8_linear(x, int8_, bias_);
  return torch::linear(x.to(weight_.scalar_type()), weight_, bias_).to(x.scalar_type());
}

torch::Tensor PackedWeight::forward_relu(const torch::Tensor& x) const {
  if (type_ == kernels::ComputeType::int8) return kernels::int8_linear_relu(x, int8_, bias_);
  return torch::relu(forward(x));
}

torch::Tensor PackedWeight::forward_log_softmax(const torch::Tensor& x) const {
  if (type_ == kernels::ComputeType::int8) return kernels::int8_linear_log_softmax(x, int8_, bias_);
  return kernels::log_softmax(forward(x));
}

int64_t set_compute_type(torch::nn::Module& model, kernels::ComputeType type) {
  int64_t n = 0;
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* lp = dynamic_cast<LowPrecision*>(m.get())) {
      lp->set_compute_type(type);
      ++n;
    }
  }
  return n;
}

}  // namespace leanseq::nn
