// The training engine, one loop for every task (train/task.h): shuffled length-sorted batches,
// gradient accumulation (optim.update_freq), mixed precision, clipping, data-parallel training over
// c10d (--nproc, torchrun), validation with checkpoint_best and stop.patience, interval and epoch
// checkpoints, exact resume, a clean stop on SIGINT/SIGTERM, and logs (text, JSON, train_log.jsonl).
#pragma once
#include <memory>
#include <string>

#include "leanseq/checkpoint/loop_options.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/train/task.h"

namespace leanseq::train {

struct TrainOutcome {
  int signal = 0;  // non-zero when stopped by SIGINT/SIGTERM (the caller exits 128 + signal)
  int64_t num_updates = 0, epochs_done = 0;
  double best_metric = 0, last_valid_loss = 0, last_valid_bleu = -1;
  // What the task's losses are weighted by (target tokens; classify: examples), summed over ranks.
  double train_tokens_per_second = 0;
  int64_t train_target_tokens = 0;
  double train_seconds = 0;
  // Distributed runs: seconds of train_seconds spent in the per-update collectives (loss sums and
  // gradients, waiting for the slowest rank included); 0 for one process.
  double comm_seconds = 0;
};

class Trainer {
 public:
  // With `resume`, continues from <save_dir>/checkpoint_last.pt when it exists.
  Trainer(std::unique_ptr<Task> task, const checkpoint::TrainLoopOptions& options, bool resume);
  // A translation or language-modelling run (train/translation_task.h).
  Trainer(checkpoint::RunConfig cfg, bool resume);
  ~Trainer();
  TrainOutcome run();
  Task& task();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leanseq::train
