#include "leanseq/checkpoint/run_config.h"

#include "leanseq/core/error.h"
#include "leanseq/data/lm_blocks.h"
#include "leanseq/models/registry.h"

namespace leanseq::checkpoint {

void RunConfig::visit(ConfigVisitor& v) {
  v.field("task", task, "seq2seq (translation and language models) or classify (text classification)");
  v.field("arch", arch, "model preset (leanseq list-archs)");
  v.field("data", data,
          "directory written by leanseq prepare or fairseq-preprocess, or shard directories a:b:c (one per "
          "epoch, in turn)");
  v.field("text.spm_model", text_spm_model,
          "SentencePiece model of a data directory that has none (fairseq-preprocess's): checkpoints carry it");
  v.field("text.tokenizer", text_tokenizer, "instead of text.spm_model: moses (fairseq's Moses tokenizer; 'moses no-dash-splits', 'moses no-escape'), or none (the text comes tokenized), then text.bpe_codes");
  v.field("text.bpe_codes", text_bpe_codes, "BPE codes (subword-nmt's or fastBPE's) applied after text.tokenizer (empty: none)");
  visit_loop(v);
  if (model) {
    PrefixedVisitor pv("model", v);
    model->visit(pv);
  }
  v.field("optim.optimizer", optimizer, "adam or nag (fairseq's Nesterov momentum, ConvS2S)");
  v.field("optim.momentum", momentum, "NAG momentum", Range::half_open(0, 1));
  adam.visit(v, "L2 weight decay (as torch.optim.Adam; NAG: decoupled, as fairseq)");
  v.field("optim.lr", lr.lr, "peak learning rate", Range::above(0));
  v.field("optim.lr_scheduler", lr.kind, "inverse_sqrt or fixed");
  v.field("optim.lr_shrink", lr.lr_shrink, "fixed: factor of each shrink", Range::left_open(0, 1));
  v.field("optim.force_anneal", lr.force_anneal, "fixed: shrink every epoch from this one on (0: never)", Range::at_least(0));
  v.field("optim.shrink_on_plateau", lr.shrink_on_plateau, "fixed: shrink when an epoch's valid loss does not improve");
  v.field("optim.warmup_updates", lr.warmup_updates, "linear warmup updates", Range::at_least(0));
  v.field("optim.warmup_init_lr", lr.warmup_init_lr, "learning rate at update 0 (-1: fairseq's default)",
          Range::at_least(-1));
  v.field("criterion.label_smoothing", label_smoothing, "label smoothing epsilon", Range::half_open(0, 1));
  v.field("pruned.method", pruned_method, "set by leanseq prune: weight or unit magnitude pruning");
  v.field("pruned.sparsity", pruned_sparsity, "set by leanseq prune: the fraction of prunable weights set to zero", kProbability);
  v.field("batch.max_tokens", max_tokens, "padded tokens per batch", Range::at_least(1));
  v.field("batch.max_sentences", max_sentences, "sentences per batch (0: no limit)", Range::at_least(0));
  v.field("batch.max_cells", max_cells,
          "padded source x target cells per batch, for models whose cost is their product (0: no limit)", Range::at_least(0));
  v.field("batch.max_source_len", max_source_len, "longest source in tokens, </s> included (0: no limit)", Range::at_least(0));
  v.field("batch.max_target_len", max_target_len, "longest target in tokens, </s> included (0: no limit)", Range::at_least(0));
  v.field("batch.too_long", too_long, "a pair over the length limits: error (stop, naming it) or skip");
  v.field("batch.tokens_per_sample", tokens_per_sample,
          "a language model's samples: blocks of this many tokens of the text as fairseq's language_modeling task "
          "cuts them (0: one sentence each, </s> first)",
          Range::at_least(0));
  v.field("batch.sample_break_mode", sample_break_mode,
          "with batch.tokens_per_sample: none (blocks across sentences), complete (whole sentences up to the size) or "
          "eos (a sentence each)");
  v.field("checkpoint.best_metric", best_metric, "loss or bleu");
  v.field("checkpoint.init_from", init_from,
          "start from the parameters of this checkpoint that the model has (same vocabularies; others stay random)");
  v.field("valid.bleu", eval_bleu, "compute detokenized BLEU on the valid set");
  v.field("valid.bleu_beam", eval_bleu_beam, "beam size for validation BLEU", Range::at_least(1));
  v.field("valid.bleu_max_sentences", eval_bleu_max_sentences, "decode at most N valid sentences (0: all)", Range::at_least(0));
  v.field("valid.bleu_lenpen", eval_bleu_lenpen, "length penalty for validation BLEU");
}

void RunConfig::validate() const {
  auto bad = [](const std::string& msg) { throw ConfigError(msg); };
  if (task != "seq2seq") bad("task: expected seq2seq here, got '" + task + "'");
  if (optimizer != "adam" && optimizer != "nag") {
    bad("optim.optimizer: unknown optimizer '" + optimizer + "' (expected adam or nag)");
  }
  if (too_long != "error" && too_long != "skip") bad("batch.too_long must be error or skip, got '" + too_long + "'");
  data::parse_break_mode(sample_break_mode, "batch.sample_break_mode");
  if (tokens_per_sample > 0 && model && !model->language_model()) {
    bad("batch.tokens_per_sample: blocks of text are a language model's samples; arch " + arch + " translates");
  }
  if (best_metric != "loss" && best_metric != "bleu") bad("checkpoint.best_metric must be loss or bleu");
  if (best_metric == "bleu" && !eval_bleu) bad("checkpoint.best_metric=bleu needs valid.bleu=true");
  validate_loop();
  model->validate();
}

data::BatchingOptions RunConfig::batching() const {
  data::BatchingOptions bo;
  bo.max_tokens = max_tokens;
  bo.max_sentences = max_sentences;
  bo.max_cells = max_cells;
  bo.max_source_len = max_source_len;
  bo.max_target_len = max_target_len;
  return bo;
}

RunConfig resolve_run_config(const ConfigValues& values) {
  auto cfg = unchecked_run_config(values);
  cfg.validate();
  return cfg;
}

RunConfig unchecked_run_config(const ConfigValues& values) {
  RunConfig cfg;
  auto it = values.values.find("arch");
  if (it != values.values.end()) cfg.arch = it->second;
  cfg.model = models::registry().preset_config(cfg.arch);
  if (cfg.model->family() == "classifier") {
    throw ConfigError("arch " + cfg.arch + " is a text classifier: train it with --task classify");
  }
  apply_config(cfg, values);
  return cfg;
}

std::string dump_run_config(RunConfig& cfg) { return dump_config_yaml(cfg); }

}  // namespace leanseq::checkpoint
