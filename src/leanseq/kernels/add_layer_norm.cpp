#include "leanseq/kernels/add_layer_norm.h"

#include <cmath>

#include "leanseq/kernels/parallel.h"

#ifdef LEANSEQ_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "leanseq/kernels/cuda/add_layer_norm_cuda.cuh"
#endif

namespace leanseq::kernels {

namespace {

// One row: the sum into o, its mean and variance (centred, as a second pass over o in cache),
// then o normalised in place. Compiled for AVX2 and a baseline; the loops vectorise.
template <class S>
__attribute__((target_clones("avx2", "default"))) void norm_row(int64_t C, const S* __restrict r, const S* __restrict y,
                                                                const S* __restrict w, const S* __restrict b, S eps,
                                                                S* __restrict o) {
  S sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) {
    o[c] = r[c] + y[c];
    sum += o[c];
  }
  const S mean = sum / static_cast<S>(C);
  S squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t c = 0; c < C; ++c) squares += (o[c] - mean) * (o[c] - mean);
  const S rstd = S(1) / std::sqrt(squares / static_cast<S>(C) + eps);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) o[c] = (o[c] - mean) * rstd * w[c] + b[c];
}

template <class S>
void add_layer_norm_cpu(int64_t rows, int64_t C, const S* r, const S* y, const S* w, const S* b, S eps, S* out) {
  // A decoding step's rows (a few hundred of a few hundred features) stay on one thread.
  parallel_chunks(rows, workers_for(rows * C, 1 << 17), [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) norm_row(C, r + i * C, y + i * C, w, b, eps, out + i * C);
  });
}

bool fused_path(const torch::Tensor& residual, const torch::Tensor& y, const torch::Tensor& weight,
                const torch::Tensor& bias) {
  for (const auto* t : {&residual, &y, &weight, &bias}) {
    if (torch::GradMode::is_enabled() && t->requires_grad()) return false;
  }
  const auto type = y.scalar_type();
  if (type != torch::kFloat && type != torch::kDouble) return false;
  for (const auto* t : {&residual, &weight, &bias}) {
    if (t->scalar_type() != type || t->device() != y.device()) return false;
  }
  return y.is_cpu() || (add_layer_norm_cuda_available() && y.is_cuda());
}

}  // namespace

bool add_layer_norm_cuda_available() {
#ifdef LEANSEQ_WITH_CUDA
  return true;
#else
  return false;
#endif
}

torch::Tensor add_layer_norm_reference(const torch::Tensor& residual, const torch::Tensor& y,
                                       const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
  return torch::layer_norm(residual + y, {y.size(-1)}, weight, bias, eps);
}

torch::Tensor add_layer_norm(const torch::Tensor& residual, const torch::Tensor& y, const torch::Tensor& weight,
                             const torch::Tensor& bias, double eps) {
  TORCH_CHECK(residual.sizes() == y.sizes() && y.dim() >= 1, "add_layer_norm: residual ", residual.sizes(),
              " and y ", y.sizes(), " must have one shape");
  const int64_t C = y.size(-1);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == C && bias.dim() == 1 && bias.size(0) == C,
              "add_layer_norm: weight ", weight.sizes(), " and bias ", bias.sizes(), " must be [", C, "]");
  if (!fused_path(residual, y, weight, bias)) return add_layer_norm_reference(residual, y, weight, bias, eps);
  RECORD_FUNCTION("leanseq::add_layer_norm", std::vector<c10::IValue>({residual, y}));
  const auto rc = residual.contiguous(), yc = y.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
  auto out = torch::empty_like(yc);
  const int64_t rows = C ? y.numel() / C : 0;
  if (y.is_cpu()) {
    AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "add_layer_norm_cpu", [&] {
      add_layer_norm_cpu<scalar_t>(rows, C, rc.data_ptr<scalar_t>(), yc.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(),
                                   bc.data_ptr<scalar_t>(), static_cast<scalar_t>(eps), out.data_ptr<scalar_t>());
    });
    return out;
  }
#ifdef LEANSEQ_WITH_CUDA
  const auto stream = at::cuda::getCurrentCUDAStream(y.get_device()).stream();
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "add_layer_norm_cuda", [&] {
    const auto e = cuda::add_layer_norm<scalar_t>(rows, C, rc.data_ptr<scalar_t>(), yc.data_ptr<scalar_t>(),
                                                  wc.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(), eps,
                                                  out.data_ptr<scalar_t>(), stream);
    TORCH_CHECK(e == cudaSuccess, "add_layer_norm_cuda: ", cudaGetErrorString(e));
  });
#endif
  return out;
}

}  // namespace leanseq::kernels
