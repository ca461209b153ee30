// Mixed-precision training on CUDA (fairseq's --amp): the forward pass runs under LibTorch's
// autocast in float16 or bfloat16 while the weights, the optimizer and the loss stay float32.
// float16 gradients can overflow or vanish, so the loss is scaled before backward and the
// gradients unscaled before the update, as torch.cuda.amp.GradScaler does; an update whose
// gradients hold inf or NaN is skipped and the scale halved, and after `scale_window` good updates
// in a row the scale doubles. bfloat16 has float32's range and trains unscaled.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace leanseq::train {

// The loss scale alone (no tensors): what an update's outcome does to it.
class LossScale {
 public:
  LossScale(double init_scale, int64_t scale_window, double min_scale);
  double value() const { return scale_; }
  int64_t good_updates() const { return good_updates_; }  // good updates in a row since the last change
  // Continues from a saved scale and count (a resumed run goes on as the saved one would have).
  void restore(double scale, int64_t good_updates);
  // An update's gradients were finite (the scale may grow) or not (the update is skipped and the
  // scale halves). Throws TrainingError once the scale falls below the minimum: the model then
  // overflows even at a tiny scale, and float32 training is the way on.
  void update(bool overflow);

 private:
  double scale_;
  int64_t window_, good_updates_ = 0;
  double min_scale_;
};

class MixedPrecision {
 public:
  // dtype: "" (off), "float16" or "bfloat16"; autocast on CUDA (`cuda`) or the CPU.
  MixedPrecision(const std::string& dtype, bool cuda, double init_scale, int64_t scale_window, double min_scale);
  bool enabled() const { return dtype_ != torch::kFloat; }
  bool scaled() const { return dtype_ == torch::kHalf; }
  double scale() const { return scale_.value(); }
  const LossScale& loss_scale() const { return scale_; }
  LossScale& loss_scale() { return scale_; }

  // Autocast to this type on its device for its lifetime (nothing when off).
  class Autocast {
   public:
    explicit Autocast(const MixedPrecision& mp);
    ~Autocast();
    Autocast(const Autocast&) = delete;
    Autocast& operator=(const Autocast&) = delete;

   private:
    bool on_, cuda_ = false;
    bool was_enabled_ = false;
    at::ScalarType was_dtype_ = at::kHalf;
  };

  // The loss to call backward on: scaled for float16.
  torch::Tensor scale_loss(const torch::Tensor& loss) const;
  // Divides every gradient by `divisor` (the target tokens of the update) and, for float16, by
  // the loss scale in the same pass, then moves the scale. Returns false when a gradient holds
  // inf or NaN: the caller skips the update.
  bool unscale(const std::vector<torch::Tensor>& params, double divisor);

 private:
  at::ScalarType dtype_;
  bool cuda_;
  LossScale scale_;
};

}  // namespace leanseq::train
