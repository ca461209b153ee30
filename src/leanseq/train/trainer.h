// The training loop: token-based batches, label-smoothed cross-entropy, Adam with a schedule,
// gradient accumulation and clipping, validation, checkpoints, exact resume, clean stop on signals.
#pragma once
#include <memory>
#include <string>

#include "leanseq/train/run_config.h"

namespace leanseq::train {

struct TrainOutcome {
  int signal = 0;  // non-zero when stopped by SIGINT/SIGTERM (the caller exits 128 + signal)
  int64_t num_updates = 0, epochs_done = 0;
  double best_metric = 0, last_valid_loss = 0, last_valid_bleu = -1;
  double train_tokens_per_second = 0;
  int64_t train_target_tokens = 0;
  double train_seconds = 0;
  // Distributed runs: seconds of train_seconds spent in the per-update collectives (loss sums and
  // gradients, waiting for the slowest rank included); 0 for one process.
  double comm_seconds = 0;
};

struct ValidResult {
  double loss = 0, nll_loss = 0;  // per target token, base 2 (as fairseq reports)
  double bleu = -1;               // detokenized sacreBLEU (13a) when enabled
};

class Trainer {
 public:
  // With `resume`, continues from <save_dir>/checkpoint_last.pt when it exists.
  Trainer(RunConfig cfg, bool resume);
  ~Trainer();
  TrainOutcome run();
  ValidResult validate();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leanseq::train
