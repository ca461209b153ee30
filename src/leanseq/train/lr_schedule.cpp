#include "leanseq/train/lr_schedule.h"

#include <cmath>

#include "leanseq/core/error.h"

namespace leanseq::train {

double learning_rate(const checkpoint::LrScheduleOptions& o, const LrPosition& at) {
  double init = o.warmup_init_lr >= 0 ? o.warmup_init_lr : (o.warmup_updates > 0 ? 0.0 : o.lr);
  if (at.num_updates < o.warmup_updates) {
    return init + static_cast<double>(at.num_updates) * (o.lr - init) / static_cast<double>(o.warmup_updates);
  }
  if (o.kind == "fixed") {
    double lr = o.lr * std::pow(o.lr_shrink, static_cast<double>(at.plateau_shrinks));
    if (o.force_anneal > 0 && at.epoch >= o.force_anneal) {
      lr *= std::pow(o.lr_shrink, static_cast<double>(at.epoch + 1 - o.force_anneal));
    }
    return lr;
  }
  if (o.kind == "inverse_sqrt") {
    // fairseq: decay_factor = lr * sqrt(warmup); lr = decay_factor / sqrt(num_updates).
    double warm = static_cast<double>(std::max<int64_t>(o.warmup_updates, 1));
    return o.lr * std::sqrt(warm) / std::sqrt(static_cast<double>(std::max<int64_t>(at.num_updates, 1)));
  }
  throw ConfigError("optim.lr_scheduler: unknown schedule '" + o.kind + "' (expected inverse_sqrt or fixed)");
}

}  // namespace leanseq::train
