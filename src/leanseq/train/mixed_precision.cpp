#include "leanseq/train/mixed_precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <cmath>

#include "leanseq/core/error.h"

// LibTorch 2.4 made autocast's switches per device type; 1.13 (Debian's) has the CUDA ones alone.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define LEANSEQ_AUTOCAST_PER_DEVICE 1
#endif

namespace leanseq::train {

namespace {

// Autocast's switch and type for CUDA (`cuda`) or the CPU.
bool autocast_enabled(bool cuda) {
#ifdef LEANSEQ_AUTOCAST_PER_DEVICE
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

at::ScalarType autocast_dtype(bool cuda) {
#ifdef LEANSEQ_AUTOCAST_PER_DEVICE
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

void set_autocast(bool cuda, bool on, at::ScalarType dtype) {
#ifdef LEANSEQ_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, on);
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
#else
  if (cuda) {
    at::autocast::set_enabled(on);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(on);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

at::ScalarType parse_dtype(const std::string& dtype) {
  if (dtype.empty()) return torch::kFloat;
  if (dtype == "float16") return torch::kHalf;
  if (dtype == "bfloat16") return torch::kBFloat16;
  throw ConfigError("optim.amp: expected float16 or bfloat16 (or nothing for float32), got '" + dtype + "'");
}

}  // namespace

LossScale::LossScale(double init_scale, int64_t scale_window, double min_scale)
    : scale_(init_scale), window_(scale_window), min_scale_(min_scale) {}

void LossScale::restore(double scale, int64_t good_updates) {
  if (!(scale > 0) || !std::isfinite(scale) || good_updates < 0) {
    throw Error("mixed precision: a saved loss scale of " + std::to_string(scale) + " after " +
                std::to_string(good_updates) + " good updates cannot be resumed from");
  }
  scale_ = scale;
  good_updates_ = good_updates;
}

void LossScale::update(bool overflow) {
  if (overflow) {
    scale_ *= 0.5;
    good_updates_ = 0;
    if (scale_ < min_scale_) {
      throw Error("mixed precision: the loss scale fell below optim.amp_min_scale (" + std::to_string(min_scale_) +
                  "): float16 gradients overflow even at that scale; train in float32 or with --amp-dtype bfloat16");
    }
    return;
  }
  if (++good_updates_ >= window_) {
    scale_ *= 2.0;
    good_updates_ = 0;
  }
}

MixedPrecision::MixedPrecision(const std::string& dtype, bool cuda, double init_scale, int64_t scale_window,
                               double min_scale)
    : dtype_(parse_dtype(dtype)), cuda_(cuda), scale_(init_scale, scale_window, min_scale) {}

MixedPrecision::Autocast::Autocast(const MixedPrecision& mp) : on_(mp.enabled()) {
  if (!on_) return;
  cuda_ = mp.cuda_;
  was_enabled_ = autocast_enabled(cuda_);
  was_dtype_ = autocast_dtype(cuda_);
  set_autocast(cuda_, true, mp.dtype_);
  at::autocast::increment_nesting();
}

MixedPrecision::Autocast::~Autocast() {
  if (!on_) return;
  // The casts of the weights are cached for one forward pass; the outermost guard drops them.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, was_enabled_, was_dtype_);
}

torch::Tensor MixedPrecision::scale_loss(const torch::Tensor& loss) const {
  return scaled() ? loss * scale_.value() : loss;
}

bool MixedPrecision::unscale(const std::vector<torch::Tensor>& params, double divisor) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (!scaled()) {
    for (auto& g : grads) g.div_(divisor);
    return true;
  }
  if (grads.empty()) return true;
  // One fused pass (ATen's, as GradScaler's): multiply by 1 / (divisor * scale) and note any inf/NaN.
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(grads.front().device());
  auto found_inf = torch::zeros({1}, opts);
  auto inv_scale = torch::full({1}, 1.0 / (divisor * scale_.value()), opts);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  const bool overflow = found_inf.item<float>() > 0;
  scale_.update(overflow);
  return !overflow;
}

}  // namespace leanseq::train
