#include "leanseq/nn/linear.h"

namespace leanseq::nn {

torch::Tensor LinearImpl::forward_relu(const torch::Tensor& input) {
  if (packed_.packed()) return packed_.forward_relu(input);
  return kernels::linear_relu(input, weight, bias);
}

Linear make_linear(int64_t in, int64_t out, bool bias, double gain) {
  Linear l(torch::nn::LinearOptions(in, out).bias(bias));
  torch::nn::init::xavier_uniform_(l->weight, gain);
  if (bias) torch::nn::init::zeros_(l->bias);
  return l;
}

}  // namespace leanseq::nn
