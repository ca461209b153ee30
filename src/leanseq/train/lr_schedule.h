// Learning-rate schedules, as pure functions of the training position (updates, epoch, and the
// number of plateau shrinks so far, which the trainer keeps in its checkpointed progress).
#pragma once
#include <cstdint>
#include <string>

namespace leanseq::train {

struct LrScheduleOptions {
  std::string kind = "inverse_sqrt";  // inverse_sqrt | fixed
  double lr = 5e-4;
  int64_t warmup_updates = 4000;
  double warmup_init_lr = 1e-7;  // < 0: 0 with warmup, lr without (fairseq's default)
  // fixed only: the factor applied at each shrink, the epoch from which the rate anneals
  // (0: never), and whether a validation loss that does not improve shrinks the rate.
  double lr_shrink = 0.1;
  int64_t force_anneal = 0;
  bool shrink_on_plateau = false;
};

// Where training stands, as far as the schedule is concerned.
struct LrPosition {
  int64_t num_updates = 0;
  int64_t epoch = 1;            // the epoch in progress (1-based)
  int64_t plateau_shrinks = 0;  // end-of-epoch validations whose loss did not improve
};

// fairseq's InverseSquareRootSchedule: linear warmup from warmup_init_lr to lr over
// warmup_updates, then lr * sqrt(warmup_updates / num_updates). "fixed" (fairseq's
// FixedLRSchedule, plus ConvS2S's shrink on plateau): after the same optional warmup,
// lr * lr_shrink^plateau_shrinks, and from epoch force_anneal on a further
// lr_shrink^(epoch + 1 - force_anneal).
double learning_rate(const LrScheduleOptions& o, const LrPosition& at);

}  // namespace leanseq::train
