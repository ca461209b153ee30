// The resolved configuration of a sequence-to-sequence training run (translation, language
// modelling): the engine's options (checkpoint/loop_options.h) plus arch, model (the family's typed
// config), data, optimiser, schedule, batching and validation. Precedence: family defaults <
// preset (arch) < config file < --set overrides < explicit flags.
#pragma once
#include <memory>
#include <string>

#include "leanseq/checkpoint/loop_options.h"
#include "leanseq/core/config.h"
#include "leanseq/data/batching.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::checkpoint {

// The learning-rate schedule (train/lr_schedule.h computes it).
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


struct RunConfig : Configurable, TrainLoopOptions {
  std::string task = "seq2seq";       // classify runs take a ClassifyConfig instead (checkpoint/classify_config.h)
  std::string arch = "transformer_small";
  std::string data;                   // directory written by `leanseq prepare`
  // The text pipeline of a data directory without one (fairseq-preprocess's): a SentencePiece
  // model, or Moses tokenization with optional subword-nmt codes.
  std::string text_spm_model, text_tokenizer, text_bpe_codes;
  std::shared_ptr<models::ModelConfig> model;

  // optimisation
  std::string optimizer = "adam";  // adam | nag
  AdamSettings adam;               // (its weight_decay is also NAG's, decoupled)
  double momentum = 0.99;          // nag
  LrScheduleOptions lr;
  double label_smoothing = 0.1;
  // Set by `leanseq prune` on the checkpoints it writes (informational).
  std::string pruned_method;
  double pruned_sparsity = 0;

  // batching
  int64_t max_tokens = 4096, max_sentences = 0;
  int64_t max_cells = 0;                            // source x target grid cells per batch (0: no limit)
  int64_t max_source_len = 0, max_target_len = 0;  // longer pairs: too_long decides (0: no limit)
  std::string too_long = "error";                   // error | skip
  // A language model's samples: blocks of the token stream as fairseq's language_modeling task
  // cuts them (data/lm_blocks.h), or 0: one sentence each.
  int64_t tokens_per_sample = 0;
  std::string sample_break_mode = "none";
  data::BatchingOptions batching() const;

  // checkpoints
  std::string best_metric = "loss";   // loss | bleu
  std::string init_from;              // start from this checkpoint's matching parameters

  // validation
  bool eval_bleu = false;
  int64_t eval_bleu_beam = 5;
  int64_t eval_bleu_max_sentences = 0;    // 0: the whole valid set
  double eval_bleu_lenpen = 1.0;

  void visit(ConfigVisitor& v) override;
  void validate() const;
};

// Builds a RunConfig from layered values ("arch" selects the preset first).
RunConfig resolve_run_config(const ConfigValues& values);
// The same without validate(): every key set, whether or not the run could start (to list keys).
RunConfig unchecked_run_config(const ConfigValues& values);
// The resolved config as YAML (what checkpoints carry).
std::string dump_run_config(RunConfig& cfg);

}  // namespace leanseq::checkpoint
