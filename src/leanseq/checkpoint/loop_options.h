// What the training engine (train/trainer.h) needs of a run whatever its task: where it saves,
// its device and threads, accumulation, clipping, mixed precision, stopping, validation and
// checkpoint intervals, logging, distributed settings and targeted dropout. Each task's config
// (RunConfig, ClassifyConfig) is one of these plus its own keys; the keys are the same for every
// task.
#pragma once
#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "leanseq/core/config.h"
#include "leanseq/nn/targeted_dropout.h"

namespace leanseq::checkpoint {

// Adam's settings (optim.adam_beta1, adam_beta2, adam_eps, weight_decay), the same keys for every
// task; the defaults differ (fairseq's translation recipes take beta2 0.98).
struct AdamSettings {
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-8, weight_decay = 0.0;
  void visit(ConfigVisitor& v, const char* weight_decay_help);
  torch::optim::AdamOptions options(double lr) const;
};

struct TrainLoopOptions {
  std::string save_dir = "checkpoints";
  int64_t seed = 1;
  int64_t threads = 0;         // 0: ATen's default
  std::string device = "cpu";  // cpu, cuda or cuda:N (distributed: cuda means cuda:LOCAL_RANK)

  double clip_norm = 0.0;        // 0: no clipping
  int64_t update_freq = 1;       // gradient accumulation
  std::string amp;               // mixed precision: "" (off), float16 (CUDA) or bfloat16
  double amp_init_scale = 128;   // float16's first loss scale (fairseq's --fp16-init-scale)
  int64_t amp_scale_window = 0;  // good updates before the scale doubles (0: 2^14 / (ranks * update_freq))
  double amp_min_scale = 1e-4;   // below this scale training stops (fairseq's --min-loss-scale)
  nn::TargetedDropoutOptions td;  // targeted dropout over the model's weights

  // stopping (0: no limit)
  int64_t max_epoch = 0, max_update = 0;
  double max_minutes = 0;
  int64_t patience = 0;  // validations in a row without a better best metric (0: never stop for that)

  // checkpoints
  int64_t save_interval_updates = 0;   // also save checkpoint_<epoch>_<updates>.pt every N updates
  int64_t keep_interval_updates = -1;  // keep only the last N of those (-1: all)
  int64_t keep_last_epochs = -1;       // keep only the last N checkpoint<epoch>.pt (-1: all)
  bool no_epoch_checkpoints = false;
  bool no_save_optimizer_state = false;  // checkpoints without the optimizer's state (a resume starts it afresh)
  std::string restore_file;            // resume from this checkpoint instead of <save_dir>/checkpoint_last.pt

  int64_t log_interval = 100;
  std::string log_format = "auto";         // auto (bar on a TTY, text otherwise) | text | json | none
  int64_t validate_interval_updates = 0;  // also validate every N updates (0: per epoch only)

  // data parallel over the ranks of WORLD_SIZE (train/distributed.h)
  double dist_timeout = 300;       // seconds for the rendezvous and for every collective
  double dist_bucket_mb = 25;      // gradient all-reduce bucket size
  int64_t dist_check_weights = 0;  // every N updates, check that all ranks hold rank 0's weights (0: never)

  void visit_loop(ConfigVisitor& v);
  void validate_loop() const;  // ConfigError naming the key
};

// Throws ConfigError naming `key` unless `device` is cpu, cuda or cuda:N.
void check_device_name(const std::string& device, const std::string& key = "device");

// The device `name` (cpu, cuda or cuda:N; a plain cuda is cuda:`default_index`), after checking
// that it is there: ConfigError naming `key` and the device when this LibTorch has no CUDA, no GPU
// is visible or the index is past the GPUs.
torch::Device resolve_device(const std::string& name, const std::string& key, int default_index = 0);

}  // namespace leanseq::checkpoint
