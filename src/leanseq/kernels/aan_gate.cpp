#include "leanseq/kernels/aan_gate.h"

#include <cmath>

#ifdef LEANSEQ_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "leanseq/kernels/cuda/aan_gate_cuda.cuh"
#endif

namespace leanseq::kernels {

namespace {

// This file is built with -ffast-math, which assumes no infinities: the logits are clamped where
// the sigmoid is already 0 or 1 to within 5e-18, so exp never overflows.
template <class S>
S sigmoid(S v) {
  constexpr S kLimit = 40;
  return S(1) / (S(1) + std::exp(-std::fmin(std::fmax(v, -kLimit), kLimit)));
}

// Compiled for AVX2 and a baseline; the loop vectorises (exp through libmvec).
template <class S>
__attribute__((target_clones("avx2", "default"))) void gate_row(int64_t C, const S* __restrict zi,
                                                                const S* __restrict xr, const S* __restrict gr,
                                                                S* __restrict o) {
  const S* __restrict zf = zi + C;
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) o[c] = sigmoid(zi[c]) * xr[c] + sigmoid(zf[c]) * gr[c];
}

template <class S>
void gate_cpu(int64_t rows, int64_t C, const S* z, const S* x, const S* g, S* out) {
  for (int64_t r = 0; r < rows; ++r) gate_row(C, z + 2 * C * r, x + C * r, g + C * r, out + C * r);
}

bool fused_path(const torch::Tensor& z, const torch::Tensor& x, const torch::Tensor& g) {
  if (torch::GradMode::is_enabled() && (z.requires_grad() || x.requires_grad() || g.requires_grad())) return false;
  const auto t = x.scalar_type();
  if ((t != torch::kFloat && t != torch::kDouble) || z.scalar_type() != t || g.scalar_type() != t) return false;
  if (x.is_cpu()) return z.is_cpu() && g.is_cpu();
  return aan_gate_cuda_available() && x.is_cuda() && z.device() == x.device() && g.device() == x.device();
}

#ifdef LEANSEQ_WITH_CUDA
void gate_cuda(int64_t rows, int64_t C, const torch::Tensor& z, const torch::Tensor& x, const torch::Tensor& g,
               torch::Tensor& out) {
  const auto stream = at::cuda::getCurrentCUDAStream(x.get_device()).stream();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "aan_gate_cuda", [&] {
    const auto e = cuda::aan_gate<scalar_t>(rows, C, z.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                            g.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), stream);
    TORCH_CHECK(e == cudaSuccess, "aan_gate_cuda: ", cudaGetErrorString(e));
  });
}
#endif

}  // namespace

bool aan_gate_cuda_available() {
#ifdef LEANSEQ_WITH_CUDA
  return true;
#else
  return false;
#endif
}

torch::Tensor aan_gate_reference(const torch::Tensor& z, const torch::Tensor& x, const torch::Tensor& g) {
  const auto gates = torch::sigmoid(z).chunk(2, -1);  // input, forget
  return torch::addcmul(gates[0] * x, gates[1], g);
}

torch::Tensor aan_gate(const torch::Tensor& z, const torch::Tensor& x, const torch::Tensor& g) {
  TORCH_CHECK(x.sizes() == g.sizes() && x.dim() >= 1, "aan_gate: x ", x.sizes(), " and g ", g.sizes(),
              " must have one shape");
  const int64_t C = x.size(-1);
  auto z_sizes = x.sizes().vec();
  z_sizes.back() = 2 * C;
  TORCH_CHECK(z.sizes() == c10::IntArrayRef(z_sizes), "aan_gate: z ", z.sizes(), " must be ", z_sizes);
  if (!fused_path(z, x, g)) return aan_gate_reference(z, x, g);
  RECORD_FUNCTION("leanseq::aan_gate", std::vector<c10::IValue>({z, x, g}));
  const auto zc = z.contiguous(), xc = x.contiguous(), gc = g.contiguous();
  auto out = torch::empty_like(xc);
  const int64_t rows = C ? x.numel() / C : 0;
  if (x.is_cpu()) {
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "aan_gate_cpu", [&] {
      gate_cpu<scalar_t>(rows, C, zc.data_ptr<scalar_t>(), xc.data_ptr<scalar_t>(), gc.data_ptr<scalar_t>(),
                         out.data_ptr<scalar_t>());
    });
    return out;
  }
#ifdef LEANSEQ_WITH_CUDA
  gate_cuda(rows, C, zc, xc, gc, out);
#endif
  return out;
}

}  // namespace leanseq::kernels
