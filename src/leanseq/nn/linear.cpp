#include "leanseq/nn/linear.h"

namespace leanseq::nn {

torch::Tensor LinearImpl::forward_relu(const torch::Tensor& input) {
  const bool records = torch::GradMode::is_enabled() &&
                       (input.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (records || !bias.defined() || input.dim() < 1 || packed_.packed()) return torch::relu(forward(input));
  if (input.size(-1) > 0 && input.numel() / input.size(-1) <= kernels::onednn_rows()) return forward(input).relu_();
  auto sizes = input.sizes().vec();
  sizes.back() = weight.size(0);
  return at::_addmm_activation(bias, input.reshape({-1, input.size(-1)}), weight.t()).view(sizes);
}

Linear make_linear(int64_t in, int64_t out, bool bias, double gain) {
  Linear l(torch::nn::LinearOptions(in, out).bias(bias));
  torch::nn::init::xavier_uniform_(l->weight, gain);
  if (bias) torch::nn::init::zeros_(l->bias);
  return l;
}

}  // namespace leanseq::nn
