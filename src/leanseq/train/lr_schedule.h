// Learning-rate schedules, as pure functions of the training position (updates, epoch, and the
// number of plateau shrinks so far, which the trainer keeps in its checkpointed progress).
#pragma once
#include <cstdint>
#include <string>

#include "leanseq/checkpoint/run_config.h"

namespace leanseq::train {

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
double learning_rate(const checkpoint::LrScheduleOptions& o, const LrPosition& at);

}  // namespace leanseq::train
