#include "leanseq/train/run_config.h"

#include "leanseq/core/error.h"
#include "leanseq/core/threads.h"
#include "leanseq/models/registry.h"

namespace leanseq::train {

void RunConfig::visit(ConfigVisitor& v) {
  v.field("task", task, "seq2seq (translation and language models) or classify (text classification)");
  v.field("arch", arch, "model preset (leanseq list-archs)");
  v.field("data", data, "directory written by leanseq prepare");
  v.field("save_dir", save_dir, "where checkpoints and the training log go");
  v.field("seed", seed, "random seed");
  v.field("threads", threads, kComputeThreadsHelp);
  v.field("device", device, "where to train: cpu, cuda or cuda:N (CUDA builds; distributed runs: cuda is cuda:LOCAL_RANK)");
  if (model) {
    PrefixedVisitor pv("model", v);
    model->visit(pv);
  }
  v.field("optim.optimizer", optimizer, "adam or nag (fairseq's Nesterov momentum, ConvS2S)");
  v.field("optim.momentum", momentum, "NAG momentum");
  v.field("optim.adam_beta1", adam_beta1, "Adam beta1");
  v.field("optim.adam_beta2", adam_beta2, "Adam beta2");
  v.field("optim.adam_eps", adam_eps, "Adam epsilon");
  v.field("optim.weight_decay", weight_decay, "L2 weight decay (as torch.optim.Adam; NAG: decoupled, as fairseq)");
  v.field("optim.clip_norm", clip_norm, "clip the global gradient norm (0: off)");
  v.field("optim.update_freq", update_freq, "accumulate gradients over N batches");
  v.field("optim.lr", lr.lr, "peak learning rate");
  v.field("optim.lr_scheduler", lr.kind, "inverse_sqrt or fixed");
  v.field("optim.lr_shrink", lr.lr_shrink, "fixed: factor of each shrink");
  v.field("optim.force_anneal", lr.force_anneal, "fixed: shrink every epoch from this one on (0: never)");
  v.field("optim.shrink_on_plateau", lr.shrink_on_plateau, "fixed: shrink when an epoch's valid loss does not improve");
  v.field("optim.warmup_updates", lr.warmup_updates, "linear warmup updates");
  v.field("optim.warmup_init_lr", lr.warmup_init_lr, "learning rate at update 0 (-1: fairseq's default)");
  v.field("criterion.label_smoothing", label_smoothing, "label smoothing epsilon");
  td.visit(v, "td.");
  v.field("pruned.method", pruned_method, "set by leanseq prune: weight or unit magnitude pruning");
  v.field("pruned.sparsity", pruned_sparsity, "set by leanseq prune: the fraction of prunable weights set to zero");
  v.field("batch.max_tokens", max_tokens, "padded tokens per batch");
  v.field("batch.max_sentences", max_sentences, "sentences per batch (0: no limit)");
  v.field("batch.max_cells", max_cells,
          "padded source x target cells per batch, for models whose cost is their product (0: no limit)");
  v.field("batch.max_source_len", max_source_len, "longest source in tokens, </s> included (0: no limit)");
  v.field("batch.max_target_len", max_target_len, "longest target in tokens, </s> included (0: no limit)");
  v.field("batch.too_long", too_long, "a pair over the length limits: error (stop, naming it) or skip");
  v.field("stop.max_epoch", max_epoch, "stop after N epochs (0: no limit)");
  v.field("stop.max_update", max_update, "stop after N updates (0: no limit)");
  v.field("stop.max_minutes", max_minutes, "stop after N minutes of wall-clock time (0: no limit)");
  v.field("stop.patience", patience,
          "stop after N validations in a row without a better checkpoint.best_metric (fairseq's --patience; 0: never)");
  v.field("checkpoint.save_interval_updates", save_interval_updates, "also save every N updates");
  v.field("checkpoint.keep_interval_updates", keep_interval_updates, "keep the last N update checkpoints (-1: all)");
  v.field("checkpoint.no_epoch_checkpoints", no_epoch_checkpoints, "only keep checkpoint_last/best");
  v.field("checkpoint.best_metric", best_metric, "loss or bleu");
  v.field("checkpoint.init_from", init_from,
          "start from the parameters of this checkpoint that the model has (same vocabularies; others stay random)");
  v.field("log.interval", log_interval, "log every N updates");
  v.field("log.format", log_format, "auto, text or json");
  v.field("valid.interval_updates", validate_interval_updates, "also validate every N updates");
  v.field("valid.bleu", eval_bleu, "compute detokenized BLEU on the valid set");
  v.field("valid.bleu_beam", eval_bleu_beam, "beam size for validation BLEU");
  v.field("valid.bleu_max_sentences", eval_bleu_max_sentences, "decode at most N valid sentences (0: all)");
  v.field("valid.bleu_lenpen", eval_bleu_lenpen, "length penalty for validation BLEU");
  v.field("dist.timeout", dist_timeout,
          "distributed runs: seconds to wait for every rank at the rendezvous and in each collective");
  v.field("dist.bucket_mb", dist_bucket_mb, "distributed runs: MiB of gradients per all-reduce bucket");
  v.field("dist.check_weights", dist_check_weights,
          "distributed runs: every N updates, check that every rank holds rank 0's weights (0: never)");
}

void RunConfig::validate() const {
  auto bad = [](const std::string& msg) { throw ConfigError(msg); };
  if (task != "seq2seq") bad("task: expected seq2seq here, got '" + task + "'");
  if (optimizer != "adam" && optimizer != "nag") {
    bad("optim.optimizer: unknown optimizer '" + optimizer + "' (expected adam or nag)");
  }
  if (momentum < 0 || momentum >= 1) bad("optim.momentum must be in [0, 1)");
  if (lr.lr_shrink <= 0 || lr.lr_shrink > 1) bad("optim.lr_shrink must be in (0, 1]");
  if (lr.force_anneal < 0) bad("optim.force_anneal must be 0 (off) or an epoch");
  if (update_freq < 1) bad("optim.update_freq must be at least 1");
  if (patience < 0) bad("stop.patience must be 0 (never) or positive");
  if (max_tokens < 1) bad("batch.max_tokens must be positive");
  if (max_cells < 0 || max_source_len < 0 || max_target_len < 0) {
    bad("batch.max_cells, batch.max_source_len and batch.max_target_len must be 0 (no limit) or positive");
  }
  if (too_long != "error" && too_long != "skip") bad("batch.too_long must be error or skip, got '" + too_long + "'");
  if (lr.lr <= 0) bad("optim.lr must be positive");
  if (label_smoothing < 0 || label_smoothing >= 1) bad("criterion.label_smoothing must be in [0, 1)");
  if (best_metric != "loss" && best_metric != "bleu") bad("checkpoint.best_metric must be loss or bleu");
  if (best_metric == "bleu" && !eval_bleu) bad("checkpoint.best_metric=bleu needs valid.bleu=true");
  if (log_format != "auto" && log_format != "text" && log_format != "json") bad("log.format must be auto, text or json");
  if (log_interval < 1) bad("log.interval must be positive");
  if (dist_timeout <= 0) bad("dist.timeout must be positive (seconds)");
  if (dist_bucket_mb <= 0) bad("dist.bucket_mb must be positive");
  if (dist_check_weights < 0) bad("dist.check_weights must be 0 (never) or a number of updates");
  check_device_name(device);
  td.validate();
  model->validate();
}

void check_device_name(const std::string& device, const std::string& key) {
  bool known_device = false;
  try {
    torch::Device d(device);
    known_device = d.is_cpu() || d.is_cuda();
  } catch (const std::exception&) {
  }
  if (!known_device) throw ConfigError(key + ": '" + device + "' is not cpu, cuda or cuda:N");
}

torch::Device resolve_device(const std::string& name, const std::string& key, int default_index) {
  check_device_name(name, key);
  torch::Device d(name);
  if (!d.is_cuda()) return d;
  if (!torch::cuda::is_available()) {
    throw ConfigError(key + ": " + name + ": no CUDA GPU is visible (or this LibTorch has no CUDA)");
  }
  if (!d.has_index()) d = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(default_index));
  if (d.index() >= static_cast<int>(torch::cuda::device_count())) {
    throw ConfigError(key + ": " + d.str() + ": this machine has " + std::to_string(torch::cuda::device_count()) +
                      " GPU(s)");
  }
  return d;
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
  RunConfig cfg;
  auto it = values.values.find("arch");
  if (it != values.values.end()) cfg.arch = it->second;
  cfg.model = models::registry().preset_config(cfg.arch);
  if (cfg.model->family() == "classifier") {
    throw ConfigError("arch " + cfg.arch + " is a text classifier: train it with --task classify");
  }
  apply_config(cfg, values);
  cfg.validate();
  return cfg;
}

std::string dump_run_config(RunConfig& cfg) { return dump_config_yaml(cfg); }

}  // namespace leanseq::train
