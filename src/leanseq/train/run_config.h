// The resolved configuration of a training run: arch, model (the family's typed config), data,
// optimisation, batching, stopping, checkpointing, logging and validation. Precedence: family
// defaults < preset (arch) < config file < --set overrides < explicit flags.
#pragma once
#include <memory>
#include <string>

#include "leanseq/core/config.h"
#include "leanseq/data/batching.h"
#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/targeted_dropout.h"
#include "leanseq/train/lr_schedule.h"

namespace leanseq::train {

struct RunConfig : Configurable {
  std::string task = "seq2seq";       // classify runs take a ClassifyConfig instead (train/classify.h)
  std::string arch = "transformer_small";
  std::string data;                   // directory written by `leanseq prepare`
  std::string save_dir = "checkpoints";
  int64_t seed = 1;
  int64_t threads = 0;                // 0: ATen's default
  std::string device = "cpu";         // cpu, cuda or cuda:N (distributed: cuda means cuda:LOCAL_RANK)
  std::shared_ptr<models::ModelConfig> model;

  // optimisation
  std::string optimizer = "adam";  // adam | nag
  double adam_beta1 = 0.9, adam_beta2 = 0.98, adam_eps = 1e-8, weight_decay = 0.0;
  double momentum = 0.99;          // nag
  double clip_norm = 0.0;             // 0: no clipping
  int64_t update_freq = 1;            // gradient accumulation
  LrScheduleOptions lr;
  double label_smoothing = 0.1;
  nn::TargetedDropoutOptions td;      // targeted dropout over the model's weights
  // Set by `leanseq prune` on the checkpoints it writes (informational).
  std::string pruned_method;
  double pruned_sparsity = 0;

  // batching
  int64_t max_tokens = 4096, max_sentences = 0;
  int64_t max_cells = 0;                            // source x target grid cells per batch (0: no limit)
  int64_t max_source_len = 0, max_target_len = 0;  // longer pairs: too_long decides (0: no limit)
  std::string too_long = "error";                   // error | skip
  data::BatchingOptions batching() const;

  // stopping (0: no limit)
  int64_t max_epoch = 0, max_update = 0;
  double max_minutes = 0;
  int64_t patience = 0;  // validations in a row without a better best_metric (0: never stop for that)

  // checkpoints
  int64_t save_interval_updates = 0;  // also save checkpoint_<epoch>_<updates>.pt every N updates
  int64_t keep_interval_updates = -1; // keep only the last N of those (-1: all)
  bool no_epoch_checkpoints = false;
  std::string best_metric = "loss";   // loss | bleu
  std::string init_from;              // start from this checkpoint's matching parameters

  // logging
  int64_t log_interval = 100;
  std::string log_format = "auto";    // auto (bar on a TTY, text otherwise) | text | json

  // validation
  int64_t validate_interval_updates = 0;  // also validate every N updates (0: per epoch only)
  bool eval_bleu = false;
  int64_t eval_bleu_beam = 5;
  int64_t eval_bleu_max_sentences = 0;    // 0: the whole valid set
  double eval_bleu_lenpen = 1.0;

  // data parallel over the ranks of WORLD_SIZE (train/distributed.h)
  double dist_timeout = 300;    // seconds for the rendezvous and for every collective
  double dist_bucket_mb = 25;   // gradient all-reduce bucket size
  int64_t dist_check_weights = 0;  // every N updates, check that all ranks hold rank 0's weights (0: never)

  void visit(ConfigVisitor& v) override;
  void validate() const;
};

// Throws ConfigError naming `key` unless `device` is cpu, cuda or cuda:N.
void check_device_name(const std::string& device, const std::string& key = "device");
// The device `name` (cpu, cuda or cuda:N; a plain cuda is cuda:`default_index`), after checking
// that it is there: ConfigError naming `key` and the device when this LibTorch has no CUDA, no GPU
// is visible or the index is past the GPUs.
torch::Device resolve_device(const std::string& name, const std::string& key, int default_index = 0);

// Builds a RunConfig from layered values ("arch" selects the preset first).
RunConfig resolve_run_config(const ConfigValues& values);
// The resolved config as YAML (what checkpoints carry).
std::string dump_run_config(RunConfig& cfg);

}  // namespace leanseq::train
