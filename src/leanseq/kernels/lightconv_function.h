// The autograd Function shared by the dedicated lightconv kernels (private to kernels/). A backend
// supplies the three computations on contiguous tensors:
//   static torch::Tensor forward(const LightconvShape&, const torch::Tensor& x, const torch::Tensor& w);
//   static torch::Tensor grad_x(const LightconvShape&, const torch::Tensor& g, const torch::Tensor& w);
//   static torch::Tensor grad_w(const LightconvShape&, const torch::Tensor& g, const torch::Tensor& x);
// (grad_w returns the gradient in w's own shape: [H, K] or [B, H, T, K]).
#pragma once
#include <torch/torch.h>

#include "leanseq/kernels/lightconv.h"

namespace leanseq::kernels {

template <class Backend>
class LightconvFunction : public torch::autograd::Function<LightconvFunction<Backend>> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w_in, int64_t padding_l) {
    auto x = x_in.contiguous(), w = w_in.contiguous();
    auto y = Backend::forward(lightconv_shape(x, w, padding_l), x, w);
    ctx->save_for_backward({x, w});
    ctx->saved_data["padding_l"] = padding_l;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto s = lightconv_shape(x, w, ctx->saved_data["padding_l"].toInt());
    auto g = grad_out[0].contiguous();
    torch::Tensor gx, gw;
    if (ctx->needs_input_grad(0)) gx = Backend::grad_x(s, g, w);
    if (ctx->needs_input_grad(1)) gw = Backend::grad_w(s, g, x);
    return {gx, gw, torch::Tensor()};
  }
};

// Checks the arguments of a dedicated kernel (`name` for messages) and applies it.
template <class Backend>
torch::Tensor apply_lightconv_kernel(const char* name, const torch::Tensor& x, const torch::Tensor& weights,
                                     int64_t padding_l) {
  TORCH_CHECK(x.device() == weights.device() && Backend::accepts(x), name, ": tensors on ", Backend::device_name(),
              " expected");
  TORCH_CHECK(x.dim() == 3 && (weights.dim() == 2 || weights.dim() == 4), name,
              ": x must be [B, T, C] and weights [H, K] or [B, H, T, K]");
  TORCH_CHECK(x.scalar_type() == weights.scalar_type(), name, ": x and weights must have one dtype");
  return LightconvFunction<Backend>::apply(x, weights, padding_l);
}

}  // namespace leanseq::kernels
