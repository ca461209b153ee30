// The CUDA path of kernels::lightconv: an autograd Function around the kernels of
// kernels/cuda/lightconv_cuda.cu. Compiled with them when CMake's LEANSEQ_CUDA option is on (it
// needs a CUDA build of LibTorch); otherwise the entry points say that the path is not built.
#include "leanseq/kernels/lightconv.h"

#ifdef LEANSEQ_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "leanseq/kernels/cuda/lightconv_cuda.cuh"
#include "leanseq/kernels/lightconv_function.h"
#endif

namespace leanseq::kernels {

#ifdef LEANSEQ_WITH_CUDA

namespace {
void check(cudaError_t e, const char* what) { TORCH_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e)); }
cudaStream_t stream_of(const torch::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.get_device()).stream(); }
}  // namespace

struct LightconvCuda {
  static bool accepts(const torch::Tensor& x) { return x.is_cuda(); }
  static const char* device_name() { return "CUDA"; }

  static torch::Tensor forward(const LightconvShape& s, const torch::Tensor& x, const torch::Tensor& w) {
    auto y = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "lightconv_cuda_forward", [&] {
      check(cuda::lightconv_forward<scalar_t>(s, x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                              stream_of(x)),
            "lightconv_cuda forward");
    });
    return y;
  }

  static torch::Tensor grad_x(const LightconvShape& s, const torch::Tensor& g, const torch::Tensor& w) {
    auto gx = torch::empty_like(g);
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "lightconv_cuda_grad_x", [&] {
      check(cuda::lightconv_grad_x<scalar_t>(s, g.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(),
                                             stream_of(g)),
            "lightconv_cuda grad_x");
    });
    return gx;
  }

  static torch::Tensor grad_w(const LightconvShape& s, const torch::Tensor& g, const torch::Tensor& x) {
    auto full = torch::empty({s.B, s.H, s.T, s.K}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "lightconv_cuda_grad_w", [&] {
      check(cuda::lightconv_grad_w<scalar_t>(s, g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                             full.data_ptr<scalar_t>(), stream_of(x)),
            "lightconv_cuda grad_w");
    });
    return s.shared() ? full.sum(std::vector<int64_t>{0, 2}) : full;
  }
};

bool lightconv_cuda_available() { return true; }

torch::Tensor lightconv_cuda(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l) {
  return apply_lightconv_kernel<LightconvCuda>("lightconv_cuda", x, weights, padding_l);
}

#else

bool lightconv_cuda_available() { return false; }

torch::Tensor lightconv_cuda(const torch::Tensor&, const torch::Tensor&, int64_t) {
  TORCH_CHECK(false, "lightconv_cuda: leanseq was built without CUDA kernels (cmake -DLEANSEQ_CUDA=ON)");
}

#endif

}  // namespace leanseq::kernels
