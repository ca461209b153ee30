// The element-wise updates of Adam and of fairseq's NAG as one pass over each parameter's memory.
// Composed of ATen operators, Adam's update is eight operators per parameter (two of which
// allocate a temporary the size of the parameter) and NAG's four, each a full pass over memory;
// for a model of 7.6M parameters that is about 600 MB read and written per update for Adam,
// where one pass reads the parameter, its gradient and the two moments and writes three of them
// back (210 MB). The optimizers of train/ call these on float32 CPU tensors and keep the
// composite for everything else.
#pragma once
#include <cstdint>
#include <vector>

namespace leanseq::kernels {

// One parameter's float32 buffers, each of n contiguous elements, with the scalars of its update.
struct AdamSpan {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t n;
  // torch::optim::Adam's update (LibTorch 1.13): with g = grad_scale * grad + weight_decay * param,
  //   exp_avg = beta1 exp_avg + (1 - beta1) g;  exp_avg_sq = beta2 exp_avg_sq + (1 - beta2) g^2
  //   param -= step_size * exp_avg / (sqrt(exp_avg_sq) * inv_sqrt_bias_correction2 + eps)
  // where step_size = lr / (1 - beta1^step) and inv_sqrt_bias_correction2 = 1 / sqrt(1 - beta2^step).
  float beta1, beta2, weight_decay, step_size, inv_sqrt_bias_correction2, eps;
  float grad_scale = 1;  // the trainer's normalisation of the gradient, applied in the same pass
};

struct NagSpan {
  float* param;
  const float* grad;
  float* momentum_buffer;
  int64_t n;
  // fairseq's NAG (train/nag.h), with the previous buffer on the right-hand sides:
  //   param = param_decay * param + buf_in_param * buf + grad_in_param * grad
  //   buf = buf_decay * buf + grad_in_buf * grad
  float param_decay, buf_in_param, grad_in_param, buf_decay, grad_in_buf;
};

// Update every span, the elements of all spans split evenly over core/threads.h's compute threads.
void adam_update(const std::vector<AdamSpan>& spans);
void nag_update(const std::vector<NagSpan>& spans);

}  // namespace leanseq::kernels
