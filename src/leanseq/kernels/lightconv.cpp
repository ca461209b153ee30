#include "leanseq/kernels/lightconv.h"

#include "leanseq/core/error.h"
#include "leanseq/kernels/lightconv_ref.h"

namespace leanseq::kernels {

LightconvImpl parse_lightconv_impl(const std::string& name, const std::string& key) {
  if (name == "auto") return LightconvImpl::kAuto;
  if (name == "unfold") return LightconvImpl::kUnfold;
  if (name == "band") return LightconvImpl::kBand;
  if (name == "kernel") return LightconvImpl::kKernel;
  throw ConfigError(key + ": expected auto, unfold, band or kernel, got '" + name + "'");
}

const char* lightconv_impl_name(LightconvImpl impl) {
  switch (impl) {
    case LightconvImpl::kAuto: return "auto";
    case LightconvImpl::kUnfold: return "unfold";
    case LightconvImpl::kBand: return "band";
    case LightconvImpl::kKernel: return "kernel";
  }
  return "?";
}

LightconvShape lightconv_shape(const torch::Tensor& x, const torch::Tensor& w, int64_t padding_l) {
  LightconvShape s{};
  s.B = x.size(0), s.T = x.size(1), s.C = x.size(2);
  const bool shared = w.dim() == 2;
  s.H = shared ? w.size(0) : w.size(1);
  s.K = shared ? w.size(1) : w.size(3);
  TORCH_CHECK(shared || (w.size(0) == s.B && w.size(2) == s.T), "lightconv: weights ", w.sizes(), " do not match x ",
              x.sizes());
  TORCH_CHECK(s.C % s.H == 0, "lightconv: channels ", s.C, " not divisible by heads ", s.H);
  TORCH_CHECK(padding_l >= 0 && padding_l < s.K, "lightconv: padding_l ", padding_l, " outside [0, ", s.K, ")");
  s.R = s.C / s.H, s.P = padding_l;
  // Contiguous [B, H, T, K], or [H, K] repeated over batch and time.
  s.wb = shared ? 0 : s.H * s.T * s.K, s.wh = shared ? s.K : s.T * s.K, s.wt = shared ? 0 : s.K;
  return s;
}

namespace {
bool kernel_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble;
}
}  // namespace

torch::Tensor lightconv(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l, LightconvImpl impl) {
  TORCH_CHECK(x.dim() == 3, "lightconv: x must be [B, T, C], got ", x.sizes());
  TORCH_CHECK(weights.dim() == 2 || weights.dim() == 4, "lightconv: weights must be [H, K] or [B, H, T, K], got ",
              weights.sizes());
  if (impl == LightconvImpl::kAuto && x.is_cpu() && x.scalar_type() == torch::kBFloat16 &&
      weights.scalar_type() == torch::kBFloat16 && torch::GradMode::is_enabled() &&
      (x.requires_grad() || weights.requires_grad())) {
    // Training under `--bf16`: the float32 kernel on the widened operands (exact), its result
    // rounded back, rather than the band's bfloat16 products, one per (sentence, head).
    return lightconv_cpu(x.to(torch::kFloat), weights.to(torch::kFloat), padding_l).to(torch::kBFloat16);
  }
  if (impl == LightconvImpl::kAuto) {
    const bool has_kernel = kernel_dtype(x) && (x.is_cpu() || (x.is_cuda() && lightconv_cuda_available()));
    impl = has_kernel ? LightconvImpl::kKernel : LightconvImpl::kBand;
  }
  if (impl == LightconvImpl::kKernel) return x.is_cuda() ? lightconv_cuda(x, weights, padding_l) : lightconv_cpu(x, weights, padding_l);
  auto w = weights.dim() == 2 ? weights.view({1, weights.size(0), 1, weights.size(1)})
                                    .expand({x.size(0), weights.size(0), x.size(1), weights.size(1)})
                              : weights;
  return impl == LightconvImpl::kUnfold ? lightconv_unfold(x, w, padding_l) : lightconv_band(x, w, padding_l);
}

}  // namespace leanseq::kernels
