// Learning-rate schedules, as pure functions of the number of completed updates (so a resumed
// run needs no extra state).
#pragma once
#include <cstdint>
#include <string>

namespace leanseq::train {

struct LrScheduleOptions {
  std::string kind = "inverse_sqrt";  // inverse_sqrt | fixed
  double lr = 5e-4;
  int64_t warmup_updates = 4000;
  double warmup_init_lr = 1e-7;  // < 0: 0 with warmup, lr without (fairseq's default)
};

// fairseq's InverseSquareRootSchedule: linear warmup from warmup_init_lr to lr over
// warmup_updates, then lr * sqrt(warmup_updates / num_updates). "fixed": lr (with the same
// optional linear warmup).
double learning_rate(const LrScheduleOptions& o, int64_t num_updates);

}  // namespace leanseq::train
