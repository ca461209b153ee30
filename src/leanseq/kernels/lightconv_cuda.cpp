// The CUDA path of kernels::lightconv: an autograd Function around the kernels of
// kernels/cuda/lightconv_cuda.cu. Compiled with them when CMake's LEANSEQ_CUDA option is on (it
// needs a CUDA build of LibTorch); otherwise the entry points say that the path is not built.
#include "leanseq/kernels/lightconv.h"

#ifdef LEANSEQ_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "leanseq/kernels/cuda/lightconv_cuda.cuh"
#endif

namespace leanseq::kernels {

#ifdef LEANSEQ_WITH_CUDA

namespace {

void check(cudaError_t e, const char* what) { TORCH_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e)); }

class LightconvCudaFunction : public torch::autograd::Function<LightconvCudaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w_in, int64_t padding_l) {
    auto x = x_in.contiguous(), w = w_in.contiguous();
    const auto s = lightconv_shape(x, w, padding_l);
    auto y = torch::empty_like(x);
    auto stream = at::cuda::getCurrentCUDAStream(x.get_device()).stream();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "lightconv_cuda_forward", [&] {
      check(cuda::lightconv_forward<scalar_t>(s, x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                              stream),
            "lightconv_cuda forward");
    });
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
    auto stream = at::cuda::getCurrentCUDAStream(x.get_device()).stream();
    torch::Tensor gx, gw;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "lightconv_cuda_backward", [&] {
      if (ctx->needs_input_grad(0)) {
        gx = torch::empty_like(x);
        check(cuda::lightconv_grad_x<scalar_t>(s, g.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                                               gx.data_ptr<scalar_t>(), stream),
              "lightconv_cuda grad_x");
      }
      if (ctx->needs_input_grad(1)) {
        auto full = torch::empty({s.B, s.H, s.T, s.K}, x.options());
        check(cuda::lightconv_grad_w<scalar_t>(s, g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                               full.data_ptr<scalar_t>(), stream),
              "lightconv_cuda grad_w");
        gw = s.shared() ? full.sum({0, 2}) : full;
      }
    });
    return {gx, gw, torch::Tensor()};
  }
};

}  // namespace

bool lightconv_cuda_available() { return true; }

torch::Tensor lightconv_cuda(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l) {
  TORCH_CHECK(x.is_cuda() && weights.is_cuda(), "lightconv_cuda: CUDA tensors expected");
  TORCH_CHECK(x.dim() == 3 && (weights.dim() == 2 || weights.dim() == 4),
              "lightconv_cuda: x must be [B, T, C] and weights [H, K] or [B, H, T, K]");
  TORCH_CHECK(x.scalar_type() == weights.scalar_type(), "lightconv_cuda: x and weights must have one dtype");
  return LightconvCudaFunction::apply(x, weights, padding_l);
}

#else

bool lightconv_cuda_available() { return false; }

torch::Tensor lightconv_cuda(const torch::Tensor&, const torch::Tensor&, int64_t) {
  TORCH_CHECK(false, "lightconv_cuda: leanseq was built without CUDA kernels (cmake -DLEANSEQ_CUDA=ON)");
}

#endif

}  // namespace leanseq::kernels
